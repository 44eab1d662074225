"""The verdicts of the probe sweep's report (benchmarks/probe_findings.py): each theoretical prediction tested on
the cells of :mod:`.probe_cells`, in one Holm family (:class:`~.verdicts.Family`), counted in a :class:`Tally`."""
from __future__ import annotations

from pebench.leaderboard.render import pe_sort_key
from pebench.leaderboard.stats import t_mean_ci, tost_paired

from .probe_cells import (
    ABSOLUTE,
    CANVAS_CUE,
    CEILING,
    DECAY,
    DIRECTIONAL,
    DISTANCE_ONLY,
    KEEP_MARGIN,
    MEASURED_ONLY,
    NO_DECAY,
    RELATIVE,
    SET_MEASURED_ONLY,
    SET_RELATIVE,
    TOL,
    Cell,
    paired,
    paired_differences,
    pct,
    t_p_value,
)
from .verdicts import FWER, Family, basis, fmt_p


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
    d = paired_differences(c, c, "test", "val")
    ci = t_mean_ci(d)
    tost = tost_paired(d, KEEP_MARGIN, alpha=FWER)
    if ci is None or tost is None:
        return "not testable (one seed)"
    keeps = tost.mean > -TOL
    raw = min(1.0, 2.0 * tost.p) if keeps else t_p_value(d, -TOL)
    adj = fam.p(raw)
    test = f"TOST inside ±{pct(KEEP_MARGIN)}" if keeps else f"t-test against −{pct(TOL)}"
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
    raw = t_p_value(v, bound + TOL)
    adj = fam.p(raw)
    text = (f"{which} {pct(m)} %, t-CI [{pct(ci[0])}, {pct(ci[1])}], "
            + (f"learned in {c.learned_seeds} of {c.n} seeds, " if learned else "")
            + f"t-test against {pct(bound + TOL)} %: {fmt_p(raw, adj)}; {basis(len(v), c.selection, False)}")
    side = "" if adj >= FWER else "below" if m < bound + TOL else "above" if m > bound + TOL else ""
    return text, side


def _at_most(c: Cell, bound: float, fam: Family, which: str = "test", chance: float = 0.25) -> str:
    """Verdict of "accuracy at most ``bound``" over all seeds; a model at ``chance`` satisfies it vacuously: not
    testable. held / contradicted: :func:`_t_against`, in the direction of the mean."""
    m = c.mean(which)
    if m <= chance + 0.02:
        return f"**not testable** ({which} {pct(m)} %: at chance, nothing learned)"
    r = _t_against(c, bound, fam, which, learned=False)
    if r is None:
        return f"not testable (one seed; {which} {pct(m)} %)"
    return f"**{ {'below': 'held', 'above': 'contradicted'}.get(r[1], 'inconclusive')}** ({r[0]})"


def _above(c: Cell, bound: float, fam: Family, which: str = "test") -> str:
    """Verdict of "accuracy above ``bound``" over all seeds (no post-selection): :func:`_t_against`, in the
    direction of the mean; not testable for a PE that cannot represent the label."""
    if c.cannot:
        return f"**not testable** ({c.not_learned()})"
    r = _t_against(c, bound, fam, which, learned=True)
    if r is None:
        return f"**not testable** (one seed; {which} {pct(c.mean(which))} %)"
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
            f"{basis(len(paired_differences(ca, cb)), ca.selection, True).replace('seeds that', 'seeds where both')})")


def _canvas_shift_claims(c: dict[str, Cell], t: Tally, name: str, test: str, where: str) -> list[str]:
    """A canvas probe whose test scenes are shifted off the training region (translation, extrapolation): relative
    PEs keep their accuracy, absolute PEs lose it, the rest measured; relative PEs beat sincos ``where``."""
    out = [f"- **{name}** (test: {test}; " + CANVAS_CUE + "). Relative PEs keep their accuracy:"]
    out += _group_claim(c, RELATIVE, "keeps", t, f"{name}: relative PEs keep their accuracy")
    out += ["  Absolute PEs lose it:"] + _group_claim(c, ABSOLUTE, "loses", t, f"{name}: absolute PEs lose it")
    out += ["  Not exactly relative or with an absolute cue (measured, no prediction):"] + _group_claim(
        c, MEASURED_ONLY, None, t)
    out += [f"  Relative PEs beat the absolute sincos {where} (test, paired by seed):"]
    return out + [f"  - {pe} − sincos: {t.beats(f'{name}: relative PEs beat sincos', c, pe, 'sincos')}"
                  for pe in RELATIVE]


def claims(data: dict[str, dict[str, Cell]], tally: Tally) -> list[str]:
    """The predictions with their verdicts (markdown lines); each verdict is also recorded in ``tally``, each
    test in its family (run twice by :func:`findings`: benchmarks/verdicts.py)."""
    t = tally
    out = ["#### Predictions and verdicts", "", t.family.rule(), ""]
    if "probe-translation" in data:
        out += _canvas_shift_claims(data["probe-translation"], t, "Translation",
                                    "the glyph pair in the other half of the canvas", "off the training region")
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
        out += _canvas_shift_claims(c, t, "Extrapolation", "a 12 × 12 canvas at the training glyph scale",
                                    "on the larger canvas")
        out += [f"  PaPE extrapolates better than RoPE-axial (the PaPE paper's claim), larger canvas (test): "
                f"{t.beats('Extrapolation: PaPE beats RoPE-axial (larger canvas)', c, 'pape', 'rope-axial')}"]
        sizes = sorted({k for cell in c.values() for v in cell.upsampled.values() for k in v}, key=int)
        if len(sizes) > 1 and "pape" in c and "rope-axial" in c:
            big = sizes[-1]
            up = {pe: c[pe].replaced(test=c[pe].at_size(big)) for pe in ("pape", "rope-axial")}
            at = up["pape"].mean("test")
            verdict = (f"**not testable** (PaPE at {pct(at)} % on the upsampled scenes: at chance, "
                       f"{pct(CEILING['probe-extrapolation'])} % + {pct(TOL)})"
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
                    + "; ".join(f"{pe} {pct(c[pe].mean('test'))} %" for pe in cannot) + "."]
    return out
