"""The ``bench`` parser and entry point: every flag of ``run``, ``list``, ``runs``, ``leaderboard``, ``sweep``, ``eval``,
``analyze``, ``card``, ``study`` and ``perf``; each command's handler is in :mod:`pebench.cli.commands` (imported when it runs).

``bench run`` with no arguments trains the embedded default run (see :class:`RunConfig`).
User mistakes print one line ``bench: error: <message>`` and exit with code 2; a non-finite
training loss exits with code 1 (``results.json`` says ``failed``; the message says whether a ``last.ckpt``
was kept).

Works as the console script ``bench`` and as ``python -m pebench.cli``; Lightning's DDP
launcher re-executes either form with the same arguments for ranks > 0.
"""
from __future__ import annotations

import argparse
import errno
import os
import sys
from typing import Sequence

from pebench.cli.commands import dispatch
from pebench.cli.commands.card import CARD_HELP
from pebench.core.errors import ConfigError, RunFailedError, UserError
from pebench.core.options import add_flags, parse_key_value
from pebench.perf import PERF_COMMANDS
from pebench.runner.config import RunConfig, run_config_from_args
from pebench.runner.threads import choose_omp_wait

__all__ = ["main", "build_parser", "run_config_from_args", "cli_reference"]


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line (exit code 2) instead of usage + message."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="bench", description="pebench: positional encodings in vision transformers")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("run", help="train and evaluate one configuration (no arguments: the default run)",
                       description="Train and evaluate one configuration; without arguments, the embedded "
                                   "default run. Precedence: defaults < --preset < --config < flags.")
    p.add_argument("--config", metavar="FILE", help="YAML file of run options (e.g. a run's config.yaml)")
    p.add_argument("--preset", metavar="NAME", help="shipped preset pebench/presets/NAME.yaml")
    p.add_argument("--print-config", action="store_true", help="print the resolved configuration as YAML and exit")
    p.add_argument("--force", action="store_true",
                   help="train again from scratch when the run directory already holds a complete run of this "
                        "configuration (default: off; such a run is reported in one line and not retrained)")
    add_flags(p, RunConfig)

    p = sub.add_parser("list", help="list datasets, positional encodings, models, presets, analyses and tasks",
                       description="List datasets (modality, data root layout), PEs (modalities), models, presets, "
                                   "analyses (results.json key, whether --analyses all runs it), tasks (the datasets "
                                   "and modalities they train on).")
    p.add_argument("what", nargs="?", choices=["datasets", "pes", "models", "presets", "analyses", "tasks", "all"],
                   default="all", help="what to list (default: all)")
    p.add_argument("--options", action="store_true",
                   help="also list every --pe-option / --data-option / --analysis-option / --task-option key with its "
                        "type, default and meaning")

    p = sub.add_parser("runs", help="list run directories (status, metric, why not complete); `runs show RUN`",
                       description="List the runs under --results from their results.json files (no torch "
                                   "import), or `bench runs show RUN` for one run's metrics, analyses, "
                                   "configuration and files.")
    p.add_argument("action", nargs="?", choices=["list", "show"], default=None,
                   help="list (the default) or show")
    p.add_argument("run", nargs="?", default=None, metavar="RUN",
                   help="with show: a run directory, or its path under --results (e.g. shapes/pape/vit-nano/seed0)")
    p.add_argument("--results", default="runs", metavar="DIR", help="root of run directories (default: runs)")
    p.add_argument("--dataset", default=None, metavar="LIST", help="only these datasets (comma list)")
    p.add_argument("--pe", default=None, metavar="LIST", help="only these PEs or variants (comma list)")
    p.add_argument("--model", default=None, metavar="LIST", help="only these models (comma list)")
    p.add_argument("--status", default=None, metavar="LIST",
                   help="only these statuses (comma list): complete, incomplete, failed, interrupted, running, "
                        "queued (submitted to SLURM), unreadable")

    p = sub.add_parser("leaderboard", help="regenerate the leaderboard (markdown, CSV, JSON or HTML) from results.json "
                                           "files, or check a results folder",
                       description="Collect <results>/**/results.json into a leaderboard: markdown (default; with "
                                   "<out>_curves.png), CSV or JSON (one record per cell) or one static HTML page. "
                                   "--check DIR validates a results folder instead and writes nothing.")
    p.add_argument("--results", default="runs", metavar="DIR", help="root of run directories (default: runs)")
    p.add_argument("--format", default="md", choices=("md", "csv", "json", "html"),
                   help="output format (default: md)")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="output file (default: LEADERBOARD.<format>, e.g. LEADERBOARD.md; the default refuses to "
                        "overwrite a file tracked by git: name it with --out or give --force)")
    p.add_argument("--force", action="store_true",
                   help="let the default --out overwrite a file tracked by git (e.g. the committed leaderboard)")
    p.add_argument("--include-smoke", action="store_true",
                   help="also tabulate smoke runs (--fast-dev-run or --limit-*-batches: results.json 'limited'); "
                        "by default they are left out and counted in the header")
    p.add_argument("--check", default=None, metavar="DIR",
                   help="validate the results folder DIR (schema, status complete, one commit and one configuration "
                        "per cell, equal seeds, no duplicate runs, no absolute paths, only the resolution and shift "
                        "names pebench writes): one line per problem, exit 2 if any; writes nothing")
    p.add_argument("--reference", default="none", metavar="PE",
                   help="row (PE or variant) that the paired per-seed differences of the primary metric are "
                        "taken against; a comma list: each table takes the first one it has, e.g. rope-axial,none "
                        "(default: none)")

    p = sub.add_parser("sweep", help="run datasets x PEs x seeds (resumable); other flags pass through to run",
                       description="Run the grid datasets x PEs x seeds, skipping complete runs. Any further "
                                   "`bench run` flags (e.g. --epochs 2) are passed to every run.")
    p.add_argument("--datasets", default="shapes", metavar="LIST", help="comma list of datasets (default: shapes)")
    p.add_argument("--pes", default=None, metavar="LIST",
                   help="comma list of PEs or variants, e.g. ape,ape+rpt (<pe>+rpt: bench run --rpt); "
                        "default: every registered PE that applies")
    p.add_argument("--seeds", default="0", metavar="LIST", help="comma list of seeds, e.g. 0,1,2 (default: 0)")
    p.add_argument("--model", default="vit-nano", metavar="NAME", help="ViT preset (default: vit-nano)")
    p.add_argument("--out", default="runs", metavar="DIR", help="root of run directories (default: runs)")
    p.add_argument("--workers", type=int, default=1, metavar="N", help="parallel worker processes (default: 1)")
    p.add_argument("--retries", type=int, default=1, metavar="N", help="retries of a failed run (default: 1)")
    p.add_argument("--preload", action="store_true",
                   help="each worker imports torch/Lightning once and forks every run from itself, saving the "
                        "~7 s import per run (Linux; single-process runs; see pebench.sweep.preload)")
    p.add_argument("--launcher", choices=["local", "slurm"], default="local",
                   help="local: run the grid on this machine (default); slurm: submit one SLURM array task per "
                        "run through submitit and return (see docs/distributed_slurm.md)")
    p.add_argument("--partition", default=None, metavar="NAME", help="slurm: partition (comma list allowed)")
    p.add_argument("--time", default=None, metavar="LIMIT",
                   help="slurm: time limit per array task, e.g. 4:00:00, 90, 1-12:00 (default: 4:00:00); "
                        "a task that reaches it is requeued and resumes from last.ckpt")
    p.add_argument("--gpus-per-task", type=int, default=None, metavar="G",
                   help="slurm: GPUs per process of a run (a DDP run has --devices processes per node); "
                        "default: 1, or 0 with --accelerator cpu")
    p.add_argument("--array-parallelism", type=int, default=None, metavar="N",
                   help="slurm: array tasks running at once (default: 256)")
    p.add_argument("--slurm-option", action="append", default=None, metavar="KEY=VALUE",
                   help="slurm: extra sbatch option, repeatable, e.g. --slurm-option mem=32G "
                        "--slurm-option account=proj")
    p.add_argument("--slurm-folder", default=None, metavar="DIR",
                   help="slurm: submitit's job scripts, pickles and logs (default: <out>/slurm_logs/%%j)")

    p = sub.add_parser("eval", help="evaluate a trained run at other resolutions (extrapolation)",
                       description="Load <run>/last.ckpt and config.yaml, evaluate at each resolution and "
                                   "update results.json (and extrapolation.png).")
    p.add_argument("--run", required=True, metavar="DIR", help="run directory (holds config.yaml, last.ckpt)")
    p.add_argument("--resolutions", default=None, metavar="LIST",
                   help="comma list of resolutions, e.g. 32,48,64 (default: the run's extrapolation_resolutions)")

    p = sub.add_parser("analyze", help="run pebench's analyses on a pretrained timm ViT (local checkpoint)",
                       description="Run geometry / robustness / alpha / extrapolation on timm's own model "
                                   "definition with weights from a local file (nothing is downloaded); "
                                   "see docs/analyze.md.")
    p.add_argument("--model", required=True, metavar="timm:NAME", help="timm model, e.g. timm:vit_small_patch16_224")
    p.add_argument("--checkpoint", required=True, metavar="FILE",
                   help="safetensors / .pth / .bin state dict in timm's or Hugging Face's DINOv2 / ViT key layout, "
                        "an ONNX export of those (.onnx), or a zip archive / wheel holding one (see "
                        "--checkpoint-member); docs/analyze.md")
    p.add_argument("--checkpoint-member", default=None, metavar="PATH",
                   help="the model file inside a --checkpoint zip archive or wheel, e.g. pkg/models/model.onnx")
    p.add_argument("--dataset", required=True, metavar="NAME", help="pebench image dataset (bench list datasets)")
    p.add_argument("--analyses", default=None, metavar="LIST",
                   help="comma list of geometry, robustness, alpha, extrapolation, or all / none (default: all; "
                        "with --protocol quick: geometry)")
    p.add_argument("--protocol", default="default", choices=["default", "quick"],
                   help="default: K = 8 RPI permutations and the untrained twin's null band (17 geometry passes); "
                        "quick: geometry only, K = 2 permutations, no twin, 256 probe images, a 256-sample linear "
                        "probe (3 passes; its RPI standard error is twice the default's: docs/analyze.md); "
                        "--analyses, --probe-samples and --analysis-option override its values")
    p.add_argument("--out", default="runs", metavar="DIR", help="root of run directories (default: runs)")
    p.add_argument("--resolution", default=None, metavar="R", help="input size (default: the dataset's)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="data and RPI seed (default: 0)")
    p.add_argument("--position-table", default=None, choices=["as-trained", "permuted", "zeroed"],
                   help="the model's learned absolute position table as trained (default), or the SSDC paper's "
                        "inference-time interventions: its patch rows permuted by one fixed permutation of the seed, "
                        "or set to zero (the model without its PE); the run's variant is <pe>+permuted-table / "
                        "<pe>+zeroed-table (docs/analyze.md)")
    p.add_argument("--head", default="probe", choices=["probe", "native"],
                   help="classifier of the accuracy analyses: a ridge linear probe fitted on the training split "
                        "(default) or the checkpoint's own head (needs the dataset's class count)")
    p.add_argument("--probe-samples", type=int, default=None, metavar="N",
                   help="training samples the probe is fitted on (default: 1024; --protocol quick: 256)")
    p.add_argument("--resolutions", default=None, metavar="LIST",
                   help="extrapolation sizes, e.g. 32,64 (default: 1, 1.5, 2, 3, 4 x the input size, rounded to "
                        "the model's patch size)")
    p.add_argument("--batch-size", type=int, default=64, metavar="N", help="evaluation batch size (default: 64)")
    p.add_argument("--data-root", default=None, metavar="DIR", help="root of a real dataset")
    p.add_argument("--progress-bar", action=argparse.BooleanOptionalAction, default=True,
                   help="one stderr line per stage: checkpoint, probe, accuracy, each analysis and its time "
                        "(--no-progress-bar: none)")
    for flag, what in (("--model-option", "timm.create_model keyword, e.g. img_size=32 or depth=2"),
                       ("--data-option", "datamodule option (bench list datasets --options)"),
                       ("--analysis-option", "analysis option, e.g. probe_size=64 or rpi_permutations=4")):
        p.add_argument(flag, type=parse_key_value, action="append", default=[], metavar="KEY=VALUE",
                       help=f"{what}; repeatable")

    p = sub.add_parser("card", help="analytic PE card at initialisation (or of a checkpoint), no training",
                       description="Measure each PE's attention logits with random content (no training): "
                                   "shift / rotation / mirror change, attention mass vs distance, behaviour "
                                   "beyond the training grid. Without --pe: a table over every 2-D PE.",
                       epilog=CARD_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pe", default=None, metavar="LIST", help="comma list of PEs (default: all that apply to images)")
    p.add_argument("--model", default="vit-nano", metavar="NAME", help="ViT preset (default: vit-nano)")
    p.add_argument("--grid", type=int, default=8, metavar="G", help="training grid side G (even; default: 8)")
    p.add_argument("--samples", type=int, default=8, metavar="N", help="random content samples (default: 8)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="initialisation and content seed (default: 0)")
    p.add_argument("--checkpoint", default=None, metavar="PATH",
                   help="card of a trained image checkpoint (e.g. <run>/last.ckpt) instead of fresh PEs")

    p = sub.add_parser("study", help="run, report and check a study: bench study list | run | report | check NAME",
                       description="A study is one declarative file (grid, recipe, claims with their tests and "
                                   "families, scope): `list` the shipped ones with their cost, `run` one through "
                                   "bench sweep (resumable), `report` it from its result files, `check` that its "
                                   "committed report regenerates byte for byte (docs/studies.md).")
    p.add_argument("action", choices=["list", "run", "report", "check"], help="what to do")
    p.add_argument("name", nargs="?", default=None, metavar="NAME",
                   help="a shipped study (bench study list) or the path of a study file")
    p.add_argument("--results", default=None, metavar="DIR",
                   help="the folder holding the study's runs (default: the study file's `results`, relative to the "
                        "current directory)")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="report: where to write it (default: <results>/<the study's report name>; the default "
                        "refuses a git-tracked file, an explicit --out overwrites)")
    p.add_argument("--pe", default=None, metavar="LIST",
                   help="run / report: these PEs instead of the study's (e.g. your own PE: its cells only)")
    p.add_argument("--seeds", default=None, metavar="LIST", help="run: these seeds instead of the study's")
    p.add_argument("--workers", type=int, default=None, metavar="N", help="run: parallel runs (default: the study's)")

    p = sub.add_parser("perf", help="performance benchmarks: bench perf [WHAT] [--json FILE] [--md FILE] [--quick]",
                       description="Performance benchmarks (budgets: docs/architecture.md §6); "
                                   "`bench perf WHAT --help` for each one's options. Without WHAT: `all` "
                                   "(every suite but `attention`, "
                                   "at most 5 minutes on an idle 2-core CPU); --quick: smoke-test sizes.")
    p.add_argument("what", metavar="WHAT", help=f"benchmark to run: {', '.join(PERF_COMMANDS)} (default: all)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the benchmark, e.g. --json perf.json")
    return parser


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """Every command's flags in markdown, made from the parser (``docs/cli_flags.md`` is this text:
    ``bench --markdown-reference > docs/cli_flags.md``; a test keeps the two equal)."""
    parser = parser or build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in sub._choices_actions}
    lines = ["# Every flag of `bench`", "",
             "Generated from the parser (`bench --markdown-reference > docs/cli_flags.md`; a test keeps this file",
             "equal to it). Every `bench run` option is declared once, in `bench/runner/config.py` (`RunConfig`), with its",
             "type, default, help and bounds; what the commands do and write is in [cli.md](cli.md).", ""]
    for name, p in sub.choices.items():
        lines += [f"## `bench {name}`", "", " ".join(str(p.description or helps.get(name) or "").split()), "",
                  "| option | meaning |", "|---|---|"]
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if action.option_strings:
                flags = ", ".join(action.option_strings)
                if action.nargs != 0 and not isinstance(action, argparse.BooleanOptionalAction):
                    flags += f" {action.metavar or action.dest.upper()}"
            else:
                flags = str(action.metavar or action.dest).upper()
            text = " ".join(str(action.help or "").split())
            if action.choices and not isinstance(action, argparse.BooleanOptionalAction):
                text += f" (one of: {', '.join(map(str, action.choices))})"
            text = text.replace('|', chr(92) + '|').replace('<', '&lt;')
            lines.append(f"| `{flags}` | {text} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bench`` console script; returns the exit code."""
    choose_omp_wait()  # before torch loads: OpenMP waits passively on a busy CPU, briefly spins on an idle one
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["perf"] and (len(argv) == 1 or (argv[1].startswith("-") and argv[1] not in ("-h", "--help"))):
        argv.insert(1, "all")  # `bench perf [--json FILE ...]` runs every suite
    if argv == ["--markdown-reference"]:
        sys.stdout.write(cli_reference(parser))
        return 0
    try:
        args, extra = parser.parse_known_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        if extra and args.command != "sweep":
            raise ConfigError(f"unrecognized arguments: {' '.join(extra)}")
        return dispatch(args, argv, extra, parser)
    except KeyboardInterrupt as e:  # Ctrl-C / SIGTERM: one line, no traceback, exit 128 + signal
        signum = int(getattr(e, "signum", 2))
        resume = getattr(e, "resume_command", None)
        print("bench: interrupted" + (f" (results.json says interrupted; resume with: {resume})" if resume else ""),
              file=sys.stderr)
        return 128 + signum
    except BrokenPipeError:  # output piped into `head` etc.: stop quietly, like other command-line tools
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the interpreter flushes stdout at exit
        return 0
    except UserError as e:  # every error meant for the user derives from it (pebench.core.errors)
        print(f"bench: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except RunFailedError as e:
        print(f"bench: error: {_one_line(e)}", file=sys.stderr)
        return 1
    except Exception as e:
        if isinstance(e, OSError) and e.errno in _STORAGE_ERRNOS:
            where = f": {e.filename}" if e.filename else ""
            print(f"bench: error: {e.strerror or e}{where} (every file written so far is whole, written "
                  f"atomically; results.json keeps the last status it could record; free space or fix permissions, "
                  f"then re-run the same command: an interrupted run resumes)", file=sys.stderr)
            return 1
        raise


#: errors of the storage, not of pebench: one line and exit code 1 instead of a traceback
_STORAGE_ERRNOS = frozenset(getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EROFS", "EFBIG", "EACCES", "EPERM")
                            if hasattr(errno, n))


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__

