"""The command line: `common` (shared options, errors), one module per command group, `app` at the bottom."""
