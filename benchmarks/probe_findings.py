"""Summarise a probe sweep (results/embedded/REPORT.md): accuracy per probe x PE and a verdict per prediction.

    python -m benchmarks.probe_findings --results results/embedded [--report results/embedded/REPORT.md]

For each probe: one row per PE with the learning rate it ran with, the number of seeds, the
in-distribution validation accuracy and how many seeds learned it (the precondition, decided per
seed: a PE counts as having learned a probe when at least 80 % of its seeds did, :data:`MIN_LEARNED`; one
that did not says nothing about the property), each seed's steps to learn when the runs validated
every few steps (``bench run --val-every``), the out-of-distribution test accuracy with its 95 %
Student-t interval over seeds, and the paired test - val difference (the cost of leaving the training
distribution); under the table, how the runs ended (target reached, gave up, budget). A cell whose label
the PE cannot represent by an exact symmetry (:func:`cannot_represent`) is reported so, not as "not
learned", and is left out of the learned counts. Verdicts about a PE are computed on the seeds that
learned the probe (post-selection, said beside each verdict with the seed count and the checkpoint). Then
each theoretical prediction with its verdict, computed here from the numbers (never typed in):
``held`` / ``contradicted`` / ``not testable`` (a precondition failed) / ``inconclusive``. Every test
with a p-value is one family, Holm-adjusted (benchmarks/verdicts.py), and a verdict other than
inconclusive needs its adjusted p < 0.05; "keeps" is a TOST equivalence test with the margin
:data:`KEEP_MARGIN`. Differences between PEs are paired by seed (the same seed gives both
runs the same data). The summary after the verdicts is generated from them and names the PEs behind
each one.

``--report`` writes the report (the tables and verdicts inside the prose of ``probe_report_parts.REPORT``,
with the recipe, commits, run count and wall time read from the runs and ``probe_sweep_time.txt``) instead
of printing the tables and verdicts.
"""
from __future__ import annotations

import argparse
import copy
import math
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
from scipy import stats

from pebench.leaderboard import collect_results
from pebench.leaderboard.render import pe_sort_key
from pebench.leaderboard.stats import paired_t_interval, t_mean_ci, tost_paired

from .probe_report_parts import REPORT, alibi_readout, learned_matrix, learning_png, not_learned_table, protocol
from .reports import fill, read_metrics, reproduced, shown, write_report
from .thread_spread import spread_sentence
from .verdicts import FWER, MIN_SEEDS, Family, basis, fmt_p, two_pass

#: the exact no-PE ceilings of the test splits (pebench.datamodules.probes; tests check the two agree)
CEILING = {"probe-translation": 0.25, "probe-rotation": 0.25, "probe-decay": 0.5, "probe-context": 1 / 3,
           "probe-extrapolation": 0.25, "probe-anchoring": 0.5,
           "probe-set-translation": 0.25, "probe-set-extrapolation": 0.25, "probe-set-anchoring": 0.5}
#: a PE "learned" a probe when its mean validation accuracy is at least this share of the way from the
#: no-PE ceiling to 100 % (first set as a flat 90 %; changed after the first probe's results, where it
#: called 86-87 %-val models on a 4-class task "not learned" - results/embedded/REPORT.md says so)
LEARNED_SHARE = 0.5
#: a PE learned a probe when at least this share of its seeds learned it (4 of 5; 3 of 3): the seeds that
#: did not stay out of its verdicts, and the count is printed beside every verdict (issue: "4 of 5 seeds")
MIN_LEARNED = 0.8
#: tolerance (accuracy points) of "keeps its accuracy" / "at chance"
TOL = 0.05
#: equivalence margin of "keeps its accuracy" (TOST of test − val inside ± this, issue #44): the 5-point
#: tolerance the sweep's verdicts used before any of its results were read, kept rather than tuned on them;
#: it is about twice the widest 95 % half-width of one test split's accuracy (1200 scenes: ±2.9 points), so
#: the split's own sampling noise cannot decide a verdict
KEEP_MARGIN = TOL
#: the test splits that are fresh scenes of the training distribution, not a shifted one
ID_TEST = ("probe-context", "probe-anchoring", "probe-set-anchoring")
#: what the canvas translation and extrapolation probes cannot test (issue #44): their background tokens fix the
#: canvas, so even an exactly relative PE sees where the glyphs sit against its border
CANVAS_CUE = ("the background tokens of the canvas are an absolute cue that an exactly relative PE also sees, so "
              "these verdicts measure transfer on this canvas, not exact relativity; the canvas-free "
              "`probe-set-*` probes test that")

