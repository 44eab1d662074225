"""What the DINO study's features encode: the class, or a nuisance of the scene.

Reads the runs of the DINO study (``bench study run dino``) that still have their
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
checkpoints. The table is printed (means over seeds with 95 % Student-t intervals, the change paired
by seed: ``pebench.leaderboard.stats``), and ``--report FILE`` writes it with its prose as the page
``results/dino/FEATURES.md`` (not the study's report, ``results/dino/REPORT.md``, which it links to):

    python -m benchmarks.dino_shortcut --results results/dino [--report results/dino/FEATURES.md]
"""
from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from pebench.core.io import atomic_write_json
from pebench.leaderboard import collect_results
from pebench.leaderboard.render import pe_sort_key
from pebench.leaderboard.stats import format_p, mean_test, paired_test

from .reports import write_report

__all__ = ["CACHE", "FACTORS", "diagnose", "explained_share", "features_report", "load", "scene_factors",
           "shortcut_table"]

#: the factors measured, in table order, and the file each run keeps its shares in
FACTORS = ("class", "background", "object size", "object position", "object brightness")
CACHE = "dino_shortcut.json"
#: degrees of freedom of each factor beside the intercept (``class``: the set's number of classes - 1; position: y, x)
DOF = {"background": 1, "object size": 1, "object position": 2, "object brightness": 1}
CLASSES = {"objects": 10, "textures": 8}
#: the sets' training split (the k-NN bank) when the run sets no ``--data-option train_size``
TRAIN_SIZE = 2048


def load(root: str | Path) -> dict[tuple[str, str], dict[int, dict]]:
    """``{(dataset, pe): {seed: results}}`` of the complete DINO runs below ``root``."""
    out: dict[tuple[str, str], dict[int, dict]] = defaultdict(dict)
    for r in collect_results(root)[0]:
        raw = r.raw or {}
        if r.complete and r.task == "dino" and raw.get("eed_checkpoints"):
            out[(r.dataset, r.label or r.pe)][int(r.seed)] = raw
    return dict(out)


def run_dir(results: str | Path, dataset: str, pe: str, res: dict, seed: int) -> Path:
    """The run directory of one study run below ``results``."""
    return Path(results) / dataset / pe / res["config"]["model"] / f"seed{seed}"


def _mean(values: list[float]) -> str:
    """Mean with its 95 % Student-t interval (the mean alone below 2 seeds)."""
    r = mean_test(values)
    return f"{r.estimate:.1f}" + ("" if r.lo is None else f" [{r.lo:.1f}, {r.hi:.1f}]")


def _change(before: list[float], after: list[float]) -> str:
    """``after - before`` paired by seed: mean, 95 % interval and paired t-test, or why there is no test."""
    r = paired_test(after, before)
    if not r.tested:
        return f"{r.estimate:+.1f}, no test ({r.reason}), {r.n} seeds"
    return f"{r.estimate:+.1f} [{r.lo:+.1f}, {r.hi:+.1f}], paired t-test {format_p(r.p, r.p_floor)}, {r.n} seeds"


def shortcut_table(shares: dict[tuple[str, str], dict[int, dict[str, dict[str, float]]]]) -> str:
    """Markdown table of the explained-variance shares (%) per set, PE and factor."""
    lines = ["| set | PE | n | factor | R² % at init | R² % trained | change (paired) |", "|---|---|---:|---|---|---|---|"]
    for (ds, pe) in sorted(shares, key=lambda k: (k[0], pe_sort_key(k[1]))):
        seeds = shares[(ds, pe)]
        for factor in FACTORS:
            if factor not in next(iter(seeds.values()))["init"]:
                continue
            a = [100 * seeds[s]["init"][factor] for s in sorted(seeds)]
            b = [100 * seeds[s]["trained"][factor] for s in sorted(seeds)]
            lines.append(f"| {ds} | {pe} | {len(seeds)} | {factor} | {_mean(a)} | {_mean(b)} | {_change(a, b)} |")
    return "\n".join(lines) + "\n"


def shortcut_text(shares, skipped: list[str]) -> str:
    """The shortcut table, and the runs it leaves out."""
    text = shortcut_table(shares)
    if skipped:
        text += f"\nNo {CACHE} and no checkpoint, left out: {', '.join(sorted(skipped))}\n"
    return text


def _bank(res: dict) -> int:
    """The number of training images (the k-NN bank) of one run."""
    return int((res["config"].get("data") or {}).get("train_size", TRAIN_SIZE))


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _wrap(text: str) -> str:
    """``text`` filled to 100 columns, never breaking inside a `code span`."""
    spans = text.split("`")
    kept = "`".join(t.replace(" ", "\0") if i % 2 else t for i, t in enumerate(spans))
    return textwrap.fill(kept, 100, break_long_words=False, break_on_hyphens=False).replace("\0", " ")


