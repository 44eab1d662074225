"""Claims to verdicts: every number through :mod:`pebench.leaderboard.stats`, every family through Holm.

Each claim of a study file names its test (:data:`pebench.studies.spec.TESTS`). The independent unit is the
seed: a paired claim pairs the two cells' runs by seed (seeds present in both), a mean claim reads one cell's
seeds, a correlation claim reads one mean per PE (the PEs present). The verdict words:

* ``paired`` / ``mean`` / ``correlation``: *held* when the Holm-adjusted p of its family is below
  :data:`ALPHA` and the estimate lies on the predicted side (``direction``), *contradicted* when it is below and
  on the other side, *inconclusive* otherwise;
* ``equivalence``: *equivalent* when the TOST p (Holm-adjusted) is below :data:`ALPHA`, else *not shown
  equivalent* (never "held" from a non-significant difference);
* a test that cannot be made (fewer than two units, zero variance) is *no test* with its reason, and does not
  enter its family; a claim that reads a cell that did not learn (the study's ``learned`` rule) is *not
  testable*: nothing is said about a PE that did not learn; ``not-informative`` claims (a bound the design guarantees) are reported as *not informative*
  with the reason the study file gives, and never tested.

A verdict on fewer than :data:`MIN_SEEDS` seeds per cell is marked provisional; a claim that reads a cell whose
runs did not all plateau says that it compares learning at the steps trained, not converged models.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from pebench.leaderboard.stats import (
    TestResult,
    equivalence_test,
    holm,
    mean_test,
    paired_test,
    spearman_test,
)
from pebench.studies.cells import Cell, plateau_gain
from pebench.studies.spec import Claim, LearnedRule, Reference, Study

__all__ = ["ALPHA", "MIN_SEEDS", "Verdict", "evaluate", "cell_plateaued", "not_learned", "cannot_represent"]

#: family-wise error rate of every family (Holm-Bonferroni)
ALPHA = 0.05
#: seeds per cell below which a verdict is provisional (the project's rule for cells that enter a verdict)
MIN_SEEDS = 10


@dataclass
class Verdict:
    claim: Claim
    word: str                       # held | contradicted | inconclusive | equivalent | not shown equivalent | no test | not informative | not testable | not run
    result: TestResult | None
    p_holm: float | None = None
    seeds: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()


def cell_plateaued(cell: Cell, band: float | None) -> bool | None:
    """Whether every complete run of ``cell`` plateaued (gain over the last fifth <= ``band``) or stopped at its
    target (``--stop-at``: trained until it reached it); ``None`` when the study states no band or a run's curve
    cannot tell."""
    if band is None or not cell.runs:
        return None
    gains = [None if r.stop == "reached" else plateau_gain(r.curve) for r in cell.runs]
    if any(g is None and r.stop != "reached" for r, g in zip(cell.runs, gains)):
        return None
    return all(g <= band for g in gains if g is not None)


def _cell(cells: dict[tuple[str, str, str], Cell], study: Study, claim: Claim, pe: str, arm: str | None,
          dataset: str | None = None) -> Cell:
    arm_name = arm or claim.arm or study.arms[0].name
    return cells[(arm_name, str(dataset or claim.dataset), pe)]


def metric_bounds(metric: str | None) -> tuple[float, float] | None:
    """The range a claim's metric cannot leave, to clip its interval: a rank correlation's [-1, 1]."""
    return (-1.0, 1.0) if metric is not None and metric.startswith("alpha-rho:") else None


def _rule(study: Study, claim: Claim) -> LearnedRule | None:
    """The learned rule a claim reads: its own threshold (``learned_above``) on the study's metric, or the study's."""
    rule = study.learned
    if rule is not None and claim.learned_above is not None:
        return LearnedRule(metric=rule.metric, share=rule.share, above=claim.learned_above)
    return rule


def _learned_values(study: Study, claim: Claim, cell: Cell, metric: str) -> dict[int, float]:
    """The cell's values of ``metric``; with ``learned_seeds``, only on the seeds that learned (post-selection)."""
    values = cell.values(metric)
    rule = _rule(study, claim)
    if not claim.learned_seeds or rule is None:
        return values
    keep = set(cell.learned_seeds(rule))
    return {s: v for s, v in values.items() if s in keep}