#: the predictions' groups, each a subset of the PEs whose declarations (``relative``, ``rotation_invariant``,
#: ``distance_decay`` in pebench.encodings) say so; tests/studies/test_probe_study_scripts.py checks the two agree and
#: that every registered PE is in a group or in :data:`MEASURED_ONLY`
RELATIVE = ("rope-axial", "rope-mixed", "pape", "lookhere", "comrope", "string", "rpb")
ABSOLUTE = ("ape", "sincos")
DISTANCE_ONLY = ("alibi", "pape-ri", "fire")
#: PEs with a monotone distance decay of the attention logit (ALiBi's fixed slopes, LookHere's, PaPE's learned one)
DECAY = ("alibi", "lookhere", "pape", "pape-ri")
#: PEs measured without a prediction on the translation and extrapolation probes: LieRE is not exactly
#: relative (its generators do not commute), and CPE's convolution sees the zero padding at the canvas border,
#: an absolute cue (CPVT's argument), although translating its coordinates changes nothing
MEASURED_ONLY = ("liere", "cpe")
#: PEs whose logits read directions, measured on probe-rotation without a prediction
DIRECTIONAL = ("rope-axial", "rope-mixed", "pape", "lookhere", "sincos", "ape", "liere", "comrope", "string", "cpe",
               "rpb")
#: PEs without a designed decay, measured on probe-decay without a prediction (RoPE's long-range decay is weak
#: and not monotone; the learned rotations and CPE have none by design; FIRE's and the offset table's are learned,
#: not designed)
NO_DECAY = ("rope-axial", "rope-mixed", "liere", "comrope", "string", "cpe", "fire", "rpb")
#: on the set probes (a scene is its glyph tokens at their coordinates: no canvas, no border, no zero padding for
#: CPE's convolution to see) every PE that declares itself relative is exactly relative: a test scene and its
#: shifted twin get the same float64 logits (tests/datamodules/test_probe_sets.py); rpb needs the grid and does not
#: apply. The distance-only PEs cannot represent these labels (a mirror image), nor can any relative PE
#: probe-set-anchoring's (a 4-row shift): pebench.analysis.probe_capacity says so per cell
SET_RELATIVE = tuple(pe for pe in RELATIVE if pe != "rpb") + ("cpe",)
#: not exactly relative on a set either (LieRE's generators do not commute): measured, no prediction
SET_MEASURED_ONLY = ("liere",)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _ci(values: list[float]) -> str:
    ci = t_mean_ci(values, bounds=(0.0, 1.0))  # accuracies
    return "—" if ci is None else f"[{_pct(ci[0])}, {_pct(ci[1])}]"


class Cell:
    """The runs of one (probe, PE): per-seed val and test accuracy."""

    def __init__(self, runs, ceiling: float = 0.0, root: str | None = None) -> None:
        self.threshold = ceiling + LEARNED_SHARE * (1.0 - ceiling)
        self.val = {r.seed: r.metrics.get("val/acc1") for r in runs}
        self.test = {r.seed: r.metrics.get("test/acc1") for r in runs}
        #: the upsampled-scene accuracy per input size (probe-extrapolation's extrapolation analysis)
        self.upsampled = {r.seed: dict(r.extrapolation or {}) for r in runs}
        self.lr = sorted({r.raw.get("config", {}).get("lr") for r in runs})
        self.n = len(runs)
        #: per seed: the first validation step at or above the threshold (None: never), for runs that
        #: validated every few steps (``val_every``); absent for runs validated once per epoch
        self.steps_to_learn = {r.seed: _steps_to(Path(root) / r.path, self.threshold) for r in runs
                               if r.raw.get("config", {}).get("val_every") and root is not None}
        #: per seed: the optimizer steps trained (``--stop-at`` ends a run early), when recorded
        self.steps = {r.seed: (r.raw.get("stopped_at_target") or {}).get("global_step") for r in runs}
        #: per seed: how the run ended ("reached" the target, "gave up" on the plateau, trained the whole
        #: "budget"), None when it ran without a stop rule
        self.ends = {r.seed: _end(r.raw.get("stopped_at_target")) for r in runs}
        self.pe = runs[0].raw.get("pe") if runs else None
        ckpts = sorted({str(r.raw.get("config", {}).get("eval_checkpoint", "last")) for r in runs})
        #: the weights the test split read (``eval_checkpoint``): every verdict states it
        self.selection = {("best",): "best-val checkpoint", ("last",): "last-step weights"}.get(
            tuple(ckpts), "best-val / last-step weights")
        #: "cannot represent (<symmetry>)" when an exact symmetry of the PE puts the probe's label out of reach
        #: (:func:`cannot_represent`), set by :func:`load`; None when it can be represented
        self.cannot: str | None = None

    def replaced(self, **attrs) -> "Cell":
        """The same runs with some attributes replaced: another "learned" ``threshold`` (a probe half of
        whose label is out of reach), or another accuracy in the ``test`` slot (the upsampled scenes)."""
        c = copy.copy(self)
        c.__dict__.update(attrs)
        return c

    def at_size(self, size: str) -> dict[int, float]:
        """Per seed: the accuracy on the same scenes upsampled to ``size`` px (extrapolation analysis)."""
        return {s: v[size] for s, v in self.upsampled.items() if v.get(size) is not None}

    def mean(self, which: str) -> float:
        v = [x for x in getattr(self, which).values() if x is not None]
        return float(np.mean(v)) if v else float("nan")

    def values(self, which: str) -> list[float]:
        return [getattr(self, which)[s] for s in sorted(getattr(self, which)) if getattr(self, which)[s] is not None]

    @property
    def learned_seeds(self) -> int:
        """How many seeds reach the "learned" threshold on validation (decided per seed, not on the mean)."""
        return sum(1 for v in self.values("val") if v >= self.threshold)

    @property
    def learned(self) -> bool:
        """At least :data:`MIN_LEARNED` of the seeds learned the probe (decided per seed: a mean over a
        bimodal outcome would hide seeds at chance)."""
        return self.n > 0 and self.learned_seeds >= math.ceil(MIN_LEARNED * self.n - 1e-9)

    def learned_only(self) -> "Cell":
        """The same cell restricted to the seeds that learned the probe (what its verdicts read)."""
        keep = {s for s, v in self.val.items() if v is not None and v >= self.threshold}
        return self.replaced(val={s: v for s, v in self.val.items() if s in keep},
                             test={s: v for s, v in self.test.items() if s in keep},
                             upsampled={s: v for s, v in self.upsampled.items() if s in keep}, n=len(keep))

    def budget(self) -> str:
        """How the seeds that did not learn ended, from their recorded optimizer steps ("the other 2 gave up
        at step 200", "all 5 trained all 400 steps"); "" when no run recorded its steps."""
        missed = [s for s, v in self.val.items() if v is None or v < self.threshold]
        if not missed or all(self.steps.get(s) is None for s in missed):
            return ""
        how = Counter(_how_ended(self.ends.get(s), self.steps.get(s)) for s in missed)
        who = f"the other {len(missed)}" if len(missed) < self.n else f"all {len(missed)}"
        if len(how) == 1:
            return f"{who} {next(iter(how))}"
        return f"{who}: " + ", ".join(f"{k} {h}" for h, k in sorted(how.items()))

    def not_learned(self, name: str = "") -> str:
        """Why the precondition failed: the PE cannot represent the label, or the per-seed count, how the
        others ended and the threshold."""
        who = f"{name} " if name else ""
        if self.cannot:
            return f"{who}{self.cannot}; learned in {self.learned_seeds} of {self.n} seeds"
        ended = self.budget()
        return (f"{who}learned in {self.learned_seeds} of {self.n} seeds ({ended + '; ' if ended else ''}val ≥ "
                f"{_pct(self.threshold)} %; mean val {_pct(self.mean('val'))} %)")

    def median_steps_to_learn(self) -> str:
        """Median steps to learn over the seeds that learned ("—": none did; "n/m": validated per epoch only)."""
        v = [x for x in self.steps_to_learn.values() if x is not None]
        return "n/m" if not self.steps_to_learn else f"{np.median(v):.0f}" if v else "—"


