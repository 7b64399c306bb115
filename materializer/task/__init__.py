"""What one task of the merge does, whatever runs it: its records merged key by key into
events over its partition stores, its worker's shared clients, its stats (no Spark)."""