def _test(study: Study, claim: Claim, cells: dict[tuple[str, str, str], Cell]
          ) -> tuple[TestResult | None, tuple[int, ...], list[Cell]]:
    """The claim's test result, the seeds (or PE count) it used and the cells it read."""
    if claim.test == "not-informative":
        return None, (), []
    if claim.test == "equivalence" and claim.b is None:  # one cell's values against null, inside +-margin
        assert claim.a is not None and claim.metric is not None and claim.margin is not None
        ca = _cell(cells, study, claim, claim.a.pe, claim.a.arm, claim.a.dataset)
        va = _learned_values(study, claim, ca, claim.metric)
        seeds = tuple(sorted(va))
        null = claim.null or 0.0
        return equivalence_test([va[s] - null for s in seeds], claim.margin, alpha=ALPHA), seeds, [ca]
    if claim.test in ("paired", "equivalence"):
        assert claim.a is not None and claim.b is not None and claim.metric is not None
        ca = _cell(cells, study, claim, claim.a.pe, claim.a.arm, claim.a.dataset)
        cb = _cell(cells, study, claim, claim.b.pe, claim.b.arm, claim.b.dataset)
        va = _learned_values(study, claim, ca, claim.metric)
        vb = (cb.values(claim.b_metric or claim.metric) if claim.control
              else _learned_values(study, claim, cb, claim.b_metric or claim.metric))
        seeds = tuple(sorted(set(va) & set(vb)))
        a, b = [va[s] for s in seeds], [vb[s] for s in seeds]
        if claim.test == "paired":
            if claim.null is not None:  # the mean difference against a stated shift (e.g. "loses more than 5 points")
                return mean_test([x - y for x, y in zip(a, b)], null=claim.null), seeds, [ca, cb]
            return paired_test(a, b), seeds, [ca, cb]
        assert claim.margin is not None
        return equivalence_test([x - y for x, y in zip(a, b)], claim.margin, alpha=ALPHA), seeds, [ca, cb]
    if claim.test == "mean":
        assert claim.a is not None and claim.metric is not None
        ca = _cell(cells, study, claim, claim.a.pe, claim.a.arm, claim.a.dataset)
        va = _learned_values(study, claim, ca, claim.metric)
        seeds = tuple(sorted(va))
        return mean_test([va[s] for s in seeds], null=claim.null or 0.0, bounds=metric_bounds(claim.metric)), seeds, [ca]
    # correlation across PEs: one mean per PE on each side (a side "NAME:DATASET:METRIC" reads a reference's cells),
    # the PEs with both values (and, with learned_only, whose cells learned on both sides)
    xs, ys, used = [], [], []
    for pe in study.pes:
        (cx, mx, rx), (cy, my, ry) = (_side(study, claim, cells, str(side), pe) for side in (claim.x, claim.y))
        vx, vy = cx.values(mx), cy.values(my)
        if claim.learned_seeds:  # each side's mean over the seeds that learned (by that side's rule)
            for cell, ref, vals in ((cx, rx, vx), (cy, ry, vy)):
                rule = ref.learned if ref is not None else study.learned
                if rule is not None:
                    keep = set(cell.learned_seeds(rule))
                    for seed in [s for s in vals if s not in keep]:
                        del vals[seed]
        if not (vx and vy):
            continue
        if claim.learned_only and not (_learned(study, cx, rx) and _learned(study, cy, ry)):
            continue
        xs.append(math.fsum(vx.values()) / len(vx))
        ys.append(math.fsum(vy.values()) / len(vy))
        used.append(cy if cy.arm in {a.name for a in study.arms} else cx)
    return spearman_test(xs, ys), (), used


def _side(study: Study, claim: Claim, cells: dict[tuple[str, str, str], Cell], side: str, pe: str
          ) -> tuple[Cell, str, Reference | None]:
    """(cell, metric, reference) of one side of a correlation claim for ``pe``."""
    refs = {r.name: r for r in study.references}
    name, _, rest = side.partition(":")
    if name in refs and rest.count(":") >= 1:
        dataset, metric = rest.split(":", 1)
        return cells.get((f"ref:{name}", dataset, pe), Cell(f"ref:{name}", dataset, pe)), metric, refs[name]
    return _cell(cells, study, claim, pe, None), side, None


def _learned(study: Study, cell: Cell, ref: Reference | None) -> bool:
    """Whether ``cell`` learned by its own rule: the reference's, or the study's (no rule: it counts as learned)."""
    if ref is not None:
        return ref.learned is None or cell.learned_by(ref.learned)
    return not not_learned(study, [cell])


def not_learned(study: Study, cells: Sequence[Cell], claim: Claim | None = None) -> list[Cell]:
    """The cells among ``cells`` that did not learn by the study's ``learned`` rule (or the claim's own threshold;
    none without a rule)."""
    rule = study.learned if claim is None else _rule(study, claim)
    if rule is None or claim is not None and claim.tests_learning:
        return []
    return [c for c in cells if c.runs and not c.learned_by(rule)]