def _how_ended(end: str | None, steps: int | None) -> str:
    """One not-learned seed's ending in words: "gave up at step 200", "trained all 400 steps"."""
    if steps is None:
        return "trained an unrecorded number of steps"
    return (f"gave up at step {steps}" if end == "gave up" else f"trained all {steps} steps" if end == "budget"
            else f"stopped at step {steps}")


def _end(stopped: dict | None) -> str | None:
    if not stopped:
        return None
    return "reached" if stopped.get("reached") else "gave up" if stopped.get("gave_up") else "budget"


def _steps_to(results_json: Path, threshold: float) -> int | None:
    """The first validation step logged during training whose val/acc1 is at least ``threshold`` (from the
    ``metrics.csv`` beside ``results_json``)."""
    curve, _ = read_metrics(results_json.parent)
    return next((step for step, v in curve if v >= threshold), None)


def cannot_represent(probe: str, pe: str) -> str | None:
    """"cannot represent (<symmetry>)" when PE ``pe`` cannot represent the label of ``probe`` by an exact
    symmetry, from its declarations and a float64 check of the untrained model
    (``pebench.analysis.probe_capacity.capacity``, issue #44 item 2); None when it can. Only the PEs such a
    symmetry could stop are checked (each check builds a model): those without learned parameters (the
    position-blind check) and those declaring a symmetry the probe lists; for any other PE ``capacity``
    finds no symmetry to apply."""
    from pebench.analysis.probe_capacity import BREAKERS, capacity
    from pebench.encodings.registry import get_pe_class

    cls = get_pe_class(pe)
    if probe not in BREAKERS or (cls.learned is not False
                                 and not any(getattr(cls, sym, False) for sym, _, _ in BREAKERS[probe])):
        return None
    c = capacity(probe, pe)
    return None if c.representable else c.reason.split(":", 1)[0]


def load(results: str) -> dict[str, dict[str, Cell]]:
    runs, _ = collect_results(results)
    by = defaultdict(lambda: defaultdict(list))
    for r in runs:
        if r.complete and r.dataset in CEILING:
            by[r.dataset][r.label].append(r)
    data = {d: {pe: Cell(rs, CEILING[d], root=results) for pe, rs in pes.items()} for d, pes in by.items()}
    for probe, cells in data.items():
        for c in cells.values():
            c.cannot = cannot_represent(probe, c.pe) if c.pe else None
    return data


