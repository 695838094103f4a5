"""The jobs the CLI runs: they wire collectors, the store and the engine."""
