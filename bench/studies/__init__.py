"""The study engine: a study is one declarative file, ``bench study`` runs and reports it.

* :mod:`.spec` -- the study file (YAML, validated, versioned): grid, recipe, arms, table, plateau band, claims
  with their tests and families, scope sentences, changes from the previous report;
* :mod:`.cells` -- the runs a study's result folders hold, per cell, with provenance (commits, CPU models,
  wall time) and each run's validation curve;
* :mod:`.claims` -- claims to verdicts through :mod:`pebench.leaderboard.stats` (the one statistics module the
  leaderboard uses too), Holm within each family;
* :mod:`.report` -- the report, written whole and deterministically from the above.

The shipped study files are ``files/<name>.yaml`` (``bench study list``). Everything here reads JSON, CSV and
YAML only: no torch (the import-linter contract in pyproject.toml keeps it so). Running a study is
``bench sweep`` once per arm, started by the CLI (:mod:`pebench.cli.commands.study`).
"""
from __future__ import annotations

from .claims import Verdict, evaluate
from .spec import Study, list_studies, load_study

__all__ = ["Study", "Verdict", "evaluate", "list_studies", "load_study"]
