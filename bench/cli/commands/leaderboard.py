"""``bench leaderboard``: the leaderboard of a results folder in ``--format`` md/csv/json/html (md also writes
``<out>_curves.png``), or ``--check`` of a results folder; torch-free (``pebench.leaderboard``)."""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from pebench.core.io import atomic_write_text
from pebench.leaderboard import collect_results
from pebench.leaderboard.check import check_results
from pebench.leaderboard.collect import split_smoke
from pebench.leaderboard.curves import write_sweep_curves
from pebench.leaderboard.formats import render_format
from pebench.leaderboard.text import terminal_safe
from pebench.runner.config import ConfigError, RunConfig, config_to_dict

__all__ = ["cmd_leaderboard", "check_args", "tracked_by_git"]


def check_args(args: argparse.Namespace) -> None:
    """``--out`` checked before anything is read: it must name a file of the format."""
    if args.out is None:
        return
    out = Path(args.out)
    kind = {"md": "markdown", "csv": "CSV", "json": "JSON", "html": "HTML"}[args.format]
    if not str(args.out).strip():
        raise ConfigError(f"--out must name a {kind} file, got an empty string")
    if out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a directory; expected a {kind} file, e.g. "
                          f"{str(out / f'LEADERBOARD.{args.format}')!r}")


def tracked_by_git(path: Path) -> bool:
    """True when ``path`` exists and is a file git tracks (committed results must not be overwritten by a
    default); False outside a work tree or without git."""
    if not path.is_file():
        return False
    try:
        res = subprocess.run(["git", "ls-files", "--error-unmatch", "--", path.name], cwd=path.resolve().parent,
                             capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return res.returncode == 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """Write the leaderboard in ``--format`` (md: also ``<out>_curves.png``), or ``--check`` a results folder."""
    # RunConfig's defaults fill the keys that files without a recorded fingerprint lack (torch-free)
    defaults = config_to_dict(RunConfig())
    if args.check is not None:
        if not Path(args.check).is_dir():
            raise ConfigError(f"results directory {args.check!r} does not exist")
        problems, summary = check_results(args.check, defaults)
        for line in problems:  # file names and quoted contents are anyone's: no control character reaches the terminal
            print(terminal_safe(f"{Path(args.check) / line.split(': ', 1)[0]}: {line.split(': ', 1)[1]}"),
                  file=sys.stderr)
        if problems:
            print(f"bench: error: {len(problems)} problem(s) in {args.check}", file=sys.stderr)
            return 2
        print(f"ok: {args.check}: {summary}")
        return 0
    if not Path(args.results).is_dir():
        raise ConfigError(f"results directory {args.results!r} does not exist")
    runs, problems = collect_results(args.results, defaults)
    runs, smoke = split_smoke(runs, include_smoke=getattr(args, "include_smoke", False))  # --fast-dev-run etc.
    if not any(r.complete for r in runs):
        raise ConfigError(f"no complete run in {args.results!r} ({len(runs)} incomplete, {len(problems)} "
                          f"problem(s)" + (f", {smoke} smoke run(s) left out: --include-smoke tabulates them"
                                           if smoke else "") + "); nothing to tabulate")
    out = Path(args.out or f"LEADERBOARD.{args.format}")
    if args.out is None and not getattr(args, "force", False) and tracked_by_git(out):
        raise ConfigError(f"refusing to overwrite {out}, a file tracked by git, with the default --out "
                          f"(name it: --out {out}, or give --force)")
    text = render_format(args.format, runs, problems, args.results, out, reference=getattr(args, "reference", "none"),
                         config_defaults=defaults, smoke_left_out=smoke)
    atomic_write_text(out, text)
    print(f"wrote {out}")
    if args.format == "md":
        curves = write_sweep_curves(args.results, out.with_name(f"{out.stem}_curves.png"))
        if curves is not None:
            print(f"wrote {curves}")
    return 0
