"""The materializer's own Kafka clients (the Spark job's source and sink are Spark's)."""
