"""Reading Cassandra commit log segments (descriptor versions 7 and 8) into mutations.

One module per concern, like Cassandra's own db/commitlog: `descriptor` (the file header),
`segment` (sync sections and entry framing), `compression`, `vint`, `model` (decoded
structures), `decoder` (mutation bytes → partition updates), `reader` (all of it together).
"""
