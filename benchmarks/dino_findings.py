"""The EED study on DINO (README "Self-supervised DINO"): did DINO learn, and how does the PE change
the EED profile over depth on the object-centric and the texture-centric embedded set.

    python benchmarks/dino_findings.py --results results/dino [--readme README.md] [--png docs/dino_eed.png]

The runs (benchmarks/dino_study.sh) train ``--task dino`` on ``objects`` and ``textures`` for every
PE and seed and record EED% and SSDC per layer of the teacher at every checkpoint
(``eed_checkpoints`` of ``results.json``; layer ``l`` = the input of block ``l`` after its first
LayerNorm, the default geometry tap).

Every verdict is computed from the result files. Intervals are 95 % bootstrap intervals over seeds,
differences are paired by seed (the seed is also the data seed), p-values are paired t-tests.

* *Learned*: k-NN top-1 on the test split after training minus the same model at initialisation,
  paired by seed; DINO "learned" a set with a PE when that gain's interval lies above 0. The EED
  claims are read only where it did (a model that did not learn says nothing about the bottleneck).
* *Mid-depth dip* of one run, at its last checkpoint: ``min(EED[first], EED[last]) - min(EED[middle])``
  in EED percentage points, middle = every layer but the first and the last. It is positive when
  the profile is U-shaped (the EED study's object-centric finding) and about 0 or negative for a
  flat or monotone profile (its texture-centric finding). The same number at initialisation is
  reported beside it, so a dip that the random network already has is not credited to training.
"""
from __future__ import annotations

import argparse
import io
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from pebench.core.io import atomic_write_bytes
from pebench.leaderboard import collect_results
from pebench.leaderboard.render import pe_sort_key
from pebench.leaderboard.stats import bootstrap_mean_ci, paired_bootstrap, paired_t_p

sys.path.insert(0, str(Path(__file__).resolve().parent))
from probe_findings import replace_block  # noqa: E402  (benchmarks/ is the script's directory)

START, END = "<!-- dino-findings:start -->", "<!-- dino-findings:end -->"
SETS = ("objects", "textures")


def load(root: str) -> tuple[dict[tuple[str, str], dict[int, dict]], list[str]]:
    """``{(dataset, pe): {seed: results}}`` of the complete DINO runs below ``root``, and one line per
    run that did not complete (path relative to ``root``: status (error))."""
    runs, _ = collect_results(root)
    out: dict[tuple[str, str], dict[int, dict]] = defaultdict(dict)
    missing: list[str] = []
    for r in runs:
        res = r.raw or {}
        if r.complete and r.task == "dino" and res.get("eed_checkpoints"):
            out[(r.dataset, r.label or r.pe)][int(r.seed)] = res
        elif not r.complete:
            rel = Path(r.path).parent.as_posix()  # relative to root
            missing.append(f"`{rel}`: {r.status}" + (f" ({res['error']})" if res.get("error") else ""))
    return dict(out), sorted(missing)


def dip(eed: list[float]) -> float:
    """Mid-depth dip in EED percentage points (module docstring); needs >= 3 layers."""
    if len(eed) < 3:
        raise ValueError("the mid-depth dip needs at least 3 layers")
    return float(min(eed[0], eed[-1]) - min(eed[1:-1]))


def _ci(values: list[float], fmt: str = "{:.1f}") -> str:
    ci = bootstrap_mean_ci(values)
    m = float(np.mean(values)) if values else float("nan")
    return fmt.format(m) + ("" if ci is None else " [" + fmt.format(ci[0]) + ", " + fmt.format(ci[1]) + "]")


def _paired(diffs: list[float], fmt: str = "{:+.1f}") -> tuple[str, str]:
    """``(text, verdict)``: mean paired difference with its 95 % bootstrap interval and paired t-test;
    verdict ``above`` / ``below`` when the interval excludes 0 on that side and p < 0.05, else ``neither``."""
    pb = paired_bootstrap(diffs)
    if pb is None:
        return "n < 2", "neither"
    m, lo, hi, sig = pb
    p = paired_t_p(diffs)
    text = f"{fmt.format(m)} [{fmt.format(lo)}, {fmt.format(hi)}], paired t-test p = {p:.2g}, {len(diffs)} seeds"
    if sig and p < 0.05:
        return text, "above" if lo > 0 else "below"
    return text, "neither"