def _differences(a: Cell, b: Cell, which_a: str = "test", which_b: str = "test") -> list[float]:
    da, db = getattr(a, which_a), getattr(b, which_b)
    seeds = sorted(s for s in set(da) & set(db) if da[s] is not None and db[s] is not None)
    return [da[s] - db[s] for s in seeds]


def paired(a: Cell, b: Cell, which_a: str = "test", which_b: str = "test"):
    """Mean paired difference a - b, its Student-t interval and the paired t-test p (None below 2 seeds)."""
    r = paired_t_interval(_differences(a, b, which_a, which_b))
    return None if r is None else r[:4]


def _t_p(d: list[float], null: float) -> float:
    """Two-sided one-sample t-test p of ``mean(d) = null`` (0 / 1 when the differences do not vary)."""
    x = np.asarray(d) - null
    if np.ptp(x) == 0.0:
        return 0.0 if x[0] != 0.0 else 1.0
    return float(stats.ttest_1samp(x, 0.0).pvalue)


def table(probe: str, cells: dict[str, Cell]) -> list[str]:
    """One row per PE over all its seeds; the steps-to-learn column only when the runs validated every few
    steps (the median over the seeds that learned; "—" when none did)."""
    curves = any(c.steps_to_learn for c in cells.values())
    split = "ID: fresh scenes" if probe in ID_TEST else "OOD"
    out = [f"#### `{probe}` (no-PE ceiling {_pct(CEILING[probe])} %)", "",
           "| PE | lr | n | val (ID) % | learned (seeds) | " + ("steps to learn (median) | " if curves else "")
           + f"test ({split}) % | test 95% t-CI | test − val [95% t-CI] |",
           "|---|---:|---:|---:|---:|" + ("---:|" if curves else "") + "---:|---:|---:|"]
    for pe in sorted(cells, key=pe_sort_key):
        c = cells[pe]
        g = paired(c, c, "test", "val")
        gap = "—" if g is None else f"{100 * g[0]:+.1f} [{100 * g[1]:+.1f}, {100 * g[2]:+.1f}]"
        lr = ", ".join(f"{x:g}" for x in c.lr if x is not None)
        steps = f"{c.median_steps_to_learn()} | " if curves else ""
        out.append(f"| {pe} | {lr} | {c.n} | {_pct(c.mean('val'))} | {c.learned_seeds}/{c.n} | {steps}"
                   f"{_pct(c.mean('test'))} | {_ci(c.values('test'))} | {gap} |")
    ended = _ended(cells)
    return out + ([""] + [ended] if ended else []) + [""]


def upsampled_table(cells: dict[str, Cell]) -> list[str]:
    """probe-extrapolation's second regime: the validation scenes upsampled (the glyphs grow with the
    canvas), accuracy per input size, mean over seeds with the 95 % Student-t interval."""
    sizes = sorted({k for c in cells.values() for v in c.upsampled.values() for k in v}, key=int)
    if not sizes:
        return []
    n = sorted({len(c.upsampled) for c in cells.values()})
    out = ["The same scenes upsampled (second regime: glyphs and distances grow with the canvas; each PE's "
           f"native rule for the larger grid; {', '.join(map(str, n))} seeds), accuracy % [95 % t-interval]:", "",
           "| PE | " + " | ".join(f"{s} px" for s in sizes) + " |", "|---|" + "---:|" * len(sizes)]
    for pe in sorted(cells, key=pe_sort_key):
        c = cells[pe]
        row = []
        for size in sizes:
            v = list(c.at_size(size).values())
            ci = t_mean_ci(v, bounds=(0.0, 1.0))
            row.append("—" if not v else f"{_pct(np.mean(v))}" + (f" [{_pct(ci[0])}, {_pct(ci[1])}]" if ci else ""))
        out.append(f"| {pe} | " + " | ".join(row) + " |")
    return out + [""]


def _keeps(c: Cell, fam: Family) -> str:
    """Verdict of "test accuracy stays within KEEP_MARGIN of val" for one PE, on the seeds that learned: the
    TOST equivalence test of test − val inside ± KEEP_MARGIN ("keeps it") or the t-test of test − val against
    −TOL ("loses it"); the estimate picks the direction, so the one-sided TOST p is doubled (a two-sided test),
    and the p that enters the family is that of the direction taken."""
    if c.cannot:
        return f"not testable ({c.not_learned()})"
    if not c.learned:
        return f"not testable ({c.not_learned()}: not learned)"
    c = c.learned_only()  # the seeds that did not learn say nothing about keeping what was learned
    d = _differences(c, c, "test", "val")
    ci = t_mean_ci(d)
    tost = tost_paired(d, KEEP_MARGIN, alpha=FWER)
    if ci is None or tost is None:
        return "not testable (one seed)"
    keeps = tost.mean > -TOL
    raw = min(1.0, 2.0 * tost.p) if keeps else _t_p(d, -TOL)
    adj = fam.p(raw)
    test = f"TOST inside ±{_pct(KEEP_MARGIN)}" if keeps else f"t-test against −{_pct(TOL)}"
    text = (f"(test − val {100 * tost.mean:+.1f}, t-CI [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}], {test}: "
            f"{fmt_p(raw, adj)}; {basis(c.n, c.selection, True)})")
    if adj < FWER:
        return f"keeps it {text}" if keeps else f"loses it {text}"
    return f"inconclusive {text}"


