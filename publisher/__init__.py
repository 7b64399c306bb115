"""casscade's node agent: reads CDC commit log segments and publishes row updates to Kafka."""
