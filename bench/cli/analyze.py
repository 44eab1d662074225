"""``bench analyze``: pebench's analyses on a pretrained timm ViT read from a local checkpoint.

``bench analyze --model timm:<name> --checkpoint FILE [--checkpoint-member PATH] --dataset D [--analyses LIST]
[--out DIR] [--resolution R] [--seed S]`` builds timm's own model definition (``pretrained=False``, nothing is
downloaded), reads the checkpoint (timm, Hugging Face DINOv2 / ViT, or an ONNX export of those, possibly
inside a zip archive: :mod:`pebench.analysis.checkpoint_import`), loads it strictly, fits the analysis head
(a linear probe by default) and runs geometry / robustness / alpha / extrapolation exactly as ``bench run``
does after training (:func:`pebench.analysis.evaluators.run_analyses`); the timm adapter and its protocol choices (taps,
RPI, native extrapolation rule, head) are described in :mod:`pebench.analysis.pretrained`.

Which analyses apply per family (``all``):

=====================================  ==============================================================
family (``pe`` in results.json)        analyses
=====================================  ==============================================================
``ape`` (plain ViT, DeiT, DINOv2)      geometry, robustness, alpha, extrapolation (APE resampled)
``rope-axial`` / ``rope-mixed``        geometry, robustness, extrapolation (RoPE on the larger grid)
``rope-dinov3``                        geometry, robustness, extrapolation (RoPE on the larger grid)
``ape+rope-*`` (rope-vit ``*_ape``,    geometry, robustness, alpha (scales the APE part),
EVA02)                                 extrapolation (APE resampled, RoPE on the larger grid)
=====================================  ==============================================================

Run directory: ``<out>/<dataset>/<pe>/timm-<name>/seed<S>/`` -- the ``<dataset>/<pe>/<model>/seed<S>``
layout of ``bench run`` with ``pe`` the model's native PE family and the model's folder named portably
(:func:`model_folder`: no ``:``, which Windows and SMB shares refuse in a file name and rsync / scp read as
``host:path``); ``results.json``'s ``model`` is the ``--model`` given (``timm:<name>``), so ``bench runs
--pe``/``--model`` filters and the leaderboard's (dataset, PE, model) grouping read it like any other run.
``results.json`` has the keys of a ``bench run`` result (``task: "analysis"``,
``metrics`` = the head's ``val/acc1`` and, for the probe, ``probe/train_acc1``) plus
``model_source = {"library": "timm", "name", "checkpoint", "checkpoint_sha256", "checkpoint_format",
"weights_sha256", "model_options", ...}`` (with an archive also ``checkpoint_member`` and
``checkpoint_member_sha256``; keys the conversion left out under ``dropped_keys``).

Every user mistake (unknown model or dataset, missing or mismatched checkpoint, a resolution the patch
size does not divide, an unknown option) is one line and exit code 2 before the run directory exists.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

from pebench.analysis.checkpoint_import import read_checkpoint
from pebench.analysis.evaluators import ANALYSIS_NAMES, DEFAULT_OPTIONS, run_analyses
from pebench.analysis.extrapolation import check_resolutions
from pebench.analysis.pretrained import (
    TAP_SOURCES,
    TimmTask,
    accuracy,
    extrapolation_rule,
    fit_probe,
    input_affine_for,
    pe_family,
    table_permutation,
    with_position_table,
)
from pebench.analysis.progress import reporting
from pebench.core.errors import ConfigError
from pebench.core.io import atomic_write_json, remove_stale_temp_files
from pebench.datamodules import get_datamodule_class
from pebench.leaderboard.summary import format_summary
from pebench.runner.integrity import run_dir_lock
from pebench.runner.numerics import flush_denormals
from pebench.runner.provenance import git_sha, versions
from pebench.runner.resume import InterruptSignals, RunInterrupted
from pebench.runner.run import load_registries

__all__ = ["run_analyze", "MODEL_PREFIX", "DEFAULT_PROBE_SAMPLES", "default_resolutions", "model_folder"]

MODEL_PREFIX = "timm:"
DEFAULT_PROBE_SAMPLES = 1024


def model_folder(spec: str) -> str:
    """The run directory's folder for ``--model spec``: ``timm:<name>`` -> ``timm-<name>``, every character
    other than letters, digits and ``._+-`` written as ``-`` (portable to Windows, SMB shares, rsync / scp)."""
    return re.sub(r"[^A-Za-z0-9._+-]", "-", spec)


def default_resolutions(resolution: tuple[int, ...], patch: tuple[int, ...]) -> list[str]:
    """``S, 1.5S, 2S, 3S, 4S`` of the input size, each side rounded to a multiple of the patch size."""
    out = []
    for f in (1, 1.5, 2, 3, 4):
        sides = [max(p, int(round(s * f / p)) * p) for s, p in zip(resolution, patch)]
        out.append(str(sides[0]) if len(set(sides)) == 1 else "x".join(map(str, sides)))
    return list(dict.fromkeys(out))


def _analysis_names(text: str) -> list[str]:
    items = [a.strip() for a in str(text).split(",") if a.strip()]
    for a in items:
        if a not in (*ANALYSIS_NAMES, "all", "none"):
            raise ConfigError(f"unknown analysis {a!r}; available: {', '.join(ANALYSIS_NAMES)}, all, none")
    return items


def _resolve_names(items: list[str], additive: bool) -> list[str]:
    """The analyses to run, in pebench's order: ``all`` = every one that applies (alpha: additive APE only)."""
    if "none" in items:
        return []
    if "all" in items:
        return [a for a in ANALYSIS_NAMES if a != "alpha" or additive]
    return [a for a in ANALYSIS_NAMES if a in items]