VERDICTS = ("held", "contradicted", "inconclusive", "not testable")


class Tally:
    """The verdicts of each prediction, by PE (or PE pair), in the order :func:`claims` computes them; the
    summary (:func:`summary`) is written from these, never from prose. ``family`` holds the report's tests
    (benchmarks/verdicts.py)."""

    def __init__(self, family: Family) -> None:
        self.claims: dict[str, dict[str, list[str]]] = {}
        self.family = family

    def add(self, claim: str, who: str, verdict: str) -> None:
        self.claims.setdefault(claim, {v: [] for v in VERDICTS})[verdict].append(who)

    def beats(self, claim: str, cells, a: str, b: str) -> str:
        """:func:`_beats` of ``a`` over ``b``, recorded under ``claim``."""
        text = _beats(cells, a, b, self.family)
        verdict = next((v for v in VERDICTS if text.startswith(f"**{v}**")), None)
        if verdict is not None:
            self.add(claim, f"{a} − {b}", verdict)
        return text


def _group_claim(cells, group, want: str | None, tally: Tally, claim: str = "") -> list[str]:
    """One line per PE: its transfer verdict against the prediction ``want`` ("keeps" / "loses"), or
    only the measurement when ``want`` is None (no prediction); verdicts are recorded in ``tally``."""
    lines = []
    for pe in group:
        if pe not in cells:
            lines.append(f"  - {pe}: not run")
            continue
        v = _keeps(cells[pe], tally.family)
        if want is None:
            lines.append(f"  - {pe}: {v}")
            continue
        verdict = ("held" if v.startswith(want) else "not testable" if v.startswith("not testable")
                   else "inconclusive" if v.startswith("inconclusive") else "contradicted")
        tally.add(claim, pe, verdict)
        lines.append(f"  - {pe}: **{verdict}** — {v}")
    return lines


def _t_against(c: Cell, bound: float, fam: Family, which: str, learned: bool) -> tuple[str, str] | None:
    """The two-sided t-test of ``which`` accuracy over all seeds against ``bound + TOL`` (Holm-adjusted in
    ``fam``): (its text, the side the mean lies on when adj < FWER: "below" / "above" / ""), None below 2
    seeds. ``learned`` adds the learned-seed count to the text."""
    v = c.values(which)
    ci = t_mean_ci(v)
    if ci is None:
        return None
    m = c.mean(which)
    raw = _t_p(v, bound + TOL)
    adj = fam.p(raw)
    text = (f"{which} {_pct(m)} %, t-CI [{_pct(ci[0])}, {_pct(ci[1])}], "
            + (f"learned in {c.learned_seeds} of {c.n} seeds, " if learned else "")
            + f"t-test against {_pct(bound + TOL)} %: {fmt_p(raw, adj)}; {basis(len(v), c.selection, False)}")
    side = "" if adj >= FWER else "below" if m < bound + TOL else "above" if m > bound + TOL else ""
    return text, side


def _at_most(c: Cell, bound: float, fam: Family, which: str = "test", chance: float = 0.25) -> str:
    """Verdict of "accuracy at most ``bound``" over all seeds; a model at ``chance`` satisfies it vacuously: not
    testable. held / contradicted: :func:`_t_against`, in the direction of the mean."""
    m = c.mean(which)
    if m <= chance + 0.02:
        return f"**not testable** ({which} {_pct(m)} %: at chance, nothing learned)"
    r = _t_against(c, bound, fam, which, learned=False)
    if r is None:
        return f"not testable (one seed; {which} {_pct(m)} %)"
    return f"**{ {'below': 'held', 'above': 'contradicted'}.get(r[1], 'inconclusive')}** ({r[0]})"


def _above(c: Cell, bound: float, fam: Family, which: str = "test") -> str:
    """Verdict of "accuracy above ``bound``" over all seeds (no post-selection): :func:`_t_against`, in the
    direction of the mean; not testable for a PE that cannot represent the label."""
    if c.cannot:
        return f"**not testable** ({c.not_learned()})"
    r = _t_against(c, bound, fam, which, learned=True)
    if r is None:
        return f"**not testable** (one seed; {which} {_pct(c.mean(which))} %)"
    return f"**{ {'above': 'held', 'below': 'contradicted'}.get(r[1], 'inconclusive')}** ({r[0]})"


