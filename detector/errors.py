"""The one user-facing error type: a message and a hint; the CLI prints both and exits 2."""

from __future__ import annotations


class PlanshiftError(Exception):
    """A problem the user can fix (bad input, missing server, unknown name)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message
