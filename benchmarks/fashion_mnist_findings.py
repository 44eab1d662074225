"""Study 1 (issue #43 item 4): Fashion-MNIST x every PE, and whether the probes predict it (issue #44 item 8).

    python -m benchmarks.fashion_mnist_findings --results results/embedded/fashion-mnist \
        --report results/embedded/fashion-mnist/REPORT.md [--probes results/embedded]

Reads the runs ``benchmarks/fashion_mnist_study.sh`` writes (``<results>/<variant>/<model>/seed<S>``, by default
``<results>`` = ``results/embedded/fashion-mnist``, so the leaderboard of ``results/embedded`` includes them)
and writes the report whole: protocol, test accuracy with Student-t 95 % intervals, paired differences by seed
against ``none`` and ``ape`` (Holm-Bonferroni over that family), extrapolation accuracy, fragility, SSDC and SSDC
under RPI per layer, the alpha sweep, verdicts on the seed claims (each claim its own family, Holm at 5 %), and
the rank correlation across PEs between each probe's outcome (``<probes>/probe-*``) and this study's accuracies.

Statistics (``pebench.leaderboard.stats``): intervals are Student-t over seeds (:func:`t_mean_ci`), paired
differences use :func:`paired_t_interval` (the paired t-test of per-seed differences), adjusted p-values are
:func:`holm_adjust` (Holm 1979), "near 0" claims need the TOST equivalence test (:func:`tost_paired`, Schuirmann
1987) inside :data:`MARGIN`. A verdict is "reproduced" when the adjusted p is below 5 % with the predicted sign,
"contradicted" when it is below 5 % with the other sign, else "inconclusive". Rank correlations are Spearman's
(``scipy.stats.spearmanr``) over PEs (means over seeds), with a permutation p-value
(:func:`spearman_permutation_p`) and a percentile bootstrap interval over PEs (:func:`bootstrap_spearman`, seeded). The thresholds below were fixed before the study's runs existed.
"""
from __future__ import annotations

import argparse
import datetime
import math
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy import stats

from pebench.leaderboard import collect_results
from pebench.leaderboard.render import pe_sort_key
from pebench.leaderboard.stats import holm_adjust, paired_t_interval, tost_paired

from .reports import SeedRuns, emit, fill, seed_ci, seed_mean, shown

DATASET = "fashion-mnist"
#: a seed learned when its test accuracy is at least this (5x the 10 % chance); a PE learned when every seed did
LEARNED = 0.5
#: TOST margin for "SSDC under RPI is near 0" (Spearman units; the untrained twin's one-permutation sd is ~0.03-0.04)
MARGIN = 0.05
#: the family-wise error rate of each family of tests
FWER = 0.05
#: "RoPE" in the seed claim "RoPE is the least fragile": 2D axial RoPE (Heo et al. 2024, arXiv 2403.13298)
ROPE = "rope-axial"
REFERENCES = ("none", "ape")
BOOT_RESAMPLES, BOOT_SEED = 10_000, 0


class Cell(SeedRuns):
    """The complete runs of one PE variant, by seed."""

    def extrapolation(self, resolution: str) -> dict[int, float]:
        out = {}
        for s, r in self.runs.items():
            for row in r.raw.get("extrapolation") or []:
                if row.get("resolution") == resolution and row.get("acc1") is not None:
                    out[s] = float(row["acc1"])
        return out

    @property
    def learned(self) -> bool:
        acc = self.metric("test/acc1")
        return bool(acc) and len(acc) == len(self.runs) and min(acc.values()) >= LEARNED


def load(results: str | Path) -> dict[str, Cell]:
    runs, _ = collect_results(results)
    by = defaultdict(list)
    for r in runs:
        if r.complete and r.dataset == DATASET:
            by[r.label].append(r)
    return {lab: Cell(lab, rs) for lab, rs in sorted(by.items(), key=lambda kv: pe_sort_key(kv[0]))}


# ------------------------------------------------------------------------------------------------ formatting
mean = seed_mean  # the report's short names for the shared helpers of reports.py
ci = seed_ci


def pct_ci(d: dict[int, float]) -> str:
    return ci(d, 100.0, 1, (0.0, 100.0))


