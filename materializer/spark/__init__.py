"""The Spark side: the streaming query, the stateful processor, state layout and metrics."""
