"""The Spark side: the streaming query, the partition stores' tasks, checkpoints, metrics."""