def layers(values: list[float], digits: int = 2, sign: str = "+") -> str:
    return " / ".join(f"{v:{sign}.{digits}f}" for v in values) if values else "n/a"


def pval(p: float) -> str:
    return "n/a" if p is None or not math.isfinite(p) else f"{p:.2g}"


def paired(a: dict[int, float], b: dict[int, float]):
    """(mean a - b, lo, hi, paired t-test p, seeds) over the seeds both have; None below 2."""
    seeds = sorted(set(a) & set(b))
    r = paired_t_interval([a[s] - b[s] for s in seeds])
    return None if r is None else (r[0], r[1], r[2], r[3], len(seeds))


def verdict(p_adj: float, estimate: float, sign: int) -> str:
    if math.isfinite(p_adj) and p_adj < FWER:
        return "reproduced" if sign * estimate > 0 else "contradicted"
    return "inconclusive"


# ------------------------------------------------------------------------------------------------ tables
def learned_cells(cells: dict[str, Cell]) -> dict[str, Cell]:
    return {lab: c for lab, c in cells.items() if c.learned}


def accuracy_table(cells: dict[str, Cell]) -> str:
    out = ["| PE | seeds | learned | val % | test % [95 % t-CI] |", "|---|---:|---|---:|---|"]
    for lab, c in cells.items():
        acc = c.metric("test/acc1")
        n_ok = sum(v >= LEARNED for v in acc.values())
        out.append(f"| {lab} | {len(c.seeds)} | {'yes' if c.learned else f'**no** ({n_ok}/{len(c.seeds)} seeds)'} | "
                   f"{100 * mean(c.metric('val/acc1')):.1f} | {pct_ci(acc)} |")
    return "\n".join(out)


def comparisons(cells: dict[str, Cell]) -> str:
    """Paired test-accuracy differences against each reference, one Holm family over all of them."""
    ok = learned_cells(cells)
    rows, seen = [], set()
    for ref in REFERENCES:
        if ref not in ok:
            continue
        for lab, c in ok.items():
            if lab == ref or frozenset((lab, ref)) in seen:  # ape against none is none against ape
                continue
            seen.add(frozenset((lab, ref)))
            r = paired(c.metric("test/acc1"), ok[ref].metric("test/acc1"))
            if r is not None:
                rows.append((lab, ref, r))
    if not rows:
        return "No learned PE pair with both references' seeds: no comparison."
    adj = holm_adjust([r[3] for _, _, r in rows])
    out = [f"Family: the {len(rows)} paired comparisons below (Holm at {100 * FWER:.0f} % family-wise).", "",
           "| PE | against | difference, points [95 % t-CI] | seeds | paired t p | Holm p | |",
           "|---|---|---|---:|---:|---:|---|"]
    for (lab, ref, (m, lo, hi, p, n)), pa in zip(rows, adj):
        mark = ("**higher**" if m > 0 else "**lower**") if pa < FWER else "not shown different"
        out.append(f"| {lab} | {ref} | {100 * m:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] | {n} | {pval(p)} | "
                   f"{pval(pa)} | {mark} |")
    return "\n".join(out)


def sizes(cells: dict[str, Cell]) -> list[tuple[str, str]]:
    """[(resolution, factor label)] of the extrapolation rows, factors against the training resolution."""
    found: set[str] = set()
    train = None
    for c in cells.values():
        for r in c.runs.values():
            found |= {row["resolution"] for row in r.raw.get("extrapolation") or [] if "acc1" in row}
            train = train or r.raw.get("config", {}).get("resolution")
    keys = sorted(found, key=lambda k: int(k.split("x")[0]))
    base = int(train) if train else (int(keys[0]) if keys else 1)
    return [(k, f"{int(k.split('x')[0]) / base:g}x") for k in keys]


def extrapolation_table(cells: dict[str, Cell]) -> str:
    sz = sizes(cells)
    if not sz:
        return "No run recorded extrapolation."
    out = ["| PE | " + " | ".join(f"{k} px ({f}) %" for k, f in sz) + " |", "|---|" + "---|" * len(sz)]
    for lab, c in learned_cells(cells).items():
        out.append(f"| {lab} | " + " | ".join(pct_ci(c.extrapolation(k)) for k, _ in sz) + " |")
    return "\n".join(out)


