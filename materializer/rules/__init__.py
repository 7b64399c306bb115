"""The merge rules: a partition key's state, last-write-wins merge, row images, events.

Pure: no Spark, Kafka, network or file I/O (an import-linter contract holds it)."""
