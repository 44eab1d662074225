"""What the DINO study's features encode: the class, or a nuisance of the scene.

Reads the runs of the DINO study (``benchmarks/dino_study.sh``) that still have their
``last.ckpt`` (checkpoints are not committed: run the study first) and, for each, embeds the k-NN
bank -- the training split, as the run evaluated it -- with the teacher twice:

* at initialisation: the task rebuilt from the run's seed and hyper-parameters, exactly as
  ``bench run`` builds it; its k-NN top-1 on the run's test split must equal the run's recorded
  ``test/knn_top1_init``, else the script stops (the rebuilt model would not be the run's);
* after training: the teacher of ``last.ckpt``.

For centred features ``F`` ``(n, D)`` and a factor matrix ``Z`` ``(n, k)`` it reports
``R² = 1 - ||F - [1 Z] B||² / ||F||²`` with ``B`` the least-squares fit: the fraction of the
features' total variance that a linear function of the factor explains. Factors: ``class``
(one-hot label: the between-class share of the variance) on every set; on ``objects`` also the
scene's nuisances, read from the scene each image was rendered from: ``background`` (mean
intensity of the background gradient), ``object size``, ``object position`` (y, x) and
``object brightness`` (mean of its colour). A feature space that serves k-NN on the class has a
large ``class`` share; one ruled by a nuisance has a large share for that nuisance.

Each run's shares are written to ``<run dir>/dino_shortcut.json`` and read from there on the next
call (``--recompute`` ignores them), so the table regenerates from committed files without the
checkpoints; it is printed, and ``--report`` writes the study's whole report (results/dino/REPORT.md,
the same file benchmarks/dino_findings.py writes):

    python -m benchmarks.dino_shortcut --results results/dino [--report results/dino/REPORT.md]
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from pebench.core.io import atomic_write_json

from .dino_findings import CACHE, FACTORS, load, report, run_dir, shortcut_text
from .reports import write_report

__all__ = ["CACHE", "FACTORS", "diagnose", "explained_share", "scene_factors"]


def explained_share(feats: np.ndarray, factor: np.ndarray) -> float:
    """R² of the least-squares fit of ``feats`` ``(n, D)`` on ``[1, factor]`` (``factor`` ``(n,)`` or ``(n, k)``),
    summed over the feature dimensions (see the module docstring)."""
    f = feats - feats.mean(0, keepdims=True)
    z = factor.reshape(len(factor), -1).astype(np.float64)
    design = np.concatenate([np.ones((len(z), 1)), z], axis=1)
    coef, *_ = np.linalg.lstsq(design, f, rcond=None)
    total = float((f ** 2).sum())
    return float(1.0 - ((f - design @ coef) ** 2).sum() / total) if total > 0 else float("nan")


def scene_factors(dataset: Any, labels: np.ndarray, num_classes: int) -> dict[str, np.ndarray]:
    """Factor matrices per name for the samples of ``dataset`` (scene nuisances where it has scenes)."""
    out = {"class": np.eye(num_classes)[labels]}
    if not hasattr(dataset, "scene") or "bg" not in dataset.scene(0):
        return out
    scenes = [dataset.scene(i) for i in range(len(labels))]
    out["background"] = np.array([s["bg"].mean() for s in scenes])
    out["object size"] = np.array([s["r"] for s in scenes])
    out["object position"] = np.array([s["centre"] for s in scenes])
    out["object brightness"] = np.array([s["colour"].mean() for s in scenes])
    return out


def diagnose(run_dir: Path, results: dict) -> dict[str, dict[str, float]]:
    """``{"init": {factor: R²}, "trained": {...}}`` for one run (see the module docstring).

    Features come from the task's own evaluation path (``_collect`` over the bank loader, the teacher
    in eval mode), so they are the ones the run's k-NN read."""
    import tempfile

    from pebench.runner.config import merge
    from pebench.runner.run import prepare
    from pebench.tasks.dino import DinoTask
    from pebench.tasks.dino.multicrop import plain_train_dataset

    with tempfile.TemporaryDirectory() as tmp:  # prepare() seeds and builds as `bench run` does; writes nothing here
        parts = prepare(merge(results["config"], {"out": tmp, "devices": 1, "accelerator": "cpu"}))
    dm, init = parts.dm, parts.task
    trained = DinoTask.load_from_checkpoint(run_dir / "last.ckpt", map_location="cpu")
    out: dict[str, dict[str, float]] = {}
    factors = None  # the bank is read in dataset order, so both models share the labels and the factors
    for name, task in (("init", init), ("trained", trained)):
        bank = task._collect(dm.bank_dataloader())  # ((N, D), (N,)), in dataset order
        if name == "init":  # the rebuilt model must be the run's: same k-NN at initialisation
            knn0 = task.evaluate_sets(bank, task._collect(dm.query_dataloader()), suffix="_init")["test/knn_top1_init"]
            recorded = results["metrics"]["test/knn_top1_init"]
            if abs(knn0 - recorded) > 1e-6:
                raise SystemExit(f"{run_dir}: the rebuilt initial model's k-NN top-1 {knn0:.4f} differs from the "
                                 f"recorded {recorded:.4f}; not the run's initialisation")
        if factors is None:
            factors = scene_factors(plain_train_dataset(dm.base), bank[1].numpy(), dm.num_classes)
        out[name] = {k: explained_share(bank[0].double().numpy(), z) for k, z in factors.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", required=True, help="the study's directory (runs with last.ckpt)")
    ap.add_argument("--report", metavar="FILE", help="also write the study's report (results/dino/REPORT.md) to FILE")
    ap.add_argument("--recompute", action="store_true", help=f"ignore the runs' {CACHE} files (needs last.ckpt)")
    args = ap.parse_args(argv)
    data, _ = load(args.results)
    shares: dict[tuple[str, str], dict[int, dict]] = defaultdict(dict)
    skipped = []
    for (ds, pe), seeds in data.items():
        for seed, res in seeds.items():
            where = run_dir(args.results, ds, pe, res, seed)
            cache = where / CACHE
            if cache.is_file() and not args.recompute:
                shares[(ds, pe)][seed] = json.loads(cache.read_text())
            elif (where / "last.ckpt").is_file():
                shares[(ds, pe)][seed] = diagnose(where, res)
                atomic_write_json(cache, shares[(ds, pe)][seed])
            else:
                skipped.append(where.relative_to(args.results).as_posix())
    if not shares:
        print(f"no complete run with a {CACHE} or a last.ckpt under {args.results}", file=sys.stderr)
        return 2
    print(shortcut_text(shares, skipped), end="")
    if args.report:
        write_report(args.report, report(args.results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
