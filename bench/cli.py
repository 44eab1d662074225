"""The ``bench`` command line: ``run``, ``list``, ``runs``, ``leaderboard``, ``sweep``, ``eval``, ``perf``.

``bench run`` with no arguments trains the embedded default run (see :class:`RunConfig`).
User mistakes print one line ``bench: error: <message>`` and exit with code 2; a non-finite
training loss exits with code 1 (``last.ckpt`` is kept, ``results.json`` says ``failed``).

Works as the console script ``bench`` and as ``python -m pebench.cli``; Lightning's DDP
launcher re-executes either form with the same arguments for ranks > 0.
"""
from __future__ import annotations

import argparse
import errno
import os
import sys
from pathlib import Path
from typing import Any, Sequence

import yaml

from .config import (ANALYSES, TASKS, ConfigError, check_resolution_syntax, config_to_yaml, load_preset, load_yaml_config,
                     merge, resolve)
from .perf import PERF_COMMANDS

__all__ = ["main", "build_parser", "run_config_from_args"]


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line (exit code 2) instead of usage + message."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(message)


def _kv(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    k, v = text.split("=", 1)
    if not k:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return k, yaml.safe_load(v)
    except yaml.YAMLError:
        return k, v


#: run flag -> (config key, argparse kwargs); every flag has help text
RUN_FLAGS: list[tuple[str, str, dict[str, Any]]] = [
    ("--dataset", "dataset", dict(metavar="NAME", help="dataset to train on (see `bench list`); default: shapes")),
    ("--pe", "pe", dict(metavar="NAME", help="positional encoding (see `bench list`); default: the best registered "
                                              "of pape, rope-axial, ape")),
    ("--model", "model", dict(metavar="NAME", help="ViT preset (see `bench list`); default: vit-nano")),
    ("--epochs", "epochs", dict(type=int, metavar="N", help="training epochs")),
    ("--batch-size", "batch_size", dict(type=int, metavar="B", help="global batch size; with W processes "
                                                                      "(devices x nodes) each loads B/W")),
    ("--lr", "lr", dict(type=float, metavar="X", help="peak learning rate (AdamW, warm-up then cosine)")),
    ("--weight-decay", "weight_decay", dict(type=float, metavar="X", help="AdamW weight decay")),
    ("--warmup-epochs", "warmup_epochs", dict(type=float, metavar="N", help="linear warm-up length in epochs")),
    ("--label-smoothing", "label_smoothing", dict(type=float, metavar="X", help="cross-entropy label smoothing")),
    ("--layer-decay", "layer_decay", dict(type=float, metavar="X", help="layer-wise learning-rate decay factor")),
    ("--drop-path", "drop_path", dict(type=float, metavar="X", help="stochastic depth rate")),
    ("--task", "task", dict(choices=list(TASKS),
                            help="what to train (default: the dataset's own task, classification for most): "
                                 "supervised classification, DINO self-supervised (k-NN / linear probe on "
                                 "frozen features, EED per checkpoint), detection (COCO-style boxes) or "
                                 "segmentation (per-point labels)")),
    ("--task-option", "task_options", dict(type=_kv, action="append", metavar="KEY=VALUE",
                                           help="task setting, e.g. n_local=6 or out_dim=4096 for --task dino "
                                                "(repeatable; keys: the README's DINO section)")),
    ("--seed", "seed", dict(type=int, metavar="S", help="random seed (also the run directory's seed<S>)")),
    ("--resolution", "resolution", dict(metavar="R", help="input resolution: side S or 'AxB' (video/events: "
                                                            "frames x side; points: points x groups)")),
    ("--data-root", "data_root", dict(metavar="PATH", help="root directory of a real dataset")),
    ("--data-option", "data", dict(type=_kv, action="append", metavar="KEY=VALUE",
                                   help="extra datamodule option, e.g. train_size=512 (repeatable; keys: "
                                        "`bench list datasets --options`)")),
    ("--num-workers", "num_workers", dict(type=int, metavar="N", help="data-loading worker processes per rank")),
    ("--out", "out", dict(metavar="DIR", help="root of run directories; default: runs")),
    ("--devices", "devices", dict(metavar="N", help="devices per node (an integer, or auto)")),
    ("--accelerator", "accelerator", dict(metavar="A", help="cpu, gpu, mps or auto")),
    ("--strategy", "strategy", dict(metavar="S", help="Lightning strategy, e.g. ddp (auto: single device)")),
    ("--num-nodes", "num_nodes", dict(type=int, metavar="K", help="number of nodes (multi-node DDP)")),
    ("--precision", "precision", dict(metavar="P", help="Lightning precision: 32-true, bf16-mixed, 16-mixed")),
    ("--fast-dev-run", "fast_dev_run", dict(action=argparse.BooleanOptionalAction,
                                            help="one training and one validation batch (smoke test; "
                                                 "analyses off unless --analyses is given)")),
    ("--limit-train-batches", "limit_train_batches", dict(type=float, metavar="X",
                                                          help="fraction (<=1) or number of training batches per epoch")),
    ("--limit-val-batches", "limit_val_batches", dict(type=float, metavar="X",
                                                      help="fraction (<=1) or number of validation batches")),
    ("--max-time", "max_time", dict(metavar="DD:HH:MM:SS", help="stop training after this wall time")),
    ("--analyses", "analyses", dict(metavar="LIST", help=f"comma list of {','.join(ANALYSES)}, or none / all; "
                                                         "default: all that apply on synthetic datasets, "
                                                         "geometry on real ones")),
    ("--extrapolation-resolutions", "extrapolation_resolutions",
     dict(metavar="LIST", help="resolutions for the extrapolation analysis, e.g. 24,32,48,64")),
    ("--max-skipped-fraction", "max_skipped_fraction",
     dict(type=float, metavar="X", help="largest fraction of a split's samples that may be missing (exit 2 "
                                         "before training) or corrupt (status incomplete) (default: 0.05)")),
    ("--rpt", "rpt", dict(action=argparse.BooleanOptionalAction,
                          help="random permutation training (run directory <pe>+rpt)")),
    ("--class-token", "class_token", dict(action=argparse.BooleanOptionalAction, help="prepend a CLS token")),
    ("--pool", "pool", dict(choices=["mean", "cls"], help="head pooling: mean of patch tokens or the CLS token")),
    ("--pe-option", "pe_options", dict(type=_kv, action="append", metavar="KEY=VALUE",
                                       help="PE constructor option, e.g. impl=naive (repeatable; keys: "
                                            "`bench list pes --options`)")),
    ("--analysis-option", "analysis_options", dict(type=_kv, action="append", metavar="KEY=VALUE",
                                                   help="analysis setting, e.g. ssdc_tap=block_out or "
                                                        "rpi_permutations=16 (repeatable)")),
    ("--compile", "compile", dict(action=argparse.BooleanOptionalAction,
                                  help="torch.compile the backbone (in place: checkpoints stay loadable without it); "
                                       "the first steps pay the compilation (tens of seconds; needs a C++ compiler "
                                       "on CPU)")),
    ("--attention-impl", "attention_impl", dict(choices=["auto", "dense", "sdpa", "flex"],
                                                help="attention implementation: auto picks per PE, device and phase "
                                                     "(dense bias while training on CPU, FlexAttention for bias PEs "
                                                     "in evaluation from 1024 tokens and on CUDA); flex cannot train "
                                                     "on CPU")),
    ("--deterministic", "deterministic", dict(action=argparse.BooleanOptionalAction,
                                              help="use deterministic algorithms (slower on GPU)")),
    ("--logger", "logger", dict(choices=["csv", "tensorboard", "wandb"],
                                help="experiment logger; metrics.csv is always written. tensorboard needs the "
                                     "tensorboard extra; wandb (Weights & Biases, offline unless WANDB_MODE=online) "
                                     "needs the wandb extra")),
    ("--tensorboard", "tensorboard", dict(action=argparse.BooleanOptionalAction,
                                          help="same as --logger tensorboard (needs the tensorboard extra)")),
    ("--progress-bar", "progress_bar", dict(action=argparse.BooleanOptionalAction, help="show the TQDM progress bar")),
]


def _config_defaults() -> dict[str, Any]:
    """RunConfig's field defaults (the embedded default run), for ``bench run --help``."""
    import dataclasses

    from .config import RunConfig

    out: dict[str, Any] = {}
    for f in dataclasses.fields(RunConfig):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            out[f.name] = f.default_factory()  # type: ignore[misc]
    return out


#: what a ``None`` default means, for the flags where it is not simply "not set"
_NONE_MEANS = {"resolution": "the dataset's", "extrapolation_resolutions": "sizes derived from the training size",
               "limit_train_batches": "all", "limit_val_batches": "all", "layer_decay": "none (no decay)"}


def _with_default(help_text: str, key: str, defaults: dict[str, Any]) -> str:
    """Append ``(default: X)`` unless the help already states the default."""
    if "default" in help_text or key not in defaults:
        return help_text
    d = defaults[key]
    if key in _NONE_MEANS and d is None:
        shown = _NONE_MEANS[key]
    elif isinstance(d, bool):
        shown = "on" if d else "off"
    elif d is None:
        shown = "none"
    elif isinstance(d, (dict, list)) and not d:
        shown = "none"
    else:
        shown = str(d)
    return f"{help_text} (default: {shown})"


def _add_run_flags(p: argparse.ArgumentParser) -> None:
    defaults = _config_defaults()
    for flag, key, kw in RUN_FLAGS:
        kw = dict(kw)
        kw["help"] = _with_default(kw.get("help", ""), key, defaults)
        p.add_argument(flag, dest=key, default=None, **kw)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="bench", description="pebench: positional encodings in vision transformers")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("run", help="train and evaluate one configuration (no arguments: the default run)",
                       description="Train and evaluate one configuration; without arguments, the embedded "
                                   "default run. Precedence: defaults < --preset < --config < flags.")
    p.add_argument("--config", metavar="FILE", help="YAML file of run options (e.g. a run's config.yaml)")
    p.add_argument("--preset", metavar="NAME", help="shipped preset pebench/presets/NAME.yaml")
    p.add_argument("--print-config", action="store_true", help="print the resolved configuration as YAML and exit")
    _add_run_flags(p)

    p = sub.add_parser("list", help="list datasets, positional encodings, models and presets",
                       description="List datasets (modality, data root layout), PEs (modalities), models, presets.")
    p.add_argument("what", nargs="?", choices=["datasets", "pes", "models", "presets", "all"], default="all",
                   help="what to list (default: all)")
    p.add_argument("--options", action="store_true",
                   help="also list every --pe-option / --data-option key with its type, default and meaning")

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
                        "unreadable")

    p = sub.add_parser("leaderboard", help="regenerate the leaderboard markdown from results.json files",
                       description="Collect <results>/**/results.json into a markdown leaderboard.")
    p.add_argument("--results", default="runs", metavar="DIR", help="root of run directories (default: runs)")
    p.add_argument("--out", default="LEADERBOARD.md", metavar="FILE", help="output file (default: LEADERBOARD.md)")
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
                        "~7 s import per run (Linux; single-process runs; see pebench.sweep_preload)")

    p = sub.add_parser("eval", help="evaluate a trained run at other resolutions (extrapolation)",
                       description="Load <run>/last.ckpt and config.yaml, evaluate at each resolution and "
                                   "update results.json (and extrapolation.png).")
    p.add_argument("--run", required=True, metavar="DIR", help="run directory (holds config.yaml, last.ckpt)")
    p.add_argument("--resolutions", default=None, metavar="LIST",
                   help="comma list of resolutions, e.g. 32,48,64 (default: the run's extrapolation_resolutions)")

    from .card import CARD_HELP
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

    p = sub.add_parser("perf", help="performance benchmarks: bench perf [WHAT] [--json FILE] [--md FILE] [--quick]",
                       description="Performance benchmarks (budgets: docs/ARCHITECTURE.md §6); "
                                   "`bench perf WHAT --help` for each one's options. Without WHAT: `all` "
                                   "(every suite but `attention`, "
                                   "about 4 minutes on a 2-core CPU).")
    p.add_argument("what", metavar="WHAT", help=f"benchmark to run: {', '.join(PERF_COMMANDS)} (default: all)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the benchmark, e.g. --json perf.json")
    return parser


