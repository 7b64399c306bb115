"""The node agent: follows cdc_raw, splits mutations, publishes, retires segments."""
