"""The ``bench`` command line: the parser (:mod:`.parser`) and one module per command (:mod:`.commands`).

Where each command lives (``bench X`` is ``cmd_X`` in ``pebench.cli.commands.X``; every flag is declared in
:mod:`.parser`):

* ``bench run``: :mod:`.commands.run` (the run itself: :mod:`pebench.runner`)
* ``bench list``: :mod:`.commands.list`
* ``bench runs``: :mod:`.commands.runs` (the run files it reads: :mod:`pebench.leaderboard.runs`)
* ``bench leaderboard``: :mod:`.commands.leaderboard` (tables and pages: :mod:`pebench.leaderboard`)
* ``bench sweep``: :mod:`.commands.sweep` (local, preloading and SLURM launchers: :mod:`pebench.sweep`)
* ``bench eval``: :mod:`.commands.eval`
* ``bench analyze``: :mod:`.commands.analyze`, the handler; the pipeline on a pretrained ViT is :mod:`.analyze`
* ``bench card``: :mod:`.commands.card` (the handler and the analytic card it measures)
* ``bench perf``: :mod:`.commands.perf` (the suites: :mod:`pebench.perf`)

Besides the commands: :mod:`.docs` writes README's and docs/datasets.md's generated tables
(``python -m pebench.cli.docs``); ``bench --markdown-reference`` (:func:`cli_reference`) writes docs/cli_flags.md.

``bench`` (the console script) and ``python -m pebench.cli`` both call :func:`main`. Nothing heavy is
imported here: a command's module is imported only when it runs, and torch, Lightning and the registries
load inside the command that needs them.
"""
from __future__ import annotations

from .parser import build_parser, cli_reference, main

__all__ = ["main", "build_parser", "cli_reference"]
