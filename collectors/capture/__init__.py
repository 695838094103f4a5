"""Capturing a workload from a production server, read-only: its statements
(pg_stat_statements), the constants they ran with (logs, plans), the relations they read,
production's planner settings, and the schema and data (pg_dump). `detector.jobs.capture`
writes the workload from them."""
