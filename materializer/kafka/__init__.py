"""The materializer's own Kafka and schema registry clients (the Spark job's source and
sink are Spark's)."""
