"""The probe sweep's data (benchmarks/probe_findings.py): which probes and PEs, their no-PE ceilings, the learned
rule, the PE groups each prediction is about, and :class:`Cell` (the runs of one probe x PE, per seed) with the
paired statistics the verdicts use."""
from __future__ import annotations

import copy
import math
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
from scipy import stats

from pebench.leaderboard import collect_results
from pebench.leaderboard.stats import paired_t_interval, t_mean_ci

from .reports import read_metrics

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
RELATIVE = ("rope-axial", "rope-mixed", "pape", "lookhere", "comrope", "string", "rpb", "rope-dinov3")
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
               "rpb", "rope-dinov3")
#: PEs without a designed decay, measured on probe-decay without a prediction (RoPE's long-range decay is weak
#: and not monotone; the learned rotations and CPE have none by design; FIRE's and the offset table's are learned,
#: not designed)
NO_DECAY = ("rope-axial", "rope-mixed", "liere", "comrope", "string", "cpe", "fire", "rpb", "rope-dinov3")
#: on the set probes (a scene is its glyph tokens at their coordinates: no canvas, no border, no zero padding for
#: CPE's convolution to see) every PE that declares itself relative is exactly relative: a test scene and its
#: shifted twin get the same float64 logits (tests/datamodules/test_probe_sets.py); rpb and rope-dinov3 need the grid
#: and do not apply. The distance-only PEs cannot represent these labels (a mirror image), nor can any relative PE
#: probe-set-anchoring's (a 4-row shift): pebench.analysis.probe_capacity says so per cell
SET_RELATIVE = tuple(pe for pe in RELATIVE if pe not in ("rpb", "rope-dinov3")) + ("cpe",)
#: not exactly relative on a set either (LieRE's generators do not commute): measured, no prediction
SET_MEASURED_ONLY = ("liere",)


def pct(x: float) -> str:
    return f"{100 * x:.1f}"


def mean_ci_text(values: list[float]) -> str:
    ci = t_mean_ci(values, bounds=(0.0, 1.0))  # accuracies
    return "—" if ci is None else f"[{pct(ci[0])}, {pct(ci[1])}]"


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
                f"{pct(self.threshold)} %; mean val {pct(self.mean('val'))} %)")

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


def paired_differences(a: Cell, b: Cell, which_a: str = "test", which_b: str = "test") -> list[float]:
    da, db = getattr(a, which_a), getattr(b, which_b)
    seeds = sorted(s for s in set(da) & set(db) if da[s] is not None and db[s] is not None)
    return [da[s] - db[s] for s in seeds]


def paired(a: Cell, b: Cell, which_a: str = "test", which_b: str = "test"):
    """Mean paired difference a - b, its Student-t interval and the paired t-test p (None below 2 seeds)."""
    r = paired_t_interval(paired_differences(a, b, which_a, which_b))
    return None if r is None else r[:4]


def t_p_value(d: list[float], null: float) -> float:
    """Two-sided one-sample t-test p of ``mean(d) = null`` (0 / 1 when the differences do not vary)."""
    x = np.asarray(d) - null
    if np.ptp(x) == 0.0:
        return 0.0 if x[0] != 0.0 else 1.0
    return float(stats.ttest_1samp(x, 0.0).pvalue)