CLAIM = {"above": "reproduced", "below": "contradicted", "neither": "not shown"}


def summarise(data: dict[tuple[str, str], dict[int, dict]], missing: list[str] | None = None) -> str:
    lines: list[str] = []
    keys = sorted(data, key=lambda k: (SETS.index(k[0]) if k[0] in SETS else 9, pe_sort_key(k[1])))
    if not keys:
        return "No complete DINO runs with EED checkpoints were found."
    first = next(iter(data[keys[0]].values()))
    cfg = first.get("config", {})
    steps = first["eed_checkpoints"][-1].get("global_step")
    lines.append(f"Model `{cfg.get('model')}`, {cfg.get('epochs')} epochs ({steps} steps of {cfg.get('batch_size')}), "
                 f"k-NN (k = 20, T = 0.07) on the test split; EED / SSDC at the geometry tap "
                 f"`{first['eed_checkpoints'][-1].get('eed_tap', first['eed_checkpoints'][-1].get('tap'))}` on "
                 f"{first['eed_checkpoints'][-1].get('probe_size')} validation images; means over seeds with 95 % "
                 f"bootstrap intervals.")
    shas = sorted({(run.get("git_sha") or "unknown")[:7] for key in keys for run in data[key].values()})
    lines.append("")  # a study is one commit's; say so when it is not
    lines.append(f"Every run was made at commit `{shas[0]}`." if len(shas) == 1 else
                 f"The runs were made at {len(shas)} different commits: " + ", ".join(f"`{c}`" for c in shas) + ".")
    if missing:
        lines.append("")
        lines.append(f"Not in the table ({len(missing)} runs that did not complete): " + "; ".join(missing) + ".")
    lines.append("")
    lines.append("| set | PE | n | k-NN init % | k-NN % | k-NN gain (paired) | linear init → final % | "
                 "EED % per layer, init | EED % per layer, last checkpoint | dip init | dip last |")
    lines.append("|---|---|---:|---:|---|---|---|---|---|---|---|")
    learned: dict[tuple[str, str], bool] = {}
    gain_sides: dict[tuple[str, str], str] = {}
    linear_gains: dict[tuple[str, str], str] = {}
    dips: dict[tuple[str, str], dict[int, float]] = {}
    for key in keys:
        runs = data[key]
        seeds = sorted(runs)
        k0 = [100 * runs[s]["metrics"]["test/knn_top1_init"] for s in seeds]
        k1 = [100 * runs[s]["metrics"]["test/knn_top1"] for s in seeds]
        l0 = [100 * runs[s]["metrics"].get("test/linear_top1_init", float("nan")) for s in seeds]
        l1 = [100 * runs[s]["metrics"].get("test/linear_top1", float("nan")) for s in seeds]
        gain_text, gain_side = _paired([b - a for a, b in zip(k0, k1)])
        learned[key] = gain_side == "above"
        gain_sides[key] = gain_side
        linear_gains[key] = _paired([b - a for a, b in zip(l0, l1)])[0]
        e0 = np.array([runs[s]["eed_checkpoints"][0]["eed_percent"] for s in seeds], dtype=float)  # (S, L)
        e1 = np.array([runs[s]["eed_checkpoints"][-1]["eed_percent"] for s in seeds], dtype=float)
        d0 = [dip(list(e)) for e in e0]
        d1 = [dip(list(e)) for e in e1]
        dips[key] = dict(zip(seeds, d1))
        lines.append(f"| {key[0]} | {key[1]} | {len(seeds)} | {np.mean(k0):.1f} | {_ci(k1)} | {gain_text} | "
                     f"{np.mean(l0):.1f} → {np.mean(l1):.1f} | {' / '.join(f'{v:.1f}' for v in e0.mean(0))} | "
                     f"{' / '.join(f'{v:.1f}' for v in e1.mean(0))} | {_ci(d0)} | {_ci(d1)} |")
    lines.append("")
    lines.append("#### Verdicts")
    lines.append("")
    lines.append("- **DINO learned the set** (k-NN gain over the same model at initialisation above 0):")
    for key in keys:
        word = {"above": "yes", "below": "no: k-NN fell", "neither": "not shown"}[gain_sides[key]]
        lines.append(f"  - {key[0]} / {key[1]}: **{word}**")
    lines.append("- **Linear-probe gain** over the same model at initialisation (the same frozen features read by "
                 "logistic regression instead of k-NN; measured, not the criterion above):")
    for key in keys:
        lines.append(f"  - {key[0]} / {key[1]}: {linear_gains[key]}")
    lines.append("- **Object-centric data has a mid-depth EED dip** (the EED study on CIFAR-100 / Tiny ImageNet; "
                 "dip at the last checkpoint above 0):")
    for key in [k for k in keys if k[0] == "objects"]:
        if not learned[key]:
            lines.append(f"  - {key[1]}: **not testable** (DINO did not learn `objects` with this PE)")
            continue
        text, side = _paired(list(dips[key].values()))
        lines.append(f"  - {key[1]}: **{CLAIM[side]}** (dip {text})")
    lines.append("- **The texture-centric profile is flatter than the object-centric one** (dip on `objects` "
                 "minus dip on `textures`, paired by seed, above 0):")
    for pe in sorted({k[1] for k in keys}, key=pe_sort_key):
        a, b = ("objects", pe), ("textures", pe)
        if a not in dips or b not in dips:
            continue
        if not (learned[a] and learned[b]):
            lines.append(f"  - {pe}: **not testable** (DINO did not learn both sets with this PE)")
            continue
        diffs = [dips[a][s] - dips[b][s] for s in sorted(set(dips[a]) & set(dips[b]))]
        text, side = _paired(diffs)
        lines.append(f"  - {pe}: **{CLAIM[side]}** ({text})")
    lines.append("- **The PE changes the bottleneck** (dip of each PE minus the dip of `none`, paired by seed; "
                 "measured, no prediction):")
    for ds in SETS:
        ref = dips.get((ds, "none"))
        if ref is None:
            continue
        for key in [k for k in keys if k[0] == ds and k[1] != "none"]:
            diffs = [dips[key][s] - ref[s] for s in sorted(set(dips[key]) & set(ref))]
            text, _ = _paired(diffs)
            lines.append(f"  - {ds} / {key[1]}: {text}")
    return "\n".join(lines)