def cannot_represent(study: Study, cells: Sequence[Cell], claim: Claim | None = None) -> list[tuple[Cell, str]]:
    """The cells among ``cells`` whose PE cannot represent the dataset's label (the study's ``capacity``), with the
    symmetry; none for a claim with its own threshold (a claim about the part of the label the PE can represent)."""
    if claim is not None and claim.learned_above is not None:
        return []
    out = []
    for c in cells:
        sym = study.cannot(c.dataset, c.pe) if not c.arm.startswith("ref:") else None
        if sym is not None:
            out.append((c, sym))
    return out


def _word(claim: Claim, result: TestResult | None, p_holm: float | None) -> str:
    if claim.test == "not-informative":
        return "not informative"
    if result is None:
        return "not testable"
    if p_holm is None:
        return "no test"
    if claim.test == "equivalence":
        return "equivalent" if p_holm < ALPHA else "not shown equivalent"
    if p_holm >= ALPHA:
        return "inconclusive"
    shift = result.estimate - (claim.null or 0.0) if claim.test in ("paired", "mean") else result.estimate
    predicted = shift > 0 if claim.direction == "greater" else shift < 0
    return "held" if predicted else "contradicted"


def evaluate(study: Study, cells: dict[tuple[str, str, str], Cell]) -> list[Verdict]:
    """Every claim of ``study`` on ``cells``, in the file's order, with Holm within each family."""
    raw = []
    for claim in study.claims:
        result, seeds, used = _test(study, claim, cells)
        used = list({id(c): c for c in used}.values())  # a claim may compare one cell with itself (test - val)
        judged = used[:1] if claim.control else used  # a control cell (b) is read, not judged by the learned rule
        if claim.test != "correlation" and [c for c in used if not c.runs]:
            result = None  # a cell of the grid that has no complete run yet: not run, out of the family
        elif claim.test != "correlation" and (not_learned(study, judged, claim) or cannot_represent(study, judged, claim)):
            result = None  # nothing is said about a PE that did not learn: no test, out of the family
        raw.append((claim, result, seeds, used))
    adjusted: dict[str, float | None] = {}
    for family in study.families:
        members = [(c.id, r) for c, r, _, _ in raw if c.family == family and c.test != "not-informative"]
        ps = holm([r.p if r is not None else None for _, r in members])
        adjusted.update({cid: p for (cid, _), p in zip(members, ps)})
    out = []
    for claim, result, seeds, used in raw:
        notes = []
        judged = used[:1] if claim.control else used
        unrun = [c for c in used if not c.runs] if claim.test != "correlation" else []
        if unrun:
            notes.append("not run: " + ", ".join(f"{c.pe} has no complete run on `{c.dataset}`" for c in unrun))
        out_of_reach = cannot_represent(study, judged, claim) if claim.test != "correlation" else []
        if out_of_reach:
            notes.append("not testable: " + ", ".join(f"{c.pe} cannot represent the label ({sym})"
                                                      for c, sym in out_of_reach))
        dull = [c for c in not_learned(study, judged, claim) if c not in [x for x, _ in out_of_reach]] \
            if claim.test != "correlation" else []
        rule = _rule(study, claim)
        if dull and rule is not None:
            several = len({c.dataset for c in used}) > 1  # name the dataset where a claim reads two
            name = {id(c): f"{c.pe} on `{c.dataset}`" if several else c.pe for c in dull}
            notes.append(f"not testable: {', '.join(name[id(c)] for c in dull)} did not learn ({rule.describe()} "
                         "fails: " + "; ".join(f"{name[id(c)]} learned in {len(c.learned_seeds(rule))} of "
                                               f"{len(c.runs)} seeds"
                                     for c in dull) + ")")
        if result is not None and claim.learned_seeds and seeds:
            notes.append("only the seeds that learned (post-selection)")
        if result is not None and claim.learned_seeds and claim.test == "correlation":
            notes.append("each PE's means over its seeds that learned (post-selection)")
        if result is not None and not result.tested and result.reason:
            notes.append(result.reason)
        if claim.test != "correlation" and used and seeds and len(seeds) < MIN_SEEDS:
            notes.append(f"provisional: {len(seeds)} seeds, fewer than {MIN_SEEDS}")
        not_plateaued = [f"{c.pe}" + (f" ({c.arm})" if len(study.arms) > 1 else "") for c in used
                         if cell_plateaued(c, study.plateau_band) is False]
        if not_plateaued:
            notes.append(f"not plateaued: {', '.join(not_plateaued)} (a comparison of learning at the steps "
                         f"trained, not of converged models)")
        p_holm = adjusted.get(claim.id)
        word = "not run" if unrun else _word(claim, result, p_holm)
        out.append(Verdict(claim=claim, word=word, result=result, p_holm=p_holm,
                           seeds=seeds, notes=tuple(notes)))
    return out