def fragility_table(cells: dict[str, Cell]) -> str:
    out = ["| PE | clean acc % | FS jpeg | FS blur |", "|---|---|---|---|"]
    for lab, c in learned_cells(cells).items():
        clean = {s: r.raw["robustness"]["clean_acc"] for s, r in c.runs.items() if r.raw.get("robustness")}
        out.append(f"| {lab} | {pct_ci(clean)} | {ci(c.fs('jpeg'), digits=3)} | {ci(c.fs('blur'), digits=3)} |")
    return "\n".join(out)


def geometry_table(cells: dict[str, Cell]) -> str:
    out = ["| PE | SSDC | SSDC_RPI | RPI null sd (untrained twin) | RPI gain over init |", "|---|---|---|---|---|"]
    for lab, c in learned_cells(cells).items():
        out.append(f"| {lab} | {layers(c.layers_mean('ssdc'))} | {layers(c.layers_mean('ssdc_rpi'))} | "
                   f"{layers(c.layers_mean('ssdc_rpi_init_sd'), 3, '')} | {layers(c.layers_mean('ssdc_rpi_gain'))} |")
    return "\n".join(out)


def alpha_points(c: Cell) -> dict[int, list[dict]]:
    return {s: r.raw["alpha_sweep"] for s, r in c.runs.items() if r.raw.get("alpha_sweep")}


def alpha_table(cells: dict[str, Cell]) -> str:
    out = []
    for lab, c in learned_cells(cells).items():
        sweeps = alpha_points(c)
        if not sweeps:
            continue
        alphas = sorted({p["alpha"] for sw in sweeps.values() for p in sw}, reverse=True)
        out += [f"`{lab}` (means over {len(sweeps)} seeds):", "",
                "| α | clean acc % | FS jpeg (seeds defined) | SSDC_RPI, last layer |", "|---:|---:|---:|---:|"]
        for a in alphas:
            pts = [p for sw in sweeps.values() for p in sw if p["alpha"] == a]
            fs = [p["fs"] for p in pts if p.get("fs") is not None]
            rpi = [p["ssdc_rpi"][-1] for p in pts if p.get("ssdc_rpi") and p["ssdc_rpi"][-1] is not None]
            out.append(f"| {a:g} | {100 * np.mean([p['acc'] for p in pts]):.1f} | "
                       + (f"{np.mean(fs):.3f} ({len(fs)})" if fs else "n/a") + " | "
                       + (f"{np.mean(rpi):+.3f}" if rpi else "n/a") + " |")
        out.append("")
    return "\n".join(out).strip("\n") or "No run recorded an α sweep."


# ------------------------------------------------------------------------------------------------ verdicts
class Family:
    """The tests of one claim: (subject, estimate, p, predicted sign, text); Holm-adjusted together."""

    def __init__(self) -> None:
        self.tests: list[tuple[str, float, float, int, str]] = []

    def add(self, subject: str, estimate: float, p: float, sign: int, text: str) -> None:
        self.tests.append((subject, estimate, p, sign, text))

    def lines(self) -> list[str]:
        if not self.tests:
            return ["  - not testable: no learned variant has the data this claim needs with at least 2 seeds"]
        adj = holm_adjust([min(1.0, max(0.0, p)) if math.isfinite(p) else 1.0 for _, _, p, _, _ in self.tests])
        return [f"  - {subj}: **{verdict(pa, est, sign) if sign else ('reproduced' if pa < FWER else 'inconclusive')}**"
                f" ({text}; p = {pval(p)}, Holm p = {pval(pa)} over {len(self.tests)})"
                for (subj, est, p, sign, text), pa in zip(self.tests, adj)]


def rho_per_seed(c: Cell, what: str) -> list[float]:
    """Per seed: Spearman rho over the alpha grid between alpha and ``what`` (``ssdc_rpi``: last layer; or a shift's
    FS), over the alphas where both are defined (at least 3)."""
    out = []
    for sw in alpha_points(c).values():
        if what == "ssdc_rpi":
            pts = [(p["alpha"], p["ssdc_rpi"][-1]) for p in sw if p.get("ssdc_rpi") and p["ssdc_rpi"][-1] is not None]
        else:
            pts = [(p["alpha"], p["fs"]) for p in sw if p.get("shift") == what and p.get("fs") is not None]
        if len(pts) >= 3 and np.ptp([y for _, y in pts]) > 0:
            out.append(float(stats.spearmanr([x for x, _ in pts], [y for _, y in pts]).statistic))
    return out


