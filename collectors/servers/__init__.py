"""PostgreSQL installations, embedded clusters and the targets a run measures."""