def _chance(data: dict[tuple[str, str], dict[int, dict]], shares) -> str:
    """What a factor unrelated to the features explains by chance: about dof / (n - 1) of their variance."""
    cells: dict[tuple[str, int, int], list[str]] = defaultdict(list)  # (factor, dof, n) -> sets
    for (ds, pe), seeds in sorted(shares.items()):
        for seed, res in seeds.items():
            for f in (f for f in FACTORS if f in res["init"]):
                dof = CLASSES.get(ds, 0) - 1 if f == "class" else DOF[f]
                where = cells[(f, dof, _bank(data[(ds, pe)][seed]))]
                if dof > 0 and ds not in where:
                    where.append(ds)
    named = defaultdict(int)  # factor -> its number of (dof, n): above 1, each is named with its sets
    for f, _, _ in cells:
        named[f] += 1
    groups: dict[tuple[int, int], list[str]] = defaultdict(list)  # (dof, n) -> factors
    for (f, dof, n), sets in sorted(cells.items(), key=lambda kv: FACTORS.index(kv[0][0])):
        if sets:
            groups[(dof, n)].append(f"`{f}`" + ("" if named[f] == 1 else " on " + _and([f"`{d}`" for d in sets])))
    if not groups:
        return ""
    ns = sorted({n for _, n in groups})
    parts = [f"{100 * dof / (n - 1):.1g} % for {_and(names)} ({dof} degree{'s' if dof > 1 else ''} of freedom"
             + (" each" if len(names) > 1 else "") + ("" if len(ns) == 1 else f", n = {n}") + ")"
             for (dof, n), names in sorted(groups.items(), key=lambda kv: -kv[0][0] / (kv[0][1] - 1))]
    return _wrap("A factor with no relation to the features would still explain about dof / (n - 1) of their "
                 "variance by chance" + (f" (n = {ns[0]} training images)" if len(ns) == 1 else "") + ": "
                 + "; ".join(parts) + ".")


def features_report(data: dict[tuple[str, str], dict[int, dict]], shares, skipped: list[str]) -> str:
    """results/dino/FEATURES.md: the shortcut table with its prose (``data``: :func:`load`'s runs; ``shares``,
    ``skipped``: as :func:`shortcut_text` takes them)."""
    runs = [data[key][seed] for key in shares for seed in shares[key]]
    shas = sorted({(r.get("git_sha") or "unknown")[:7] for r in runs})
    seeds = sorted({len(v) for v in shares.values()})
    about = _wrap(
        "Written by `python -m benchmarks.dino_shortcut --results results/dino --report results/dino/FEATURES.md` "
        f"from the `{CACHE}` of each run directory below this folder (`tests/studies/test_dino_shortcut.py` checks "
        "that it regenerates byte for byte); the script computes those files from the runs' checkpoints "
        f"(`last.ckpt`), which are not committed. R² is the share of the variance of the teacher's pooled features "
        f"over the {_and(sorted({str(_bank(r)) for r in runs}))} training images (the k-NN bank, as the run "
        "evaluated it) that a linear function of the factor explains, `R² = 1 - ||F - [1 Z] B||² / ||F||²` for the "
        "centred features `F` and the factor matrix `Z`, `B` the least-squares fit: at initialisation (the model "
        "rebuilt from the run's seed and hyper-parameters, checked against its recorded k-NN top-1) and after "
        "training (the teacher of `last.ckpt`). `class` is the one-hot label; on `objects` the other factors are the "
        "scene's nuisances, read from the scene each image was rendered from: `background` (mean intensity of the "
        "background gradient), `object size`, `object position` (y, x) and `object brightness` (mean of its colour). "
        f"{len(runs)} runs, " + (f"every one made at commit `{shas[0]}`" if len(shas) == 1 else
                                 f"made at {len(shas)} commits: " + _and([f"`{c}`" for c in shas]))
        + "; means over seeds with 95 % Student-t intervals, the change (trained minus init) paired by seed with its "
        "paired t-test (no test where every seed's change is the same). The table is a measurement "
        f"({_and([str(n) for n in seeds])} seeds per PE on " + _and([f"`{d}`" for d in sorted({d for d, _ in shares})])
        + "); it carries no verdict.")
    blocks = ["# What the DINO study's features encode", about, shortcut_text(shares, skipped).rstrip("\n"),
              _chance(data, shares), "The study's report: [`REPORT.md`](REPORT.md)"]
    return "\n\n".join(b for b in blocks if b) + "\n"


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
    ap.add_argument("--report", metavar="FILE", help="also write the table with its prose (results/dino/FEATURES.md) "
                    "to FILE")
    ap.add_argument("--recompute", action="store_true", help=f"ignore the runs' {CACHE} files (needs last.ckpt)")
    args = ap.parse_args(argv)
    data = load(args.results)
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
        write_report(args.report, features_report(data, shares, skipped))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