def claims(cells: dict[str, Cell]) -> str:
    ok = learned_cells(cells)
    pes = [lab for lab in ok if lab != "none" and "+rpt" not in lab]
    not_learned = [lab for lab in cells if lab not in ok]
    out = []
    if not_learned:
        out += [f"Not read by any verdict (did not learn: a seed below {100 * LEARNED:.0f} % test accuracy): "
                + ", ".join(f"`{x}`" for x in not_learned) + ".", ""]
    # 1. index anchoring with a PE
    fam = Family()
    for lab in pes:
        v = list(ok[lab].layer("ssdc_rpi").values())
        r = paired_t_interval(v)
        if r is not None:
            fam.add(lab, r[0], r[3], +1, f"SSDC_RPI {r[0]:+.3f} [{r[1]:+.3f}, {r[2]:+.3f}], {len(v)} seeds")
    out += ["- **PEs make spatial structure index-anchored: SSDC under RPI (last layer) stays above 0 with a PE** "
            "(one-sample t-test against 0 per PE):", *fam.lines()]
    fam = Family()
    if "none" in ok:
        v = list(ok["none"].layer("ssdc_rpi").values())
        t = tost_paired(v, MARGIN)
        if t is not None:
            fam.add("none", t.mean, t.p, 0, f"SSDC_RPI {t.mean:+.3f}, 90 % t-CI [{t.lo:+.3f}, {t.hi:+.3f}], "
                    f"TOST margin ±{MARGIN}, {len(v)} seeds")
    out += ["- **… and near 0 without one** (`none`: TOST equivalence to 0 within the margin):", *fam.lines()]
    # 2. RPT removes it
    drop, zero = Family(), Family()
    for lab in [x for x in ok if x.endswith("+rpt")]:
        base = ok.get(lab[: -len("+rpt")])
        if base is None:
            continue
        r = paired(ok[lab].layer("ssdc_rpi"), base.layer("ssdc_rpi"))
        if r is not None:
            drop.add(lab, r[0], r[3], -1, f"SSDC_RPI rpt − {base.label} {r[0]:+.3f} [{r[1]:+.3f}, {r[2]:+.3f}], "
                     f"{r[4]} seeds")
        v = list(ok[lab].layer("ssdc_rpi").values())
        t = tost_paired(v, MARGIN)
        if t is not None:
            zero.add(lab, t.mean, t.p, 0, f"SSDC_RPI {t.mean:+.3f}, 90 % t-CI [{t.lo:+.3f}, {t.hi:+.3f}], TOST ±{MARGIN}")
    out += ["- **RPT removes it: SSDC_RPI of `<pe>+rpt` below `<pe>`** (paired by seed, last layer):", *drop.lines(),
            "- **… down to 0** (`<pe>+rpt`: TOST equivalence to 0):", *zero.lines()]
    # 3. fragility tracks index anchoring under the alpha sweep (its FS is under the modality's first shift)
    fam, swept = Family(), set()
    for lab, c in ok.items():
        shifts = {p.get("shift") for sw in alpha_points(c).values() for p in sw} - {None}
        swept |= shifts
        for what, name in [("ssdc_rpi", "SSDC_RPI")] + [(s, f"FS {s}") for s in sorted(shifts)]:
            rhos = rho_per_seed(c, what)
            r = paired_t_interval(rhos)
            if r is not None:
                fam.add(f"{lab}, α vs {name}", r[0], r[3], +1,
                        f"mean per-seed ρ {r[0]:+.2f} [{r[1]:+.2f}, {r[2]:+.2f}], {len(rhos)} seeds")
    out += ["- **Fragility tracks index anchoring (α sweep): scaling the additive PE down lowers both SSDC_RPI and FS"
            + (f" under {', '.join(sorted(swept))}" if swept else "") + "** (per-seed Spearman ρ of α with each over "
            "the α grid, t-test of the ρs against 0; clean accuracy falls with α too, see the α table):", *fam.lines()]
    fam = Family()
    for shift in ("jpeg", "blur"):
        pts = [(mean(c.layer("ssdc_rpi")), mean(c.fs(shift))) for c in ok.values()]
        pts = [p for p in pts if math.isfinite(p[0]) and math.isfinite(p[1])]
        if len(pts) >= 4:
            res = stats.spearmanr([p[0] for p in pts], [p[1] for p in pts])
            fam.add(f"across PEs, {shift}", float(res.statistic), float(res.pvalue), +1,
                    f"Spearman ρ {res.statistic:+.2f} of mean SSDC_RPI with mean FS over {len(pts)} variants")
    out += ["- **… and across PEs: the more index-anchored, the more fragile** (variants incl. RPT, means over seeds):",
            *fam.lines()]
    # 4. RoPE is the least fragile
    for shift in ("jpeg", "blur"):
        fam = Family()
        if ROPE in ok:
            for lab in pes:
                if lab == ROPE:
                    continue
                r = paired(ok[lab].fs(shift), ok[ROPE].fs(shift))
                if r is not None:
                    fam.add(f"{lab} − {ROPE}", r[0], r[3], +1, f"FS {r[0]:+.3f} [{r[1]:+.3f}, {r[2]:+.3f}], {r[4]} seeds")
        out += [f"- **RoPE (`{ROPE}`) is the least fragile ({shift})**: every other PE's FS above RoPE's (paired by "
                f"seed); reproduced only if every line is:", *fam.lines()]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------ probes vs real data