def _fingerprint(config: dict[str, Any], sha: str) -> str:
    text = json.dumps({"config": config, "checkpoint_sha256": sha}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


#: the stated protocols of ``bench analyze --protocol``: the values each sets unless the command line gives them
#: (``analyses``, ``probe_samples``, and analysis options). ``quick``: SSDC / SSDC under RPI / EED on 256 probe images
#: with K = 2 shared RPI permutations and no untrained twin (3 passes over the probe instead of 17), the linear
#: probe fitted on 256 samples; docs/analyze.md gives its precision against the default's, from the rpi-draw study
PROTOCOLS: dict[str, dict[str, Any]] = {
    "default": {"analyses": "all", "probe_samples": 1024, "analysis_options": {}},
    "quick": {"analyses": "geometry", "probe_samples": 256,
              "analysis_options": {"probe_size": 256, "rpi_permutations": 2, "rpi_draw": "shared", "rpi_null": False}},
}


def apply_protocol(args: argparse.Namespace) -> None:
    """Fill ``args`` from ``--protocol``: what the command line leaves unset takes the protocol's value."""
    proto = PROTOCOLS[str(getattr(args, "protocol", None) or "default")]
    if getattr(args, "analyses", None) is None:
        args.analyses = proto["analyses"]
    if getattr(args, "probe_samples", None) is None:
        args.probe_samples = proto["probe_samples"]
    given = {k for k, _ in args.analysis_option}
    args.analysis_option = [(k, v) for k, v in proto["analysis_options"].items() if k not in given] + list(
        args.analysis_option)


def _prepare(args: argparse.Namespace) -> dict[str, Any]:
    """Everything checkable before anything is written: model, checkpoint, dataset, sizes, options, --out."""
    apply_protocol(args)
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise ConfigError(f"--out {str(args.out)!r} is a file; expected a directory to hold the run directories")
    spec = str(args.model)
    if not spec.startswith(MODEL_PREFIX) or not spec[len(MODEL_PREFIX):]:
        raise ConfigError(f"--model must be timm:<name> (e.g. timm:vit_small_patch16_224), got {spec!r}")
    name = spec[len(MODEL_PREFIX):]
    names = _analysis_names(args.analyses)
    analysis_options = dict(args.analysis_option)
    unknown = sorted(set(analysis_options) - set(DEFAULT_OPTIONS))
    if unknown:
        raise ConfigError(f"unknown analysis option {unknown[0]!r}; available: {', '.join(DEFAULT_OPTIONS)}")
    if args.probe_samples < 1 or args.batch_size < 1 or args.seed < 0:
        raise ConfigError("--probe-samples and --batch-size must be >= 1 and --seed >= 0")
    load_registries()
    dm_cls = get_datamodule_class(args.dataset)
    if dm_cls.modality != "image":
        raise ConfigError(f"bench analyze reads image datasets; {args.dataset!r} is {dm_cls.modality} data")
    if str(getattr(dm_cls, "default_task", "classification")) != "classification":
        raise ConfigError(f"bench analyze reads classification datasets; {args.dataset!r} is a "
                          f"{dm_cls.default_task} dataset")
    dm = dm_cls(batch_size=args.batch_size, num_workers=0, seed=args.seed, resolution=args.resolution,
                data_root=args.data_root, **dict(args.data_option))
    if args.head == "probe":
        try:
            dm.train_dataset()  # the probe's samples
        except ValueError as e:
            raise ConfigError(f"--head probe needs a training split: {e}; use --head native with a "
                              f"checkpoint trained on these classes") from None

    member = getattr(args, "checkpoint_member", None)
    ckpt = read_checkpoint(args.checkpoint, member)
    sd = ckpt.state_dict
    head_w = sd.get("head.weight")
    num_classes = int(head_w.shape[0]) if head_w is not None and head_w.dim() == 2 else 0
    if args.head == "native" and num_classes != dm.num_classes:
        raise ConfigError(f"--head native needs a classifier for {dm.num_classes} classes; the checkpoint's has "
                          f"{num_classes}; use --head probe")
    task = TimmTask(name, dict(args.model_option), num_classes=num_classes,
                    head_classes=dm.num_classes if args.head == "probe" else 0)
    try:
        task.load_checkpoint(sd, str(args.checkpoint))
    except ValueError as e:
        hint = " (a checkpoint made at another img_size / patch_size: pass them with --model-option)" \
            if "'pos_embed'" in str(e) or "'patch_embed." in str(e) else ""
        raise type(e)(f"{e}{hint}") from None
    shape = tuple(dm.input_shape())
    if shape[0] != task.in_chans:
        hint = ("; --data-option channels=3 repeats its grey channel" if task.in_chans == 3 and
                "channels" in getattr(dm, "option_help", {}) else "")
        raise ConfigError(f"{args.dataset!r} has {shape[0]} input channels; timm:{name} takes {task.in_chans}{hint}")
    task.set_input_affine(input_affine_for(dm, task.model))
    try:
        task.tokenizer.grid_for(shape[-2:])
    except ValueError as e:
        raise ConfigError(f"--resolution: {e}") from None
    table = str(getattr(args, "position_table", None) or "as-trained")
    if table != "as-trained":  # the intervention on the table, on the model built for the input grid
        task = with_position_table(task, task.tokenizer.grid_for(shape[-2:]), table, args.seed)
    resolutions = [r.strip() for r in (args.resolutions or "").split(",") if r.strip()] or \
        default_resolutions(tuple(dm.resolution), task.tokenizer.patch_size)
    check_resolutions(task, dm, resolutions)
    pe = pe_family(task.model)
    variant = pe if table == "as-trained" else f"{pe}+{table}-table"
    config = {"dataset": args.dataset, "pe": pe, "variant": variant, "model": spec, "seed": args.seed,
              "task": "analysis", "resolution": "x".join(map(str, dm.resolution)), "data": dict(args.data_option),
              "data_root": args.data_root, "analyses": names, "analysis_options": analysis_options,
              "extrapolation_resolutions": resolutions, "head": args.head, "probe_samples": args.probe_samples,
              "batch_size": args.batch_size, "model_options": dict(args.model_option),
              "protocol": str(getattr(args, "protocol", None) or "default")}
    if member is not None:  # another member of the same archive is another checkpoint (the fingerprint)
        config["checkpoint_member"] = member
    if table != "as-trained":  # the default adds no key: the fingerprints of earlier runs stay as they were
        config["position_table"] = table
    return {"task": task, "dm": dm, "name": name, "pe": pe, "variant": variant, "table": table, "config": config,
            "sha": ckpt.file_sha256,
            "provenance": ckpt.provenance(), "names": _resolve_names(names, task.backbone.pe.additive)}


#: ``bench analyze`` flags in the order :func:`analyze_command` writes them: (flag, args attribute)
_FLAGS = (("--model", "model"), ("--checkpoint", "checkpoint"), ("--checkpoint-member", "checkpoint_member"),
          ("--dataset", "dataset"), ("--protocol", "protocol"), ("--analyses", "analyses"), ("--out", "out"),
          ("--resolution", "resolution"),
          ("--seed", "seed"), ("--position-table", "position_table"), ("--head", "head"),
          ("--probe-samples", "probe_samples"),
          ("--resolutions", "resolutions"), ("--batch-size", "batch_size"), ("--data-root", "data_root"))


def analyze_command(args: argparse.Namespace) -> str:
    """The ``bench analyze`` command line of ``args`` (every flag that has a value): what re-runs it."""
    words = ["bench", "analyze"]
    for flag, attr in _FLAGS:
        value = getattr(args, attr, None)
        if value is not None:
            words += [flag, str(value)]
    for flag, attr in (("--model-option", "model_option"), ("--data-option", "data_option"),
                       ("--analysis-option", "analysis_option")):
        for key, value in getattr(args, attr, None) or []:
            words += [flag, f"{key}={value}"]
    return " ".join(shlex.quote(w) for w in words)


def run_analyze(args: argparse.Namespace) -> int:
    """``bench analyze``: check everything, then write ``results.json`` (and the plots) of the run.

    Progress goes to stderr, one line per stage (checkpoint, probe, accuracy, each analysis with its time and
    each unit of an analysis' work, :mod:`pebench.analysis.progress`; ``--no-progress-bar``: none), the first
    once every input is checked: a user error is the only line printed. SIGINT / SIGTERM end it with ``status:
    interrupted`` and ``resume_command`` (the command that runs it again: an analysis run has no checkpoint of
    its own to resume from)."""
    t0 = time.time()
    progress = bool(getattr(args, "progress_bar", True))

    def say(text: str) -> None:
        if progress:
            print(f"bench analyze: {text}", file=sys.stderr, flush=True)

    flush_denormals()  # as in bench run (see pebench.runner.numerics)
    parts = _prepare(args)  # silent: a user error is the one line printed, before any stage line or file
    say(f"checkpoint {args.checkpoint} read and checked against timm:{parts['name']}, dataset {args.dataset!r} "
        f"ready ({time.time() - t0:.1f} s)")
    task, config = parts["task"], parts["config"]
    if torch.cuda.is_available():
        task = task.cuda()
    task.eval()
    run_dir = Path(args.out) / args.dataset / parts["variant"] / model_folder(config["model"]) / f"seed{args.seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = run_dir_lock(run_dir)  # a writer like bench run: a second analyze (or a run) on it stops here, exit 2
    try:
        return _analyze_locked(args, parts, task, run_dir, say, t0)
    finally:
        lock.release()


def _table_record(parts: dict[str, Any]) -> dict[str, Any]:
    """What ``model_source`` records of ``--position-table`` (nothing for the table as trained)."""
    if parts["table"] == "as-trained":
        return {}
    grid = parts["task"].model.patch_embed.grid_size
    record: dict[str, Any] = {"position_table": parts["table"], "position_table_grid": [int(g) for g in grid]}
    if parts["table"] == "permuted":
        perm = table_permutation(int(grid[0]) * int(grid[1]), int(parts["config"]["seed"]))
        record["position_table_permutation"] = [int(i) for i in perm]
    return record


def _analyze_locked(args: argparse.Namespace, parts: dict[str, Any], task: Any, run_dir: Path,
                    say: Callable[[str], None], t0: float) -> int:
    """The analyses of a prepared ``bench analyze`` in its locked run directory."""
    progress = bool(getattr(args, "progress_bar", True))
    dm, config, pe = parts["dm"], parts["config"], parts["pe"]
    remove_stale_temp_files(run_dir)  # a killed earlier attempt's half-written files (we hold the lock)
    results: dict[str, Any] = {
        "dataset": args.dataset, "pe": pe, "variant": parts["variant"], "model": config["model"], "seed": args.seed,
        "task": "analysis", "status": "running", "primary_metric": "val/acc1", "metrics": {},
        "analyses": [], "config": config,
        "model_source": {"library": "timm", "name": parts["name"], "checkpoint": str(args.checkpoint),
                         "checkpoint_sha256": parts["sha"], **parts["provenance"],
                         "model_options": config["model_options"],
                         "timm_class": type(task.model).__name__, "extrapolation_rule": extrapolation_rule(task.model),
                         "rpi": "patch embeddings permuted by a forward hook on patch_embed, before any PE is added; "
                                "APE entries and rotary coordinates stay in place",
                         "taps": TAP_SOURCES, **_table_record(parts)},
        "fingerprint": _fingerprint(config, parts["sha"]), "versions": versions(), "git_sha": git_sha(),
        "n_params": sum(p.numel() for p in task.model.parameters()), "run_dir": str(run_dir),
    }
    res_path = run_dir / "results.json"
    atomic_write_json(res_path, results)
    say(f"run directory {run_dir}")
    signals = InterruptSignals()
    try:
        metrics: dict[str, float | None] = {}
        if task.head is not None:
            say(f"fitting the linear probe on {args.probe_samples} training samples ...")
            fit = fit_probe(task, dm, args.probe_samples, args.batch_size)
            metrics["probe/train_acc1"] = fit["train_acc1"]
            results["probe_samples"] = fit["samples"]
        say("validation accuracy ...")
        metrics["val/acc1"], results["val_samples"] = accuracy(task, dm.eval_dataloader(None))
        results["metrics"] = metrics
        errors: dict[str, str] = {}
        times: dict[str, float] = {}
        for i, name in enumerate(parts["names"], 1):
            say(f"analysis {i}/{len(parts['names'])}: {name} ...")
            t_a = time.perf_counter()
            try:
                with reporting(say if progress else None):  # the analysis' own steps (passes, sizes, alphas)
                    out = run_analyses(task, dm, [name], run_dir, config)
            except Exception as e:  # noqa: BLE001 - recorded; the run is then not "complete"
                errors[name] = f"{type(e).__name__}: {e}"
                print(f"bench: warning: analysis {name!r} failed: {errors[name]}", file=sys.stderr)
                continue
            times.update(out.pop("analysis_times_s", {}))
            results.update(out)
            say(f"analysis {i}/{len(parts['names'])}: {name} done in {time.perf_counter() - t_a:.1f} s")
        results["analyses"] = list(parts["names"])
        results["analysis_times_s"] = times
        if errors:
            results["analysis_errors"] = errors
        results["status"] = "incomplete" if errors else "complete"
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (InterruptSignals): say so, and how to run it again
        signum = signals.received or signal.SIGINT
        results["status"] = "interrupted"
        results["interrupted_by"] = signal.Signals(signum).name
        results["resume_command"] = analyze_command(args)
        raise RunInterrupted(signum, results["resume_command"]) from None
    except BaseException as e:
        results["status"] = "failed"
        results["error"] = f"{type(e).__name__}: {e}"
        raise
    finally:
        signals.restore()
        results["wall_time_s"] = round(time.time() - t0, 3)
        atomic_write_json(res_path, results)
    print(format_summary(results))
    return 0 if results["status"] == "complete" else 1
