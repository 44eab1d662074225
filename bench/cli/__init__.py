"""The ``bench`` command line: the parser (:mod:`.parser`) and one module per command.

``bench`` (the console script) and ``python -m pebench.cli`` both call :func:`main`. Nothing heavy is
imported here: torch, Lightning and the registries load inside the command that needs them.
"""
from __future__ import annotations

from .parser import build_parser, cli_reference, main

__all__ = ["main", "build_parser", "cli_reference"]
