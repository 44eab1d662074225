"""Errors that mean "the user asked for something that cannot be done".

The CLI turns each of them into one line ``bench: error: <message>`` and exit code 2, before anything
else is printed or created. Layers below the CLI raise them; none of them imports the CLI.
"""
from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A malformed or conflicting run configuration (exit code 2 in the CLI)."""