def _spearman_axis(x, y, axis=-1):
    """Spearman's rho along ``axis`` (average ranks, as ``scipy.stats.spearmanr``): Pearson's r of the ranks."""
    rx, ry = stats.rankdata(x, axis=axis), stats.rankdata(y, axis=axis)
    rx, ry = rx - rx.mean(axis=axis, keepdims=True), ry - ry.mean(axis=axis, keepdims=True)
    return (rx * ry).sum(axis=axis) / np.sqrt((rx ** 2).sum(axis=axis) * (ry ** 2).sum(axis=axis))


def spearman_permutation_p(x, y, resamples: int = BOOT_RESAMPLES, seed: int = BOOT_SEED) -> float:
    """Two-sided permutation p-value of Spearman's rho: ``y`` re-paired with ``x`` in every order
    (``scipy.stats.permutation_test`` of the one sample ``y``, ``permutation_type="pairings"``; exact over all n!
    orders up to n = 7, else ``resamples`` seeded ones). With the handful of PEs compared here the t approximation
    that ``spearmanr`` reports is not valid (it gives p = 0 for a perfect rank order of 4)."""
    xa = np.asarray(x, dtype=float)
    res = stats.permutation_test((np.asarray(y, dtype=float),), lambda yp, axis: _spearman_axis(xa, yp, axis),
                                 vectorized=True, permutation_type="pairings", n_resamples=resamples,
                                 alternative="two-sided", random_state=np.random.default_rng(seed))
    return float(res.pvalue)


