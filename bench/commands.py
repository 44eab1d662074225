"""``bench list | leaderboard | sweep | eval | perf`` (``bench run`` lives in ``cli.py``/``run.py``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .config import ConfigError, list_presets, load_yaml_config, merge
from .io import atomic_write_json, read_json
from .summary import format_table

__all__ = ["cmd_list", "cmd_leaderboard", "cmd_sweep", "cmd_eval", "cmd_perf"]


def _csv(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


# ----------------------------------------------------------------------------------- list
def cmd_list(args: argparse.Namespace) -> int:
    from pebench.datamodules import get_datamodule_class, list_datamodules
    from pebench.encodings import get_pe_class, list_pes
    from pebench.models import VIT_PRESETS

    from .run import load_registries

    load_registries()
    what = args.what
    if what in ("datasets", "all"):
        rows = []
        for name in list_datamodules():
            c = get_datamodule_class(name)
            rows.append([name, c.modality, "yes" if c.needs_data_root else "no",
                         c.expected_layout if c.needs_data_root else "(synthetic, generated on the fly)"])
        print("datasets\n" + format_table(["name", "modality", "--data-root", "expected layout"], rows))
    if what in ("pes", "all"):
        rows = [[n, ", ".join(get_pe_class(n).modalities), "yes" if get_pe_class(n).additive else "no"]
                for n in list_pes()]
        print("positional encodings\n" + format_table(["name", "modalities", "additive"], rows))
    if what in ("models", "all"):
        rows = [[n, c.embed_dim, c.depth, c.num_heads, c.embed_dim // c.num_heads] for n, c in VIT_PRESETS.items()]
        print("models\n" + format_table(["name", "dim", "depth", "heads", "head dim"], rows))
    if what in ("presets", "all"):
        names = list_presets()
        print("presets (bench run --preset NAME)\n" + (format_table(["name"], [[n] for n in names]) if names
                                                       else "(none installed)"))
    return 0


# ----------------------------------------------------------------------------------- leaderboard
def cmd_leaderboard(args: argparse.Namespace) -> int:
    from pebench.leaderboard import write_leaderboard
    if not Path(args.results).is_dir():
        raise ConfigError(f"results directory {args.results!r} does not exist")
    write_leaderboard(args.results, args.out)
    print(f"wrote {args.out}")
    return 0


# ----------------------------------------------------------------------------------- sweep
_SWEEP_FIXED = {"dataset", "pe", "seed", "model", "out"}


def cmd_sweep(args: argparse.Namespace, extra: list[str], parser: argparse.ArgumentParser) -> int:
    from pebench.datamodules import get_datamodule_class
    from pebench.encodings import get_pe_class, list_pes

    from .cli import build_parser
    from .run import check_writable, load_registries

    from pebench import sweep
    load_registries()
    # Validate the pass-through flags with the run parser (typos fail now, not in every run).
    run_args, unknown = build_parser().parse_known_args(["run", *extra])
    if unknown:
        raise ConfigError(f"unrecognized arguments: {' '.join(unknown)}")
    fixed = sorted(k for k in _SWEEP_FIXED if getattr(run_args, k, None) is not None)
    if fixed:
        raise ConfigError(f"bench sweep sets --{fixed[0].replace('_', '-')} itself; use --datasets/--pes/--seeds/"
                          f"--model/--out")
    if run_args.rpt is not None:
        raise ConfigError("bench sweep sets --rpt itself; name the variant in --pes, e.g. --pes ape,ape+rpt")
    try:
        seeds = [int(s) for s in _csv(args.seeds)]
    except ValueError:
        raise ConfigError(f"--seeds must be a comma list of integers, got {args.seeds!r}") from None
    datasets = _csv(args.datasets)
    explicit_pes = args.pes is not None
    pes = _csv(args.pes) if explicit_pes else list_pes()
    combos = []
    for d in datasets:
        mod = get_datamodule_class(d).modality
        for p in pes:
            rpt = p.endswith(sweep.RPT_SUFFIX)
            base = p[: -len(sweep.RPT_SUFFIX)] if rpt else p
            if rpt and base == "none":
                raise ConfigError(f"conflicting variant {p!r}: random permutation training needs a PE")
            if mod in get_pe_class(base).modalities:
                combos.append((d, p))
            else:
                print(f"bench: note: skipping {d} x {p} (PE {p!r} does not apply to {mod} data)", file=sys.stderr)
    check_writable(args.out)
    specs = []
    for d, p in combos:
        specs += sweep.plan_sweep([d], [p], seeds, args.model, args.out, extra_args=extra)
    outcomes = sweep.run_sweep(specs, retries=args.retries, workers=args.workers)
    rows = [[o.get("key"), o.get("status"), o.get("attempts")] for o in outcomes]
    print(format_table(["run", "status", "attempts"], rows))
    return 1 if any(o.get("status") == "failed" for o in outcomes) else 0


# ----------------------------------------------------------------------------------- eval
def cmd_eval(args: argparse.Namespace) -> int:
    import torch

    from pebench.analysis import evaluate_extrapolation, plot_extrapolation, save_plot
    from pebench.datamodules import get_datamodule_class
    from pebench.models import ClassificationTask

    from .run import load_registries

    run_dir = Path(args.run)
    cfg_path, ckpt = run_dir / "config.yaml", run_dir / "last.ckpt"
    if not cfg_path.is_file():
        raise ConfigError(f"{str(run_dir)!r} is not a run directory (no config.yaml)")
    if not ckpt.is_file():
        raise ConfigError(f"no checkpoint {str(ckpt)!r}; train the run first")
    load_registries()
    cfg = merge(load_yaml_config(cfg_path))
    resolutions = _csv(args.resolutions) or list(cfg.extrapolation_resolutions or [])
    if not resolutions:
        raise ConfigError("no resolutions given: pass --resolutions, e.g. 24,32,48")
    dm = get_datamodule_class(cfg.dataset)(batch_size=cfg.batch_size, num_workers=cfg.num_workers, seed=cfg.seed,
                                           resolution=cfg.resolution, data_root=cfg.data_root, **cfg.data)
    try:
        task = ClassificationTask.load_from_checkpoint(str(ckpt), map_location="cpu")
    except Exception as e:  # noqa: BLE001 - any failure to load is a bad checkpoint for the user
        raise ConfigError(f"cannot load {str(ckpt)!r}: corrupt or incompatible checkpoint "
                          f"({type(e).__name__}: {' '.join(str(e).split())[:200]})") from None
    hp = task.hparams
    if hp.get("pe") != cfg.pe or hp.get("model") != cfg.model or hp.get("num_classes") != dm.num_classes:
        raise ConfigError(f"checkpoint {str(ckpt)!r} does not match config.yaml (pe/model/num_classes differ)")
    if torch.cuda.is_available():
        task = task.cuda()
    task.eval()
    rows = evaluate_extrapolation(task, dm, resolutions)
    res_path = run_dir / "results.json"
    results: dict[str, Any] = read_json(res_path) if res_path.is_file() else {}
    results["extrapolation"] = rows
    atomic_write_json(res_path, results)
    save_plot(plot_extrapolation, rows, run_dir / "extrapolation.png")
    from .summary import format_summary
    print(format_summary({k: v for k, v in results.items() if k not in ("geometry", "robustness", "alpha_sweep")}))
    return 0


# ----------------------------------------------------------------------------------- perf
def cmd_perf(args: argparse.Namespace) -> int:
    from pebench.perf import PERF_COMMANDS as perf_commands
    fn = perf_commands.get(args.what)
    if fn is None:
        raise ConfigError(f"unknown benchmark {args.what!r}; available: {', '.join(perf_commands)}")
    rc = fn(list(args.args))
    return int(rc or 0)
