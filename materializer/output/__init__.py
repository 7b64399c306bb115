"""Change events as bytes: the Debezium envelope in JSON and Avro, type mapping, the Avro
wire headers (pure: the clients that publish schemas are in `materializer.kafka`)."""
