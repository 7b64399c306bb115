"""State kept by the materializer itself, beside Spark's checkpoint (no Spark imports)."""