def plot(data: dict[tuple[str, str], dict[int, dict]], path: str) -> None:
    """Rows = sets, columns = PEs; EED % over depth at each checkpoint (mean over seeds), light = early."""
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    sets = [s for s in SETS if any(k[0] == s for k in data)]
    pes = sorted({k[1] for k in data}, key=pe_sort_key)
    fig = Figure(figsize=(2.6 * len(pes), 2.4 * len(sets)), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    cmap = colormaps["viridis_r"]
    for i, ds in enumerate(sets):
        for j, pe in enumerate(pes):
            ax = fig.add_subplot(len(sets), len(pes), i * len(pes) + j + 1)
            runs = data.get((ds, pe))
            if runs:
                hist = [r["eed_checkpoints"] for r in runs.values()]
                n = min(len(h) for h in hist)
                for c in range(n):
                    eed = np.mean([h[c]["eed_percent"] for h in hist], axis=0)
                    ax.plot(range(len(eed)), eed, "o-", ms=3, color=cmap(0.15 + 0.85 * c / max(1, n - 1)),
                            label=f"epoch {hist[0][c]['epoch']}")
            ax.set_title(f"{ds} / {pe}", fontsize=9)
            if i == len(sets) - 1:
                ax.set_xlabel("layer")
            if j == 0:
                ax.set_ylabel("EED %")
            if i == 0 and j == len(pes) - 1 and ax.get_lines():
                ax.legend(fontsize=6)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    atomic_write_bytes(path, buf.getvalue())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="results/dino", help="root of the DINO study's run directories")
    ap.add_argument("--readme", metavar="FILE", help="write between the dino-findings markers of FILE instead of printing")
    ap.add_argument("--png", metavar="FILE", help="also write the EED-over-depth-by-epoch grid here")
    args = ap.parse_args(argv)
    data, missing = load(args.results)
    text = summarise(data, missing)
    if args.readme:
        doc = Path(args.readme).read_text(encoding="utf-8")
        atomic_write_bytes(args.readme, replace_block(doc, text, START, END).encode("utf-8"))
    else:
        print(text)
    if args.png and data:
        plot(data, args.png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