def _beats(cells, a: str, b: str, fam: Family) -> str:
    if a not in cells or b not in cells:
        return "not run"
    ca, cb = cells[a], cells[b]
    for name, c in ((a, ca), (b, cb)):  # both must have learned: against a PE at chance the difference would
        if c.cannot or not c.learned:   # measure that it did not train, not the property
            return f"**not testable** ({c.not_learned(name)}" + ("" if c.cannot else ": not learned") + ")"
    ca, cb = ca.learned_only(), cb.learned_only()  # on the seeds where both learned the probe, paired by seed
    r = paired(ca, cb)
    if r is None:
        return "**not testable** (fewer than 2 paired seeds)"
    mean, lo, hi, raw = r
    adj = fam.p(raw)
    verdict = "held" if mean > 0 and adj < FWER else "contradicted" if mean < 0 and adj < FWER else "inconclusive"
    return (f"**{verdict}** (test {a} − {b} = {100 * mean:+.1f} points, paired t-CI [{100 * lo:+.1f}, "
            f"{100 * hi:+.1f}], paired t-test {fmt_p(raw, adj)}; "
            f"{basis(len(_differences(ca, cb)), ca.selection, True).replace('seeds that', 'seeds where both')})")


def claims(data: dict[str, dict[str, Cell]], tally: Tally) -> list[str]:
    """The predictions with their verdicts (markdown lines); each verdict is also recorded in ``tally``, each
    test in its family (run twice by :func:`findings`: benchmarks/verdicts.py)."""
    t = tally
    out = ["#### Predictions and verdicts", "", t.family.rule(), ""]
    if "probe-translation" in data:
        c = data["probe-translation"]
        out += ["- **Translation** (test: the glyph pair in the other half of the canvas; " + CANVAS_CUE
                + "). Relative PEs keep their accuracy:"] + _group_claim(c, RELATIVE, "keeps", t,
                                                      "Translation: relative PEs keep their accuracy")
        out += ["  Absolute PEs lose it:"] + _group_claim(c, ABSOLUTE, "loses", t, "Translation: absolute PEs lose it")
        out += ["  Not exactly relative or with an absolute cue (measured, no prediction):"] + _group_claim(
            c, MEASURED_ONLY, None, t)
        out += ["  Relative PEs beat the absolute sincos off the training region (test, paired by seed):"]
        out += [f"  - {pe} − sincos: {t.beats('Translation: relative PEs beat sincos', c, pe, 'sincos')}"
                for pe in RELATIVE]
    if "probe-rotation" in data:
        c = data["probe-rotation"]
        out += ["- **Rotation** (label = distance bin + direction bit; test: scenes turned to 27°–63°). A PE that "
                "sees only Euclidean distances cannot read the direction bit: at most 50 % on val and test:"]
        for pe in DISTANCE_ONLY:
            if pe in c:
                val, test = _at_most(c[pe], 0.5, t.family, 'val'), _at_most(c[pe], 0.5, t.family)
                for which, text in (("val", val), ("test", test)):
                    t.add("Rotation: distance-only PEs stay at most at 50 %", f"{pe} ({which})",
                          next(v for v in VERDICTS if text.startswith(f"**{v}**") or text.startswith(v)))
                out.append(f"  - {pe}: val {val}; test {test}")
        out += ["  ... and, being invariant to rotations, keeps what it learned (the distance bit: learned = val "
                "halfway from 25 % to its 50 % bound) on the rotated scenes:"]
        out += _group_claim({pe: c[pe].replaced(threshold=0.375, cannot=None) for pe in DISTANCE_ONLY if pe in c}, DISTANCE_ONLY,
                            "keeps", t, "Rotation: distance-only PEs keep what they learned on rotated scenes")
        out += ["  Directional PEs (measured, no prediction):"] + _group_claim(c, DIRECTIONAL, None, t)
    if "probe-decay" in data:
        c = data["probe-decay"]
        out += ["- **Distance decay** (test: the nearest glyph at 3–4.5 cells instead of 1–2.3). PEs whose "
                "attention decays with distance (a fixed or learned monotone bias) rank neighbours by distance "
                "at any distance, so they keep the nearest-neighbour rule at unseen distances:"]
        out += _group_claim(c, DECAY, "keeps", t, "Distance decay: monotone-decay PEs keep the rule at unseen distances")
        out += ["  Absolute PEs have no notion of distance to extrapolate and lose it:"] + _group_claim(
            c, ABSOLUTE, "loses", t, "Distance decay: absolute PEs lose the rule")
        out += ["  PEs without a designed decay (measured, no prediction; RoPE's long-range decay is weak and not "
                "monotone):"] + _group_claim(c, NO_DECAY, None, t)
    if "probe-context" in data:
        c = data["probe-context"]
        out += [f"- **Context-dependent decay** (PaPE's motivation): PaPE beats RoPE-axial on probe-context: "
                f"{t.beats('Context: PaPE beats RoPE-axial and ALiBi', c, 'pape', 'rope-axial')}; PaPE beats ALiBi "
                f"(a fixed decay): {t.beats('Context: PaPE beats RoPE-axial and ALiBi', c, 'pape', 'alibi')}"]
    if "probe-extrapolation" in data:
        c = data["probe-extrapolation"]
        out += ["- **Extrapolation** (test: a 12 × 12 canvas at the training glyph scale; " + CANVAS_CUE
                + "). Relative PEs keep their accuracy:"] + _group_claim(c, RELATIVE, "keeps", t,
                                                      "Extrapolation: relative PEs keep their accuracy")
        out += ["  Absolute PEs lose it:"] + _group_claim(c, ABSOLUTE, "loses", t, "Extrapolation: absolute PEs lose it")
        out += ["  Not exactly relative or with an absolute cue (measured, no prediction):"] + _group_claim(
            c, MEASURED_ONLY, None, t)
        out += ["  Relative PEs beat the absolute sincos on the larger canvas (test, paired by seed):"]
        out += [f"  - {pe} − sincos: {t.beats('Extrapolation: relative PEs beat sincos', c, pe, 'sincos')}"
                for pe in RELATIVE]
        out += [f"  PaPE extrapolates better than RoPE-axial (the PaPE paper's claim), larger canvas (test): "
                f"{t.beats('Extrapolation: PaPE beats RoPE-axial (larger canvas)', c, 'pape', 'rope-axial')}"]
        sizes = sorted({k for cell in c.values() for v in cell.upsampled.values() for k in v}, key=int)
        if len(sizes) > 1 and "pape" in c and "rope-axial" in c:
            big = sizes[-1]
            up = {pe: c[pe].replaced(test=c[pe].at_size(big)) for pe in ("pape", "rope-axial")}
            at = up["pape"].mean("test")
            verdict = (f"**not testable** (PaPE at {_pct(at)} % on the upsampled scenes: at chance, "
                       f"{_pct(CEILING['probe-extrapolation'])} % + {_pct(TOL)})"
                       if at <= CEILING["probe-extrapolation"] + TOL else _beats(up, "pape", "rope-axial", t.family))
            t.add(f"Extrapolation: PaPE beats RoPE-axial (upsampled to {big} px)", "pape − rope-axial",
                  next(v for v in VERDICTS if verdict.startswith(f"**{v}**")))
            out += [f"  ... and on the same scenes upsampled to {big} px: {verdict}"]
    if "probe-anchoring" in data:
        c = data["probe-anchoring"]
        out += [f"- **Index anchoring** (content gives 50 %, absolute position the rest): an absolute PE "
                f"beats RoPE-axial: {t.beats('Anchoring: sincos beats RoPE-axial', c, 'sincos', 'rope-axial')}"]
    return out + set_claims(data, t) + [""]