def bootstrap_spearman(x, y, resamples: int = BOOT_RESAMPLES, seed: int = BOOT_SEED, level: float = 0.95):
    """Percentile bootstrap interval of Spearman's rho over the paired points (resampled with replacement,
    ``numpy.random.default_rng(seed)``; average ranks as ``scipy.stats.spearmanr``; resamples in which either
    variable is constant have no rho and are dropped). -> (lo, hi, resamples kept)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(x), size=(resamples, len(x)))
    rx, ry = stats.rankdata(x[idx], axis=1), stats.rankdata(y[idx], axis=1)
    rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
    den = np.sqrt((rx ** 2).sum(axis=1) * (ry ** 2).sum(axis=1))
    keep = den > 0
    rho = (rx * ry).sum(axis=1)[keep] / den[keep]
    a = (1 - level) / 2
    lo, hi = np.quantile(rho, [a, 1 - a]) if rho.size else (float("nan"), float("nan"))
    return float(lo), float(hi), int(keep.sum())


def probe_outcomes(probes: str | Path) -> tuple[dict[str, dict[str, float]], list[str]]:
    """``{outcome: {pe: mean over seeds}}`` from ``<probes>/probe-*``: each probe's test accuracy, and
    probe-extrapolation's accuracy at 2x its training size; and the commits the probe runs were made at."""
    runs, _ = collect_results(probes)
    vals: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    commits = set()
    for r in runs:
        if not (r.complete and (r.dataset or "").startswith("probe-") and "+" not in r.label):
            continue
        commits.add((r.git_sha or "unknown")[:7])
        if r.metrics.get("test/acc1") is not None:
            vals[f"{r.dataset} test acc"][r.label].append(float(r.metrics["test/acc1"]))
        train = r.raw.get("config", {}).get("resolution") or 32
        for row in r.raw.get("extrapolation") or []:
            if row.get("acc1") is not None and row.get("resolution") == str(2 * int(train)):
                vals[f"{r.dataset} 2x acc"][r.label].append(float(row["acc1"]))
    return ({k: {pe: float(np.mean(v)) for pe, v in d.items()} for k, d in sorted(vals.items())}, sorted(commits))


def probe_correlations(probes: str | Path, cells: dict[str, Cell]) -> list[dict]:
    """Across the learned PEs both have: Spearman rho (scipy), its permutation p-value, its bootstrap 95 % interval
    over PEs,
    between each probe outcome and this study's mean test accuracy and mean accuracy at 2x the training size."""
    ok = {lab: c for lab, c in learned_cells(cells).items() if "+" not in lab}
    two_x = [k for k, f in sizes(cells) if f == "2x"]
    targets = {"test acc": {lab: mean(c.metric("test/acc1")) for lab, c in ok.items()}}
    if two_x:
        targets["2x acc"] = {lab: mean(c.extrapolation(two_x[0])) for lab, c in ok.items()}
    rows = []
    outcomes, _ = probe_outcomes(probes)
    for name, by_pe in outcomes.items():
        for tname, target in targets.items():
            pes = sorted(set(by_pe) & {k for k, v in target.items() if math.isfinite(v)}, key=pe_sort_key)
            x, y = [by_pe[p] for p in pes], [target[p] for p in pes]
            row = {"probe": name, "target": tname, "pes": pes, "rho": float("nan"), "p": float("nan"),
                   "lo": float("nan"), "hi": float("nan")}
            if len(pes) >= 4 and np.ptp(x) > 0 and np.ptp(y) > 0:
                lo, hi, _ = bootstrap_spearman(x, y)
                row.update(rho=float(stats.spearmanr(x, y).statistic), p=spearman_permutation_p(x, y), lo=lo, hi=hi)
            rows.append(row)
    return rows


def correlation_section(probes: str | Path, cells: dict[str, Cell]) -> str:
    if not Path(probes).is_dir():
        return f"No probe results at `{shown(Path(probes))}`: nothing to correlate."
    rows = probe_correlations(probes, cells)
    _, commits = probe_outcomes(probes)
    study = [lab for lab in cells if "+" not in lab]
    probed = set().union(*(r["pes"] for r in rows)) if rows else set()
    missing = [p for p in study if p not in probed]
    tested = [r for r in rows if math.isfinite(r["p"])]
    adj = dict(zip(map(id, tested), holm_adjust([r["p"] for r in tested]))) if tested else {}
    own = sorted({(r.git_sha or "unknown")[:7] for c in cells.values() for r in c.runs.values()})
    out = [f"Probe runs: `{shown(Path(probes))}/probe-*`, made at commit{'s' if len(commits) > 1 else ''} "
           + ", ".join(f"`{c}`" for c in commits) + f" (this study's runs: commit{'s' if len(own) > 1 else ''} "
           + ", ".join(f"`{c}`" for c in own) + "); the probe sweep "
           "lacks " + (", ".join(f"`{p}`" for p in missing) if missing else "none of this study's PEs")
           + (f", which {'is' if len(missing) == 1 else 'are'} left out of these correlations" if missing else "") + ". "
           f"Family: the {len(tested)} correlations with a value (Holm at {100 * FWER:.0f} %); a probe *predicts* a "
           "target when its Holm p is below 5 % and the bootstrap interval excludes 0.", "",
           "| probe outcome | Fashion-MNIST target | PEs | Spearman ρ | bootstrap 95 % CI | permutation p | Holm p | "
           "predicts |",
           "|---|---|---:|---:|---|---:|---:|---|"]
    for r in rows:
        pa = adj.get(id(r), float("nan"))
        yes = math.isfinite(pa) and pa < FWER and (r["lo"] > 0 or r["hi"] < 0)
        body = (f"{r['rho']:+.2f} | [{r['lo']:+.2f}, {r['hi']:+.2f}] | {pval(r['p'])} | {pval(pa)}"
                if math.isfinite(r["p"]) else "n/a | n/a | n/a | n/a")
        out.append(f"| {r['probe']} | {r['target']} | {len(r['pes'])} | {body} | {'**yes**' if yes else 'no'} |")
    predictors = sorted({f"{r['probe']} → {r['target']}" for r in tested
                         if adj[id(r)] < FWER and (r["lo"] > 0 or r["hi"] < 0)})
    out += ["", "**Which probes predict real behaviour:** " + (
        "; ".join(predictors) if predictors else
        "not computed: no probe outcome shares at least 4 learned PEs with this study." if not tested else
        "none, at this number of PEs and seeds (no correlation passes Holm at 5 % with a bootstrap interval "
        "that excludes 0).")]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------ protocol
