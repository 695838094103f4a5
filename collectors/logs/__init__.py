"""Server logs: one module per log format, the prefix, text plans, batches, parallel reading."""
