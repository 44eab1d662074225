"""One module per ``bench`` command, each holding that command's handler ``cmd_<name>``:

==============  ====================================================================================
``run``         :mod:`.run` (the run itself: :mod:`pebench.runner`)
``list``        :mod:`.list`
``runs``        :mod:`.runs` (the files read: :mod:`pebench.leaderboard.runs`)
``leaderboard`` :mod:`.leaderboard` (tables and pages: :mod:`pebench.leaderboard`)
``sweep``       :mod:`.sweep` (launchers: :mod:`pebench.sweep`)
``eval``        :mod:`.eval`
``analyze``     :mod:`.analyze` (the pipeline on a pretrained ViT: :mod:`pebench.cli.analyze`)
``card``        :mod:`.card` (the handler and the analytic card it measures)
``study``       :mod:`.study` (the study engine: :mod:`pebench.studies`)
``perf``        :mod:`.perf` (the suites: :mod:`pebench.perf`)
==============  ====================================================================================

The parser (:mod:`pebench.cli.parser`) declares every command's flags and imports a command's module only
when that command runs (:func:`dispatch`), so ``bench --help`` imports none of them. Heavy imports (torch,
Lightning, the registries) are deferred further, into the handlers that need them.
"""
from __future__ import annotations

import argparse
import importlib
from typing import Sequence

__all__ = ["COMMANDS", "dispatch", "csv_list"]

#: the commands, in the order ``bench --help`` lists them; each is the module ``pebench.cli.commands.<name>``
COMMANDS = ("run", "list", "runs", "leaderboard", "sweep", "eval", "analyze", "card", "study", "perf")


def dispatch(args: argparse.Namespace, argv: Sequence[str], extra: list[str], parser: argparse.ArgumentParser
             ) -> int:
    """Run ``args.command``'s handler: ``bench run`` gets the command line (its resume command), ``bench sweep``
    the pass-through flags and the parser (it checks them as ``bench run`` flags), ``bench study`` the parser; a
    module's ``check_args``
    (torch-free checks) runs before its handler."""
    module = importlib.import_module(f"{__name__}.{args.command}")
    if args.command == "run":
        return int(module.cmd_run(args, argv))
    if args.command == "sweep":
        return int(module.cmd_sweep(args, extra, parser))
    if args.command == "study":  # check resolves the runs' configurations with the parser, as bench sweep does
        return int(module.cmd_study(args, parser))
    check = getattr(module, "check_args", None)
    if check is not None:
        check(args)
    return int(getattr(module, f"cmd_{args.command}")(args))


def csv_list(text: str | None) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (a comma list flag; None or blank: empty)."""
    return [t.strip() for t in (text or "").split(",") if t.strip()]
