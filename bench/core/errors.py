"""The errors pebench shows to its user, all derived from one base: :class:`UserError`.

``UserError``: the user asked for something that cannot be done (an unknown name, an option out of bounds, a
missing data root, a checkpoint of another model). The CLI catches this one type and prints one line
``bench: error: <message>`` with exit code 2, before anything else is printed or created. Every other exception
is a bug of pebench or of a library and keeps its traceback.

Each user error carries its ``phase`` — where it was found, so a message can say what was (not) done:

=============  ===================================================================
``config``     the run's options, names and their combinations (nothing created)
``data``       the data root, its layout and its files
``checkpoint`` a checkpoint or pretrained-weights file
``results``    result files read back (leaderboard, ``--check``)
``run``        a run that started and cannot go on (a DDP rendezvous, a resume)
=============  ===================================================================

:class:`RunFailedError` is the other outcome the CLI knows: a run that started and failed for a reason that is
not a bug (a non-finite loss); one line, exit code 1, ``results.json`` says ``failed``.

Layers below the CLI raise these; none of them imports the CLI. ``UserError`` derives from ``ValueError`` so
code that validates values keeps the standard exception contract.
"""
from __future__ import annotations

__all__ = ["UserError", "ConfigError", "UnknownNameError", "ResultsError", "RunFailedError", "PHASES"]

#: the phases a user error may name (see the module docstring)
PHASES: tuple[str, ...] = ("config", "data", "checkpoint", "results", "run")


class UserError(ValueError):
    """A mistake of the user's: one line, exit code 2 in the CLI. ``phase``: where it was found."""

    phase: str = "config"

    def __init__(self, message: str, *, phase: str | None = None) -> None:
        super().__init__(message)
        if phase is not None:
            if phase not in PHASES:
                raise ValueError(f"unknown error phase {phase!r}; available: {', '.join(PHASES)}")
            self.phase = phase


class ConfigError(UserError):
    """A malformed or conflicting run configuration (exit code 2 in the CLI)."""


class UnknownNameError(UserError):
    """A name no registry knows (``unknown PE 'x'; available: ...``)."""


class ResultsError(UserError):
    """A result file that cannot be read as one (corrupt JSON, an unknown schema version)."""

    phase = "results"


class RunFailedError(RuntimeError):
    """A run that started and could not finish for a reason that is not a bug (exit code 1 in the CLI)."""