def wall_minutes(time_file: Path) -> tuple[float, int] | None:
    """Total wall minutes over the study's start/end pairs (a resumed study has several) and the pair count."""
    if not time_file.is_file():
        return None
    total, start, pairs = 0.0, None, 0
    for line in time_file.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in ("start", "end"):
            t = datetime.datetime.fromisoformat(parts[1].replace("Z", "+00:00"))
            if parts[0] == "start":
                start = t
            elif start is not None:
                total, start, pairs = total + (t - start).total_seconds() / 60, None, pairs + 1
    return (total, pairs) if pairs else None


def protocol(cells: dict[str, Cell], results: Path) -> str:
    runs = [r for c in cells.values() for r in c.runs.values()]
    cfg = runs[0].raw.get("config", {})
    data = cfg.get("data") or {}
    commits = sorted({(r.git_sha or "unknown")[:7] for r in runs})
    seeds = sorted({r.seed for r in runs})
    opts = cfg.get("analysis_options") or {}
    wall = wall_minutes(results / "study_time.txt")
    return "\n".join([
        f"- **Runs:** {len(runs)} complete runs of {len(cells)} variants ("
        + ", ".join(f"`{lab}`" for lab in cells) + f"), seeds {', '.join(map(str, seeds))}; commit"
        + ("s " if len(commits) > 1 else " ") + ", ".join(f"`{c}`" for c in commits) + ".",
        "- **Wall time:** " + (f"{wall[0]:.1f} min on 2 workers of 1 thread each"
                               + (f" ({wall[1]} start/end pairs: the study was resumed)" if wall[1] > 1 else "")
                               if wall else "not recorded") + f" (`{shown(results / 'study_time.txt')}`).",
        f"- **Model and data:** `{cfg.get('model')}`, inputs resized to {cfg.get('resolution')} px (28 px images, "
        f"bilinear, antialiased), patch 4; training subset {data.get('train_per_class', 'all')} images per class, "
        f"validation hold-out {data.get('val_per_class', 500)} per class (both drawn with the split seed, the same "
        "for every run); test = the 10,000 t10k images.",
        f"- **Training:** {cfg.get('epochs')} epoch(s), batch {cfg.get('batch_size')}, AdamW lr {cfg.get('lr')} "
        f"(weight decay {cfg.get('weight_decay')}), {cfg.get('warmup_epochs')} epochs of linear warm-up then "
        f"{cfg.get('lr_schedule')}, validation every {cfg.get('val_every')} steps, the last step's weights tested"
        + (", `--deterministic`" if cfg.get("deterministic") else "") + ".",
        f"- **Analyses** (on the hold-out): extrapolation at {', '.join(k for k, _ in sizes(cells))} px with each "
        f"PE's own rule ({opts.get('extrapolation_samples', 128)} images per size); robustness, FS = 1 − A_shift / "
        f"A_clean under JPEG q5 and blur σ 2.5 ({opts.get('robustness_samples', 'all')} images; FS undefined where "
        "clean accuracy is within 2 SE of chance); geometry: SSDC and SSDC under RPI per layer at the attention "
        "inputs (`attn_in`: 0 = LN(embedding + PE)), K = 8 permutations, 256-image probe, null band from the "
        f"untrained twin; the α sweep for additive PEs ({opts.get('alpha_samples', 128)} images per α).",
    ])