def run_config_from_args(args: argparse.Namespace):
    """defaults < --preset < --config < flags -> resolved :class:`RunConfig`."""
    return resolve(_merged_config(args))


def _merged_config(args: argparse.Namespace):
    """defaults < --preset < --config < flags, before :func:`resolve` (which may import torch)."""
    layers: list[dict[str, Any]] = []
    if getattr(args, "preset", None):
        layers.append(load_preset(args.preset))
    if getattr(args, "config", None):
        layers.append(load_yaml_config(args.config))
    base = merge(*layers)
    flags: dict[str, Any] = {}
    for _, key, _ in RUN_FLAGS:
        v = getattr(args, key, None)
        if v is None:
            continue
        if key in ("pe_options", "data", "analysis_options", "task_options"):  # KEY=VALUE pairs update the file's mapping
            v = {**getattr(base, key), **dict(v)}
        flags[key] = v
    from dataclasses import asdict
    return merge(asdict(base), flags)


def _cmd_run(args: argparse.Namespace) -> int:
    if _merged_config(args).deterministic:
        from .numerics import pin_cpu_numerics

        pin_cpu_numerics()  # before torch is imported: CPU kernel paths pinned (see pebench.numerics)
    from lightning.pytorch.utilities import rank_zero_only

    from .run import load_registries, run
    from .summary import format_summary

    load_registries()
    cfg = run_config_from_args(args)
    if args.print_config:
        sys.stdout.write(config_to_yaml(cfg))
        return 0
    results = run(cfg)
    if rank_zero_only.rank != 0:
        return 0  # DDP: rank 0 owns the run directory, the analyses and the exit status
    print(format_summary(results))
    return 0 if results.get("status") in ("complete", None) else 3