def set_claims(data: dict[str, dict[str, Cell]], t: Tally) -> list[str]:
    """The set probes' predictions (issue #44 item 1): without a canvas an exactly relative PE cannot tell a scene
    from its shifted twin, so relative PEs keep their accuracy and absolute PEs may not; probe-set-anchoring is
    the positive control, which needs absolute position."""
    out = []
    for probe, name, test in (
            ("probe-set-translation", "Translation on a set", "the twin of a training-distribution scene, every "
             "coordinate shifted 4 columns right"),
            ("probe-set-extrapolation", "Extrapolation on a set", "the twin shifted so that a glyph leaves the "
             "8 × 8 training box (inside 12 × 12)")):
        if probe not in data:
            continue
        c = data[probe]
        out += [f"- **{name}** (`{probe}`; test: {test}; no canvas: a relative PE gives a scene and its twin the "
                "same logits, checked in float64 by `tests/datamodules/test_probe_sets.py`, so for them the verdict "
                "checks the trained runs against that guarantee; the distance-only PEs cannot represent the "
                "direction). Relative PEs keep their accuracy:"]
        out += _group_claim(c, SET_RELATIVE, "keeps", t, f"{name}: relative PEs keep their accuracy")
        out += ["  Absolute PEs lose it:"] + _group_claim(c, ABSOLUTE, "loses", t, f"{name}: absolute PEs lose it")
        out += ["  Not exactly relative (measured, no prediction):"] + _group_claim(c, SET_MEASURED_ONLY, None, t)
        dist = [pe for pe in DISTANCE_ONLY if pe in c]
        out += (["  Distance-only (no prediction):"] if dist else []) + [
            f"  - {pe}: {c[pe].not_learned()}" if c[pe].cannot else f"  - {pe}: {_keeps(c[pe], t.family)}"
            for pe in dist]
    if "probe-set-anchoring" in data:
        c = data["probe-set-anchoring"]
        claim = "Anchoring on a set (positive control): absolute PEs beat the 50 % content ceiling"
        out += ["- **Index anchoring on a set** (`probe-set-anchoring`, the positive control: content gives 50 %, "
                "the marker's row the rest; a 4-row shift keeps a relative PE's logits and changes the label, so "
                "every relative PE cannot represent it). Absolute PEs learn what relative PEs cannot, test "
                "accuracy above 50 % (over all seeds):"]
        for pe in ABSOLUTE + SET_MEASURED_ONLY:
            if pe not in c:
                continue
            v = _above(c[pe], 0.5, t.family)
            if pe in ABSOLUTE:
                t.add(claim, pe, next(w for w in VERDICTS if v.startswith(f"**{w}**")))
                out.append(f"  - {pe}: {v}")
            else:  # a measurement without a prediction: no verdict word
                out.append(f"  - {pe} (not exactly relative; measured, no prediction): {v.split('** ', 1)[-1]}")
        cannot = [pe for pe in sorted(c, key=pe_sort_key) if c[pe].cannot]
        if cannot:
            out += ["  Cannot represent it (an exact symmetry; their test accuracy, all seeds, for the record): "
                    + "; ".join(f"{pe} {_pct(c[pe].mean('test'))} %" for pe in cannot) + "."]
    return out