def render(results: str | Path, probes: str | Path) -> str:
    results = Path(results)
    cells = load(results)
    if not cells:
        raise SystemExit(f"fashion_mnist_findings: no complete {DATASET} runs under {results}")
    with warnings.catch_warnings():  # a constant input has no rank correlation: reported as n/a
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        return fill(REPORT, protocol=protocol(cells, results), accuracy=accuracy_table(cells),
                    comparisons=comparisons(cells), extrapolation=extrapolation_table(cells),
                    fragility=fragility_table(cells), geometry=geometry_table(cells), alpha=alpha_table(cells),
                    claims=claims(cells), probes=correlation_section(probes, cells),
                    learned=f"{100 * LEARNED:.0f}", margin=f"{MARGIN}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results/embedded/fashion-mnist", help="the study's folder (with study_time.txt)")
    ap.add_argument("--report", metavar="FILE", help="write the report here instead of printing it")
    ap.add_argument("--probes", default="results/embedded", help="the probe sweep's folder (probe-*)")
    args = ap.parse_args(argv)
    emit(render(args.results, args.probes), args.report)
    return 0


#: results/embedded/fashion-mnist/REPORT.md; each @@NAME@@ is filled in by :func:`render`
REPORT = """\
# Study 1: Fashion-MNIST × every PE (`results/embedded/fashion-mnist`)

Written by `python -m benchmarks.fashion_mnist_findings --results results/embedded/fashion-mnist --report
results/embedded/fashion-mnist/REPORT.md` from the committed runs, which `bash benchmarks/fashion_mnist_study.sh` makes;
every number and verdict is computed from the result files (`tests/studies/test_fashion_mnist_findings.py`
regenerates this report byte for byte). Data: Fashion-MNIST (Xiao, Rasul and Vollgraf 2017, arXiv:1708.07747),
the Debian package `dataset-fashion-mnist`'s files. The analyses are defined in `docs/analyses.md`.

## Protocol

@@PROTOCOL@@

A seed *learned* when its test accuracy is at least @@LEARNED@@ % (chance is 10 %), a PE when every seed did;
nothing below is said about a PE that did not learn. Intervals are Student-t 95 % over seeds.

## Test accuracy

@@ACCURACY@@

## Paired differences in test accuracy, by seed

@@COMPARISONS@@

## Resolution extrapolation (hold-out accuracy at each input size, each PE's own rule)

@@EXTRAPOLATION@@

## Fragility under JPEG and blur

@@FRAGILITY@@

## SSDC and SSDC under RPI, per layer (means over seeds; layer 0 / layer 1 / …)

@@GEOMETRY@@

## α sweep of the additive PEs

@@ALPHA@@

## Verdicts on the seed claims

Each claim is one family of tests, Holm-adjusted at 5 % family-wise; "reproduced" needs the adjusted p below
5 % with the predicted sign, "contradicted" the other sign, otherwise "inconclusive". "Near 0" is the TOST
equivalence test with the margin ±@@MARGIN@@ (fixed before the runs existed). Claims read the last recorded layer,
with no selection over layers.

@@CLAIMS@@

## Do the probes predict real behaviour? (issue #44 item 8)

Across PEs (means over seeds), the rank correlation between each probe's outcome in the committed probe sweep
(its test accuracy; for probe-extrapolation also its accuracy at 2× its training size) and this study's test
accuracy and accuracy at 2× the training size; the p-value is a permutation test of the pairings (exact up to
7 PEs, else 10,000 seeded permutations), the interval a percentile bootstrap over PEs (10,000 resamples, seed 0).

@@PROBES@@
"""


if __name__ == "__main__":
    raise SystemExit(main())
