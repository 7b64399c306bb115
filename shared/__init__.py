"""Code both casscade stages import: config, logs, metrics, HTTP, CQL codecs, schema, RowUpdate."""
