"""Change events as bytes: the Debezium envelope in JSON and Avro, type mapping, registries."""