def summary(tally: Tally, seeds: list[int]) -> list[str]:
    """One line per prediction: which PEs (or pairs) each verdict holds for, generated from ``tally``."""
    out = ["#### Summary of the verdicts", "",
           "Generated from the verdicts above (nothing here is typed in); a PE under *not testable* cannot "
           "represent the probe's label, did not learn the probe in at least 80 % of its seeds, or sits at chance, and "
           "the report says nothing else about it.", ""]
    for claim, by in tally.claims.items():
        parts = [f"{v} for {', '.join(by[v])}" for v in VERDICTS if by[v]]
        out.append(f"- {claim}: " + "; ".join(parts) + ".")
    if seeds and min(seeds) < MIN_SEEDS:
        which = "Every verdict above is" if max(seeds) < MIN_SEEDS else "The verdicts that say so are"
        out += ["", f"{which} provisional under the ≥ {MIN_SEEDS}-seed rule: the sweep ran "
                f"{' / '.join(map(str, seeds))} seeds per cell, which its CPU budget allowed."]
    return out + [""]


def probes_learned(data: dict[str, dict[str, Cell]]) -> dict[str, tuple[int, int]]:
    """PE -> (probes it learned in at least 80 % of its seeds, probes it ran whose label it can represent): the
    "probes learned" column; a cell the PE cannot represent (``Cell.cannot``) counts in neither."""
    out: dict[str, tuple[int, int]] = {}
    for cells in data.values():
        for pe, c in cells.items():
            if c.cannot:
                out.setdefault(pe, (0, 0))
                continue
            k, n = out.get(pe, (0, 0))
            out[pe] = (k + c.learned, n + 1)
    return out


def _claims_pass(data: dict[str, dict[str, Cell]], fam: Family) -> tuple[Tally, list[str]]:
    t = Tally(fam)
    return t, claims(data, t)


def findings(data: dict[str, dict[str, Cell]]) -> list[str]:
    """The tables of every probe in ``data`` (:func:`load`) and the verdicts (markdown lines)."""
    lines = []
    for probe in CEILING:
        if probe in data:
            lines += table(probe, data[probe])
            if probe == "probe-extrapolation":
                lines += upsampled_table(data[probe])
    (tally, verdicts), _ = two_pass("every test of this report", lambda fam: _claims_pass(data, fam))
    lines += verdicts
    ordered = {p: data[p] for p in CEILING if p in data}
    probes = [p for p in CEILING if p in ordered]
    return (learned_matrix(ordered, probes, probes_learned({p: ordered[p] for p in probes})) + lines
            + summary(tally, sorted({c.n for cells in ordered.values() for c in cells.values()}))
            + not_learned_table(ordered))


def _ended(cells: dict[str, Cell]) -> str:
    """How the probe's runs ended (``stopped_at_target`` in results.json): target reached, gave up, budget."""
    ends = [e for c in cells.values() for e in c.ends.values()]
    if not any(ends):
        return ""
    n = {k: sum(e == k for e in ends) for k in ("reached", "gave up", "budget")}
    return (f"Runs: {len(ends)}; reached the target {n['reached']}, gave up on the plateau {n['gave up']}, "
            f"trained the whole budget {n['budget']}.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results/embedded")
    ap.add_argument("--time-file", default=None, help="the sweep's start/end times (default: "
                    "probe_sweep_time.txt beside the results folder)")
    ap.add_argument("--report", metavar="FILE", help="write the sweep's report (results/embedded/REPORT.md) to FILE "
                    "instead of printing")
    ap.add_argument("--png", metavar="FILE", help="also draw each PE's share of seeds learned against the step, per "
                    "probe (results/embedded/probe_learning.png)")
    args = ap.parse_args(argv)
    data = load(args.results)  # read once: the tables, the verdicts and the figure share it
    lines = findings(data)
    if args.png:
        learning_png({p: data[p] for p in CEILING if p in data}, args.png, MIN_LEARNED)
    if args.report:
        time_file = Path(args.time_file) if args.time_file else Path(args.results).resolve().parent / \
            "probe_sweep_time.txt"
        alibi = Path(args.results).resolve().parent / "alibi-study" / "diagnosis.json"
        rerun = reproduced(Path(args.results).resolve().parent / "rerun_check.json", shown(Path(args.results)),
                           [p for p in CEILING if p in data])
        spread = Path(args.results).resolve().parent / "thread-spread" / "reruns.json"
        rerun += " " + spread_sentence(spread, Path(args.results).resolve().parent.parent)
        write_report(args.report, fill(REPORT, findings="\n".join(lines), alibi=alibi_readout(alibi), reproduced=rerun,
                                       **protocol(args.results, time_file, CEILING)))
        return 0
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
