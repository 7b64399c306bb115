"""`casscade verify`: the stream checked against the table it comes from."""