def _user_errors() -> tuple[type[BaseException], ...]:
    """The user-error exception classes of the modules imported so far.

    Python evaluates an ``except`` clause's expression whenever an exception reaches it, also for
    the ``SystemExit`` of ``--help``; importing the packages here would load torch for nothing.
    A class whose module was never imported cannot have been raised, so ``sys.modules`` suffices.
    """
    errs: list[type[BaseException]] = [ConfigError]
    for mod, name in (("pebench.encodings", "PEConfigError"), ("pebench.models", "ResolutionError"),
                      ("pebench.datamodules", "DataRootError")):
        cls = getattr(sys.modules.get(mod), name, None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            errs.append(cls)
    return tuple(errs)



def _cmd_card(args: argparse.Namespace) -> int:
    """``bench card``: the analytic PE card table (torch imported here, not at module import)."""
    from pebench.encodings import get_pe_class, list_pes
    from pebench.models import list_models

    from .card import card_rows, format_card

    if args.grid < 2 or args.grid % 2:
        raise ConfigError(f"--grid must be an even integer >= 2, got {args.grid}")
    if args.samples < 1:
        raise ConfigError(f"--samples must be >= 1, got {args.samples}")
    if args.model not in list_models():
        raise ConfigError(f"unknown model {args.model!r}; available: {', '.join(list_models())}")
    if args.checkpoint is not None and args.pe is not None:
        raise ConfigError("--checkpoint and --pe exclude each other (the checkpoint names its PE)")
    pes = [p.strip() for p in (args.pe or "").split(",") if p.strip()]
    for pe in pes:
        if "image" not in get_pe_class(pe).modalities:  # unknown names raise the registry's ValueError
            raise ConfigError(f"PE {pe!r} does not apply to images")
    pes = pes or [p for p in list_pes() if "image" in get_pe_class(p).modalities]
    print(format_card(card_rows(pes, model=args.model, grid=args.grid, samples=args.samples, seed=args.seed,
                                checkpoint=args.checkpoint)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bench`` console script; returns the exit code."""
    from . import commands

    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["perf"] and (len(argv) == 1 or (argv[1].startswith("-") and argv[1] not in ("-h", "--help"))):
        argv.insert(1, "all")  # `bench perf [--json FILE ...]` runs every suite
    try:
        args, extra = parser.parse_known_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        if extra and args.command != "sweep":
            raise ConfigError(f"unrecognized arguments: {' '.join(extra)}")
        if args.command == "run":
            return _cmd_run(args)
        if args.command == "sweep":
            return commands.cmd_sweep(args, extra, parser)
        if args.command == "card":
            return _cmd_card(args)
        _check_command_args(args)
        return getattr(commands, f"cmd_{args.command}")(args)
    except KeyboardInterrupt as e:  # Ctrl-C / SIGTERM: one line, no traceback, exit 128 + signal
        signum = int(getattr(e, "signum", 2))
        resume = getattr(e, "resume_command", None)
        print("bench: interrupted" + (f" (results.json says interrupted; resume with: {resume})" if resume else ""),
              file=sys.stderr)
        return 128 + signum
    except BrokenPipeError:  # output piped into `head` etc.: stop quietly, like other command-line tools
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the interpreter flushes stdout at exit
        return 0
    except _user_errors() as e:
        print(f"bench: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except ValueError as e:
        # Plain ValueErrors from registries (unknown dataset/PE/model) before training started.
        if getattr(e, "bench_phase", None) == "train":
            raise
        print(f"bench: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except Exception as e:
        if type(e).__name__ == "NonFiniteLossError":
            print(f"bench: error: {_one_line(e)} (training stopped; last.ckpt kept, results.json status failed)",
                  file=sys.stderr)
            return 1
        if isinstance(e, OSError) and e.errno in _STORAGE_ERRNOS:
            where = f": {e.filename}" if e.filename else ""
            print(f"bench: error: {e.strerror or e}{where} (files written so far are complete; free space or "
                  f"fix permissions, then re-run the same command)", file=sys.stderr)
            return 1
        raise


#: errors of the storage, not of pebench: one line and exit code 1 instead of a traceback
_STORAGE_ERRNOS = frozenset(getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EROFS", "EFBIG", "EACCES", "EPERM")
                            if hasattr(errno, n))


def _check_command_args(args: argparse.Namespace) -> None:
    """Arguments of ``bench eval`` / ``bench leaderboard`` that can be checked without torch."""
    if args.command == "eval" and args.resolutions is not None:
        items = [r.strip() for r in str(args.resolutions).split(",")]
        if not any(items):
            raise ConfigError("--resolutions is empty; expected a comma list such as 24,32,48")
        for r in items:
            check_resolution_syntax(r, "--resolutions")
    if args.command == "leaderboard":
        out = Path(args.out)
        if not str(args.out).strip():
            raise ConfigError("--out must name a markdown file, got an empty string")
        if out.is_dir():
            raise ConfigError(f"--out {str(out)!r} is a directory; expected a markdown file, e.g. "
                              f"{str(out / 'LEADERBOARD.md')!r}")


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


if __name__ == "__main__":
    sys.exit(main())
