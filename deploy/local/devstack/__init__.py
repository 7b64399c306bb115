"""The local development and test stack: Kafka 4 + Cassandra 5.0 from Maven Central."""
