"""Write docs/performance.md from the committed performance measurements.

    python -m benchmarks.perf_findings [--perf docs/perf.json] [--attention docs/perf_attention.json]
        [--peers docs/perf_peers.json] [--contention docs/perf_contention.json] [--analyze docs/perf_analyze.json]
        [--doc docs/performance.md]

``--perf`` is the JSON of ``bench perf all`` (records ``{"name", "suite", "a_value", "b_value", "ratio",
"target", "meets_target", "higher_is_better", ...}``), ``--attention`` the JSON of ``bench perf
attention`` (rows ``{"pe", "variant", "impl", "phase", "auto", "n_tokens", "time_ms", "peak_mem_mb", ...}``).
The page's prose is fixed (the template below); every number in it is read from those two files: the
targets met and missed, the training step of every PE against ``none`` with the cost of its attention
layer, the attention layer at the largest token count measured, and the floors that explain the misses.
``--peers`` (``bench perf peers --json``), ``--contention`` (``bench perf contention --json``) and ``--analyze``
(``bench perf analyze --json``) are read when the files exist (their sections say "not measured" otherwise).
"""
from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path

from pebench.leaderboard.stats import t_mean_ci  # noqa: E402

from .reports import emit, fill, shown

#: the per-PE training-step target of ``pe-overhead`` (samples/s against ``none``)
STEP_TARGET = 0.85
#: peak memory in evaluation at 4x the tokens (linear in N: ~4x; an N x N tensor: ~16x)
GROWTH_TARGET = 4.5


def load(path: Path) -> list[dict]:
    rows = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"expected a JSON list of records in {path}")
    return rows


def _r(x: float) -> str:
    return f"{x:.2f}"


def _met(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _bound(rec: dict) -> str:
    return ("≥ " if rec["higher_is_better"] else "≤ ") + f"{rec['target']:g}"


def _record(perf: list[dict], name: str) -> dict | None:
    return next((r for r in perf if r["name"] == name), None)


def flop_floors(perf: list[dict]) -> dict[str, dict[int, float]]:
    """``pe-overhead``'s FLOP floor per PE and token count: ``none``'s counted FLOPs per training step over the
    PE's (the ratio a step whose time followed its counted FLOPs would reach); records without it: absent."""
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for r in perf:
        if r["suite"] == "pe-overhead" and r["name"].startswith("pe-overhead train") and "flop_floor" in r:
            out[r["a"].removeprefix("pe=")][int(r["name"].split("(")[1].split()[0])] = r["flop_floor"]
    return dict(out)


def step_ratios(perf: list[dict]) -> dict[str, dict[int, tuple[float, list[float]]]]:
    """``pe-overhead`` training-step ratios (samples/s against ``none``): PE -> tokens -> (ratio of the
    medians, per-round ratios; ``[ratio]`` when the record has no rounds)."""
    out: dict[str, dict[int, tuple[float, list[float]]]] = defaultdict(dict)
    for r in perf:
        if r["suite"] == "pe-overhead" and r["name"].startswith("pe-overhead train"):
            tokens = int(r["name"].split("(")[1].split()[0])
            out[r["a"].removeprefix("pe=")][tokens] = (r["ratio"], list(r.get("round_ratios") or [r["ratio"]]))
    return dict(out)


def round_interval(rounds: list[float]) -> tuple[float, float] | None:
    """95 % Student-t interval of the geometric-mean ratio over rounds (a t-interval of the log ratios,
    mapped back), or None below 2 rounds."""
    ci = t_mean_ci([math.log(x) for x in rounds])
    return None if ci is None else (math.exp(ci[0]), math.exp(ci[1]))


def interval_verdict(ivs: list[tuple[float, float]], target: float, higher_is_better: bool = True) -> str:
    """``met`` when every interval lies wholly on the target's good side, ``missed`` when one lies wholly on
    its bad side, else ``inconclusive``."""
    sign = 1.0 if higher_is_better else -1.0  # compare -x against -target when lower is better
    ivs = [sorted((sign * lo, sign * hi)) for lo, hi in ivs]
    if all(lo >= sign * target for lo, _ in ivs):
        return "met"
    if any(hi < sign * target for _, hi in ivs):
        return "missed"
    return "inconclusive"


def record_verdict(rec: dict) -> str:
    """A record's target verdict from the 95 % interval over its rounds (``round_ratios``); without rounds,
    the record's own ``meets_target``."""
    iv = round_interval(rec.get("round_ratios") or [])
    if iv is None:
        return "met" if rec["meets_target"] else "missed"
    return interval_verdict([iv], rec["target"], rec["higher_is_better"])


def step_verdict(cells) -> str:
    """The per-PE verdict over both sizes' round intervals (a single-round record: its ratio decides)."""
    return interval_verdict([round_interval(rounds) or (ratio, ratio) for ratio, rounds in cells], STEP_TARGET)


def auto_rows(attn: list[dict]) -> dict[tuple[str, str, int], dict]:
    """The rows ``bench run`` would use (``auto``), default variants: (pe, phase, N) -> row."""
    return {(r["pe"], r["phase"], r["n_tokens"]): r for r in attn if r["auto"] and r["variant"] == "default"}


def layer_ratio(auto: dict, pe: str, phase: str, n: int, key: str = "time_ms") -> float | None:
    row, ref = auto.get((pe, phase, n)), auto.get(("none", phase, n))
    return row[key] / ref[key] if row and ref else None


def growth(auto: dict, n: int) -> list[tuple[str, float]]:
    """Evaluation peak-memory growth from ``n`` to ``4n`` tokens per PE (auto implementation)."""
    pes = sorted({pe for pe, phase, m in auto if phase == "eval" and m == n and (pe, "eval", 4 * n) in auto})
    return [(pe, auto[(pe, "eval", 4 * n)]["peak_mem_mb"] / auto[(pe, "eval", n)]["peak_mem_mb"]) for pe in pes]


def targets_table(perf: list[dict], attn: list[dict]) -> str:
    lines = ["| target | measured | met |", "|---|---|:-:|"]
    backbone = [r for r in perf if r["suite"] == "backbone" and r.get("target") is not None]
    if backbone:
        lo, hi = min(r["ratio"] for r in backbone), max(r["ratio"] for r in backbone)
        words = [record_verdict(r) for r in backbone]
        tally = ", ".join(f"{words.count(w)} {w}" for w in ("met", "missed", "inconclusive") if words.count(w))
        lines.append(f"| pebench's ViT against timm's of the same shape, samples/s ≥ 0.95× (`backbone`) | "
                     f"{_r(lo)}–{_r(hi)}× over {len(backbone)} cells ({tally}) | "
                     f"{'**no**' if 'missed' in words else 'yes' if set(words) == {'met'} else 'inconclusive'} |")
    budget = _record(perf, "attention fwd+bwd N=1024 d=64 pape vs rope-axial")
    if budget:
        iv = round_interval(budget.get("round_ratios") or [])
        lines.append(f"| PaPE against RoPE-axial, one attention layer forward + backward at N = 1,024, "
                     f"{_bound(budget)}× (`attention-budget`) | {_r(budget['ratio'])}×"
                     + (f" [{_r(iv[0])}, {_r(iv[1])}] over rounds: {record_verdict(budget)}" if iv else "")
                     + f" | {_met(record_verdict(budget) == 'met')} |")
    steps = step_ratios(perf)
    if steps:
        verdicts = {pe: step_verdict(by_n.values()) for pe, by_n in steps.items()}
        missed = [pe for pe, v in verdicts.items() if v == "missed"]
        spread = [pe for pe, v in verdicts.items() if v == "inconclusive"]
        sizes = " and ".join(str(n) for n in sorted({n for by_n in steps.values() for n in by_n}))
        lines.append(f"| every PE's training step ≥ {STEP_TARGET}× `none`'s samples/s at {sizes} tokens "
                     f"(`pe-overhead`) | met by {sum(v == 'met' for v in verdicts.values())} of {len(steps)} PEs at "
                     f"both sizes; missed by {', '.join(missed) or 'none'}"
                     + (f"; inconclusive for {', '.join(spread)}" if spread else "")
                     + f" | {_met(not missed and not spread)} |")
    auto = auto_rows(attn)
    for n in sorted({m for _, _, m in auto if m >= 1024}):  # the target is set from 1,024 tokens up
        g = growth(auto, n)
        if g:
            worst = max(g, key=lambda t: t[1])
            lines.append(f"| peak memory in evaluation linear in N, ≤ {GROWTH_TARGET}× from {n:,} to {4 * n:,} "
                         f"tokens for every PE under `auto` (`bench perf attention`) | largest {_r(worst[1])}× "
                         f"({worst[0]}), over {len(g)} PEs | {_met(worst[1] <= GROWTH_TARGET)} |")
    wall = _record(perf, "perf wall time all suites")
    if wall:
        lines.append(f"| `bench perf all` within {wall['b_value']:g} s on an idle 2-core CPU | "
                     f"{wall['a_value']:.0f} s | {_met(wall['meets_target'])} |")
    counted = {"backbone", "pe-overhead", "all"}
    by_suite: dict[str, list[dict]] = defaultdict(list)
    for r in perf:
        if r.get("target") is not None and r["suite"] not in counted and r is not budget:
            by_suite[r["suite"]].append(r)
    for suite, recs in by_suite.items():
        bad = [r for r in recs if not r["meets_target"]]
        what = "".join(f"; {r['name']}: {_r(r['ratio'])} ({_bound(r)})" for r in bad)
        lines.append(f"| the targets of `{suite}` (see [`perf.md`](perf.md)) | {len(recs) - len(bad)} of {len(recs)} "
                     f"met{what} | {_met(not bad)} |")
    lines.append("| CUDA, N = 16,384, forward + backward: every PE ≤ 1.25× `none`'s time and ≤ 1.5× its peak "
                 "memory | **unmeasured**: no CUDA device | — |")
    return "\n".join(lines)


def overhead_table(perf: list[dict]) -> str:
    steps = step_ratios(perf)
    if not steps:
        return "(no `pe-overhead` records in the measurements)"
    sizes = sorted({n for by_n in steps.values() for n in by_n})
    floors = flop_floors(perf)
    words = {"met": "yes", "missed": "**no**", "inconclusive": "inconclusive"}
    head = [f"{n} tokens [rounds' 95 % interval]" for n in sizes]
    if floors:
        head += [f"FLOP floor, {n} tokens" for n in sizes]
    lines = ["| PE | " + " | ".join(head) + f" | ≥ {STEP_TARGET} |", "|---|" + "---:|" * len(head) + ":-:|"]
    alone = {r["a"].removeprefix("pe=") for r in perf
             if r["suite"] == "pe-overhead" and "own interleave" in (r.get("note") or "")}

    def cell(ratio: float, rounds: list[float]) -> str:
        iv = round_interval(rounds)
        return _r(ratio) + (f" [{_r(iv[0])}, {_r(iv[1])}]" if iv else "")

    for pe, by_n in steps.items():
        cells = [cell(*by_n[n]) if n in by_n else "—" for n in sizes]
        if floors:
            cells += [_r(floors[pe][n]) if n in floors.get(pe, {}) else "—" for n in sizes]
        lines.append(f"| {pe}{' (*alone*)' if pe in alone else ''} | " + " | ".join(cells)
                     + f" | {words[step_verdict(by_n.values())]} |")
    return "\n".join(lines)


def large_n_table(attn: list[dict]) -> str:
    auto = auto_rows(attn)
    if not auto:
        return "(no `bench perf attention` rows)"
    n = max(m for _, _, m in auto)
    pes = [pe for pe in dict.fromkeys(r["pe"] for r in attn) if (pe, "eval", n) in auto or (pe, "train", n) in auto]
    reps = sorted({r["repeats"] for r in attn if r["n_tokens"] == n})
    lines = [f"N = {n:,} tokens, one attention layer, batch 1, 1 head of {attn[0]['head_dim']}, "
             f"{attn[0]['device'].upper()}, the implementation `auto` picks ("
             + ("time: one step each, so single-step noise" if reps == [1] else
                f"time: best of {'/'.join(map(str, reps))} steps") + "; ratios against `none` under `auto`; "
             "*skipped*: see the notes of [`perf_attention.md`](perf_attention.md)):", "",
             "| PE | train: attention | time × none | peak MB | eval: attention | time × none | peak MB |",
             "|---|---|---:|---:|---|---:|---:|"]
    for pe in pes:
        cells = []
        for phase in ("train", "eval"):
            row = auto.get((pe, phase, n))
            cells += [row["impl"], f"{_r(layer_ratio(auto, pe, phase, n))}", f"{row['peak_mem_mb']:,.1f}"] \
                if row else ["skipped", "—", "—"]
        lines.append(f"| {pe} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def misses(perf: list[dict], attn: list[dict]) -> str:
    """Generated sentences: what each missed CPU target costs and the floor beneath it."""
    auto = auto_rows(attn)
    out = []
    steps = step_ratios(perf)
    slow = {pe: by_n for pe, by_n in steps.items() if step_verdict(by_n.values()) != "met"}
    floors = flop_floors(perf)
    low = {pe: by_n for pe, by_n in floors.items() if pe in slow and min(by_n.values()) < STEP_TARGET + 0.05}
    if low:
        out.append("* **FLOP floor** (`none`'s counted FLOPs per training step over the PE's: matrix products and "
                   "attention kernels, not elementwise work): " + "; ".join(
                       f"{pe} {', '.join(f'{_r(f)} at {n}' for n, f in sorted(by_n.items()))} tokens"
                       for pe, by_n in low.items())
                   + f". At or below {STEP_TARGET + 0.05:g}, the target asks the PE's extra arithmetic to run as "
                   "efficiently as the backbone's largest matrix products, which no eager implementation of small "
                   "per-token maps does on this CPU; below the target it cannot be met by any exact implementation "
                   "whose time follows its FLOPs.")
    if "liere" in slow and step_verdict(slow["liere"].values()) == "missed":
        t, m = layer_ratio(auto, "liere", "train", 1024), layer_ratio(auto, "liere", "train", 1024, "peak_mem_mb")
        out.append("* **LieRE** computes a matrix exponential per token, head and layer (`torch.linalg.matrix_exp` "
                   "of `d x d` generators that do not commute) and its backward (PyTorch differentiates it through "
                   "an exponential of a `2d x 2d` block matrix). That is the method's defining computation, not an "
                   "overhead around it"
                   + (f": one attention layer at N = 1,024 costs {_r(t)}× the time and {_r(m)}× the memory of "
                      "`none`'s (`bench perf attention`)" if t is not None else "")
                   + ". The rotations are shared by the sequences of a batch (one coordinate table), so the ratio "
                   "improves with the batch size; at the `pe-overhead` batch it is far below the target.")
    floor = _record(perf, "attention fwd+bwd N=1024 d=64 kernel floor")
    vs_none = _record(perf, "attention fwd+bwd N=1024 d=64 pape vs none")
    if "pape" in slow and step_verdict(slow["pape"].values()) == "missed" and floor and vs_none:
        out.append(f"* **PaPE** adds per-token work (its `A x` map to m = 50 parabolas per head, the softplus, the "
                   f"fold into q) and a wider SDPA head (5 extra dims for 2-D coordinates, padded to a multiple of 8): one attention layer at N = 1,024 "
                   f"costs {_r(vs_none['ratio'])}× `none`'s, of which the wider kernel alone, with no PE work, is "
                   f"{_r(floor['ratio'])}× RoPE-axial's (`attention-budget`, *kernel floor*).")
    verdicts = {pe: step_verdict(by_n.values()) for pe, by_n in slow.items()}
    learned = [pe for pe in ("rope-mixed", "string", "comrope") if verdicts.get(pe) == "missed"]
    if learned:
        desc = "; ".join(f"{pe} {', '.join(f'{_r(v[0])} at {n}' for n, v in sorted(slow[pe].items()))} tokens"
                         for pe in learned)
        out.append(f"* **{', '.join(learned)}** ({desc}): learned rotation frequencies, so sines and cosines are "
                   "recomputed every step, with the gradient of every phase (a complex product per token and "
                   "channel pair, reduced over the batch); RoPE-axial caches its phases per coordinate table. "
                   "STRING's orthogonal basis and ComRoPE's eigenbasis are folded into the q/k projection "
                   "weights (`fold_basis`), so neither costs per-token work.")
    unsure = [pe for pe, v in verdicts.items() if v == "inconclusive"]
    if unsure:
        out.append(f"* **{', '.join(unsure)}**: inconclusive, the interval over rounds contains the target "
                   "(table below).")
    teacher = _record(perf, "dino teacher forward vit-nano12 b64 2x32px + 4x16px")
    step = _record(perf, "dino train step vit-nano12 b64 2x32px + 4x16px")
    rest = _record(perf, "dino step without its teacher forward vit-nano12 b64 2x32px + 4x16px")
    if teacher and step and rest and not step["meets_target"]:
        out.append(f"* **DINO's step** is {_r(step['ratio'])}× the classification steps on the same crops (target "
                   f"{_bound(step)}): the teacher's forward on the 2 global crops, which DINO cannot skip, alone "
                   f"costs {_r(teacher['ratio'])} of them, so no implementation gets below "
                   f"{_r(1 + teacher['ratio'])}×; the step without it is {_r(rest['ratio'])}× ({_bound(rest)}).")
    geo = [r for r in perf if r["name"].startswith("analysis geometry")]
    if geo and not all(r["meets_target"] for r in geo):
        out.append("* **The geometry analysis** is a fixed number of passes over a fixed 256-sample probe (1 + 2K "
                   "forwards with the default RPI protocol), so its cost against a "
                   "validation epoch falls with the validation set: " + ", ".join(
                       f"{_r(r['ratio'])}× with {r['name'].split('val ')[1].split(',')[0]} validation samples"
                       for r in geo) + f" (target {_bound(geo[0])}); at a fixed cost it would be met from about "
                   f"{_needed(geo):,} validation samples (extrapolated linearly from the largest set measured). The "
                   "probe cannot shrink without biasing SSDC (below).")
    return "\n".join(out) or "Every measured CPU target is met."


def peers_table(peers: list[dict] | None) -> str:
    """``bench perf peers``: per comparison and phase, pebench's throughput over the peer's with the
    distribution-free 95 % interval of the per-round median (met: the interval at or above 1; missed: below
    1; else inconclusive) and pebench's peak memory over the peer's (met: at most 1)."""
    if not peers:
        return "Not measured: no `docs/perf_peers.json` (`bench perf peers --json docs/perf_peers.json`)."
    lines = ["| comparison | phase | pebench / peer, samples/s: ratio of the medians [95 % interval of the per-round ratios' median] | ≥ 1.0× | peak memory, pebench / peer "
             "| ≤ 1.0× |", "|---|---|---|:-:|---:|:-:|"]
    mem = {r["name"].replace(" peak memory", ""): r for r in peers if " peak memory " in r["name"]}
    for r in peers:
        if not r["name"].startswith("peers ") or " peak memory " in r["name"] or r.get("target") is None:
            continue
        phase, what = r["name"].removeprefix("peers ").split(" ", 1)
        iv = r.get("interval95")
        verdict = interval_verdict([tuple(iv)], r["target"]) if iv else ("met" if r["meets_target"] else "missed")
        m = mem.get(r["name"])
        lines.append(f"| {what} | {phase} | {_r(r['ratio'])}" + (f" [{_r(iv[0])}, {_r(iv[1])}]" if iv else "")
                     + f" | {verdict} | " + (f"{_r(m['ratio'])} | {_met(m['meets_target'])}" if m else "— | —")
                     + " |")
    return "\n".join(lines)


def contention_table(rows: list[dict] | None) -> str:
    """``bench perf contention``: each thread setting's time beside a competing load over its idle time."""
    if not rows:
        return ("Not measured: no `docs/perf_contention.json` (`bench perf contention --json "
                "docs/perf_contention.json`).")
    def ratio(r: dict) -> str:  # the ratio of the medians, and the rounds' 95 % interval when it has rounds
        iv = round_interval(r.get("round_ratios") or [])
        return f"{_r(r['ratio'])}×" + (f" [{_r(iv[0])}, {_r(iv[1])}]" if iv else "")

    lines = ["| setting | loaded / idle [rounds' 95 % interval] | target | met |", "|---|---:|---:|:-:|"]
    for r in rows:
        if r["name"].startswith("contention ") and r.get("target") is not None:
            verdict = record_verdict(r)
            lines.append(f"| {r['name'].removeprefix('contention ')} | {ratio(r)} | {_bound(r)}× | "
                         + ("yes" if verdict == "met" else "**no**" if verdict == "missed" else verdict) + " |")
    for phase in ("idle", "loaded"):  # each setting's own times against the default's (medians in seconds)
        for r in rows:
            if r["name"].startswith(f"contention {phase} "):
                secs = (f" ({_r(r['a_value'])} s / {_r(r['b_value'])} s)"
                        if r.get("a_value") is not None and r.get("b_value") is not None else "")
                lines.append(f"| {phase} time, {r['name'].removeprefix(f'contention {phase} ')} | {ratio(r)}{secs} "
                             "| — | — |")
    return "\n".join(lines)


def analyze_section(rows: list[dict] | None) -> str:
    """``bench perf analyze``: the geometry analysis of a real-size ViT against one plain forward pass, the forward
    passes its default protocol alone needs (the note's ``1 + 2K``), the default's wall time against the budget,
    and, where the records hold it, the same analysis with one RPI permutation (``..., one permutation, ...``)."""
    if not rows:
        return "Not measured: no `docs/perf_analyze.json` (`bench perf analyze --json docs/perf_analyze.json`)."
    ratio = next((r for r in rows if r["name"].startswith("analyze geometry,")
                  and not r["name"].startswith("analyze geometry, one permutation")), None)
    one = next((r for r in rows if r["name"].startswith("analyze geometry, one permutation, ")), None)
    budget = next((r for r in rows if r["name"].startswith("analyze geometry wall time")
                   and not r["name"].startswith("analyze geometry wall time, one permutation")), None)
    if ratio is None or budget is None:
        return "`docs/perf_analyze.json` holds no analyze records."
    passes = int(ratio["note"].split(" = ")[1].split()[0]) if " = " in (ratio.get("note") or "") else None
    text = (f"{ratio['name'].removeprefix('analyze geometry, ')}: `{ratio['a']}` took {ratio['a_value']:.0f} s against "
            f"{ratio['b_value']:.1f} s for {ratio['b']} ({_r(ratio['ratio'])}×); budget {budget['b_value']:.0f} s: "
            f"{'met' if budget['meets_target'] else '**missed**'} ({_r(budget['ratio'])}× the budget).")
    if passes:
        text += (f" The protocol's {passes} probe passes alone cost about {passes} × {ratio['b_value']:.1f} = "
                 f"{passes * ratio['b_value']:.0f} s of forward passes, so the budget cannot be met without fewer "
                 "passes (a smaller K, no untrained twin) or fewer images.")
    if one is not None:
        text += (f" With one permutation, `{one['a']}` took {one['a_value']:.0f} s ({_r(one['ratio'])}× the forward "
                 f"pass; {one['a_value'] / budget['b_value']:.2f}× the budget): the same estimand with the spread of a "
                 "single permutation instead of the mean of K, which "
                 "[`results/rpi-draw/REPORT.md`](../results/rpi-draw/REPORT.md) measures on the real DINOv2 ViT-S/14 "
                 "(a per-sample draw was tried there as the budget protocol and not adopted).")
    return text


def _needed(geo: list[dict]) -> int:
    """Validation-set size at which the geometry analysis would cost its target share of an epoch,
    extrapolated linearly (epoch time proportional to the samples) from the largest set measured."""
    r = max(geo, key=lambda r: int(r["name"].split("val ")[1].split(",")[0]))
    n = int(r["name"].split("val ")[1].split(",")[0])
    return int(round(n * r["ratio"] / r["target"], -3))


def provenance(perf: list[dict], attn: list[dict], perf_path: Path, attn_path: Path) -> str:
    wall = _record(perf, "perf wall time all suites")
    ns = sorted({r["n_tokens"] for r in attn})
    return (f"This page is written by `benchmarks/perf_findings.py` from [`{perf_path.name}`]({perf_path.name}) "
            f"(`bench perf all`, {len(perf)} records"
            + (f", {wall['a_value']:.0f} s" if wall else "") + f"; its markdown twin [`perf.md`](perf.md) records the "
            f"machine and its load) and [`{attn_path.name}`]({attn_path.name}) (`bench perf attention`, "
            f"{len(attn)} rows at {', '.join(f'{n:,}' for n in ns)} tokens; page: "
            f"[`perf_attention.md`](perf_attention.md)). A test regenerates it byte for byte; every number below "
            f"is read from those files.")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--perf", default="docs/perf.json", help="bench perf all --json output")
    ap.add_argument("--attention", default="docs/perf_attention.json", help="bench perf attention --json output")
    ap.add_argument("--peers", default="docs/perf_peers.json", help="bench perf peers --json output (optional)")
    ap.add_argument("--contention", default="docs/perf_contention.json",
                    help="bench perf contention --json output (optional)")
    ap.add_argument("--analyze", default="docs/perf_analyze.json", help="bench perf analyze --json output (optional)")
    ap.add_argument("--doc", metavar="FILE", help="write the page to FILE instead of printing it")
    args = ap.parse_args(argv)
    try:
        perf, attn = load(Path(args.perf)), load(Path(args.attention))
        peers = load(Path(args.peers)) if Path(args.peers).is_file() else None
        contention = load(Path(args.contention)) if Path(args.contention).is_file() else None
        analyze = load(Path(args.analyze)) if Path(args.analyze).is_file() else None
    except (OSError, ValueError) as e:  # ValueError includes json.JSONDecodeError
        ap.error(f"expected the JSON of bench perf all (--perf), bench perf attention (--attention) and, when "
                 f"given, bench perf peers / contention: {e}")
    emit(fill(PAGE, provenance=provenance(perf, attn, Path(shown(Path(args.perf))), Path(shown(Path(args.attention)))),
              targets=targets_table(perf, attn), misses=misses(perf, attn), overhead=overhead_table(perf),
              large_n=large_n_table(attn), peers=peers_table(peers), contention=contention_table(contention),
              analyze=analyze_section(analyze)),
         args.doc)
    return 0


PAGE = """\
# Performance

`bench perf all` measures, side by side in one process (interleaved repeats, medians), pebench's
backbone against timm's `VisionTransformer`, PaPE attention against RoPE
([`architecture.md`](architecture.md) §6), every PE against `none`, the analyses, data loading, DINO,
point-cloud scenes, detection and the default run; `bench perf attention` measures one attention layer
per PE, attention implementation (`sdpa` / `dense` / `flex`) and phase (training: forward + backward;
evaluation: forward without gradients), time and peak memory, up to 16k tokens.
[`gpu_check.md`](gpu_check.md) is an older H200 check, from before FlexAttention (dense N×N bias for
ALiBi / LookHere).

@@PROVENANCE@@

**Regenerating** (on an idle 2-core CPU machine: nothing else running; `all` must stay within 300 s,
which its last record checks), then this page:

```
bench perf all --json docs/perf.json --md docs/perf.md
bench perf attention --tokens 256,1024,4096,16384 --json docs/perf_attention.json --md docs/perf_attention.md
python -m benchmarks.perf_findings --doc docs/performance.md
```

## Targets

@@TARGETS@@

The CUDA targets are unmeasured: no CUDA device was available to the sessions that wrote the
FlexAttention paths and these suites, so nothing here estimates them. A faster CPU path that changes
the order of floating-point operations is allowed: the committed studies record the commit they ran at and
reproduce there, and the studies a change affects are rerun at one commit (ComRoPE's `impl=eig` is such a
path; `impl=expm`, the definition, stays an option).

What the missed CPU targets cost, and the floor beneath each:

@@MISSES@@

## Training step per PE

`pe-overhead`: vit-nano training-step samples/s (forward, cross-entropy, backward, AdamW) against
`none`'s, interleaved in one process, at 32 px (64 tokens, batch 32) and 64 px (256 tokens, batch 8):
the ratio of the medians, and in brackets the 95 % Student-t interval of the geometric-mean ratio
over the rounds (each round times every PE and `none` once, a block of training steps each, whose count each
record's note in `perf.md` gives, so a round's ratio pairs them). A PE
meets the target when the interval lies at or above it at both sizes, misses it when the interval
lies below it at one size, and is otherwise inconclusive: a single step on this shared machine can take tens
of percent longer than the next (hence the blocks), so an inconclusive PE can pass in one run and fail in the next. PEs whose step takes over 1.5× `none`'s
are timed in their own interleave with `none` (marked *alone*): in one shared round, the memory their
steps free slowed the candidates after them. The *FLOP floor* columns are `none`'s floating-point operations
per training step (forward, cross-entropy, backward) over the PE's, as `torch.utils.flop_counter` counts them
(matrix products, convolutions, attention kernels; the CPU flash kernel by the same formulas as the CUDA
ones; elementwise work and the optimizer are not counted): the ratio a step whose time followed its counted
FLOPs would reach. A floor of 1 means the PE adds no counted products (only elementwise work); a floor below
the target means no exact implementation of the method meets it on a machine bound by arithmetic.
One attention layer per PE, alone, is in [`perf_attention.md`](perf_attention.md).

@@OVERHEAD@@

## Attention at the largest size measured

@@LARGE_N@@

On CPU, FlexAttention has no backward (torch 2.14), so the bias PEs (ALiBi, LookHere) train through
the dense `N x N` bias; in evaluation `auto` uses FlexAttention from 1,024 tokens on, with memory
linear in N ([`perf_attention.md`](perf_attention.md) has every implementation and the growth table).

## Against the implementations users would pick instead

`bench perf peers` (the `perf` extra: `pip install -e ".[perf]"`): timm's RoPE ViTs built at vit-nano's
shape against pebench's `rope-axial` / `rope-mixed` classifier, and one attention layer with
`rotary-embedding-torch`'s axial RoPE, `x-transformers`' ALiBi and timm's `RelPosBias` (Swin's table, the whole
grid as its window) against pebench's `rope-axial`, `alibi` and `rpb`; same shapes, fp32,
interleaved rounds in one process (training step: forward, loss, backward, AdamW; evaluation: forward).
Target: at least the peer's throughput and at most its peak memory
(`bench perf peers --json docs/perf_peers.json --md docs/perf_peers.md`).

@@PEERS@@

`rpb` keeps its offset index per coordinate tensor, as timm keeps `relative_position_index` as a buffer, and
gathers its bias with `index_select` (whose backward is an `index_add_`). In evaluation both layers run the same
kernels (qkv and output `addmm`, CPU flash SDPA with a `(1, H, N, N)` mask). In training the two differ: timm's
mask needs a gradient, so `F.scaled_dot_product_attention` runs its math path; pebench's `auto` runs `bias-flash`
(the flash kernel with the mask forward, the backward written out; `pebench.models.attention`), whose gain
grows with the tokens (`rpb` in the training-step table above, 64 and 256 tokens) and is none at this layer's 64
tokens; it keeps `P` and `dP` for the backward, as the math path keeps its scores and softmax.

## On a shared machine

`bench perf contention`: a few training steps in fresh processes, idle and beside two competing 2-thread
processes of its own making, per thread setting (`default`: no OpenMP policy exported; `passive`: what
`bench` sets, `OMP_WAIT_POLICY=PASSIVE`; `spin-10k`: GNU OpenMP's bounded wait, `GOMP_SPINCOUNT=10000`, which
`bench` keeps when you export it; `1-thread`); the ratio is loaded over idle time. Target ≤ 2.5×
(`bench perf contention --json docs/perf_contention.json --md docs/perf_contention.md`).

@@CONTENTION@@

How to read it: two competing 2-thread processes and the training's 2 threads on 2 cores give the training,
at an equal share per thread, a third of the CPU, so a training that used both cores fully would take 3× its
idle time; the 2.5× target lies below that share. The ratio alone also rewards a slow idle time: the `idle time`
and `loaded time` rows compare each setting's own seconds with the default's. `bench` keeps `passive` as its
default because it bounds the loaded time; `spin-10k` (export `GOMP_SPINCOUNT=10000`) trades some of that for
the default's idle speed, and `1-thread` gives up the second core when the machine is idle.

## `bench analyze` on a real-size ViT

`bench perf analyze` (not part of `all`: minutes): the geometry analysis `bench analyze` runs on timm's 12-block
ViT-S/14 over 256 photographs at 224 px, against one plain forward pass over the same images
(`bench perf analyze --json docs/perf_analyze.json`). Target: 256 images within 3 minutes on the idle 2-core CPU.

@@ANALYZE@@

## Method

```
bench perf [all] [--json FILE] [--md FILE] [--quick]  # every suite but `attention`; ≤ 300 s on an idle 2-core CPU
bench perf startup | backbone | attention-budget | pe-overhead | analysis | data | dino | scene | detection | e2e
bench perf attention [--tokens 256,1024,4096] [--pes LIST] [--impls sdpa,dense,flex] [--phases train,eval] [--md FILE]
```

`--quick` runs the same code paths at smoke-test sizes with one repeat, in seconds per suite (the
tests use it; its numbers mean nothing); `all --quick` leaves out `e2e`, `e2e --quick` runs
`bench run --fast-dev-run`. Output: a markdown table on stdout
(and `--md`), and with `--json` a list of records
`{"name", "a", "b", "a_value", "b_value", "unit", "ratio" = a/b, "higher_is_better", "target", "meets_target", "note", "suite"}`
(`target` bounds the ratio: from below when `higher_is_better`, else from above). After the
suites' records come one `perf wall time SUITE` record per suite (its seconds over the total) and,
for `all`, `perf wall time all suites` against the 300 s budget. The committed
results are in [`perf.md`](perf.md) / `docs/perf.json`.

Timing: the machines are shared, so the two sides of a comparison run **interleaved in one
process** (A, B, A, B, …, each round starting one candidate later, after a warm-up) and are compared
by their medians; only ratios are meaningful, absolute numbers depend on the load (the header
records the load average). The `backbone`, `attention-budget` and `pe-overhead` records also keep
the ratio of each round (`round_ratios`); this page's verdict on their targets is the 95 %
Student-t interval of the geometric-mean ratio over rounds: *met* when the whole interval meets the
target, *missed* when none of it does, *inconclusive* otherwise.

Denormals: every `bench perf` command first flushes denormal floats to zero
(`pebench.runner.numerics.flush_denormals`, the header says so), as `bench run`, `bench eval` and
`bench analyze` do, so the suites time what runs do. It matters for PaPE: its published
initialisation gives logits of −50 to −200 at a few patches of distance, whose softmax weights fall
below float32's smallest normal number, where x86 arithmetic takes a slow path.

Repeats are sized so that `all` stays within its 300 s budget on the idle machine (the last record
checks it): the geometry analysis and the two validation epochs once each, interleaved (its cost
depends on the probe, not on the validation set); `pe-overhead` 5 interleaved repeats; the DINO step
2; backbone vit-s16 2 training / 4 inference repeats, vit-nano 6 / 12; `startup` 7 fresh processes
per command; the loaders 1 s each; detection 4 steps after 1 warm-up; the scene tokenization 2
interleaved repeats and its memory steps at 1,024 and 4,096 tokens once each; the PEs timed alone
against `none` (`pe-overhead`) 3 rounds. Every ratio is between candidates interleaved in one process.

| suite | a vs b | meaning |
|---|---|---|
| `backbone` | pebench ViT (ImageTokenizer + backbone + mean-pool head) vs timm `VisionTransformer` of the same shape (`class_token=False, global_pool="avg", fc_norm=False, no_embed_class=True`, `pos_embed="learn"` for `ape`, `"none"` for `none`) | training-step (fwd + bwd + AdamW) and inference samples/s, vit-s16 @ 224/16 b4 and vit-nano @ 32/4 b64, fp32. Budget ([`architecture.md`](architecture.md) §6): ≥ 0.95× |
| `attention-budget` | `pape` (sdpa) vs `rope-axial`; `none` with q/k zero-padded to PaPE's head dim vs `rope-axial`; `pape` vs `none`; `pape` peak memory at 4N vs N | [`architecture.md`](architecture.md) §6: forward + backward of one attention layer at N = 1024, head dim 64, 1 head, interleaved medians of 60. Budget ≤ 1.15× RoPE. The padded-`none` row is the *kernel floor*: what the wider fused SDPA kernel costs with no PE work at all. Memory ≤ 4.5× at 4× the tokens (linear; an N×N tensor would give ~16×) |
| `pe-overhead` | each registered PE vs `none` | vit-nano training-step samples/s at 32 px (64 tokens) and 64 px (256 tokens); on CUDA also the SDPA backend each PE gets (fp32 and bf16) and why (attention mask → no flash, fp32 → no flash, head dim not a multiple of 8, q/k vs v head dims); on CPU the kernel the forward actually ran, read from the profiler's op names (all PEs, `pape` naive's N×N bias included, run `flash (cpu)` on torch 2.14) |
| `analysis` | geometry evaluator vs one validation epoch of the default run setup, with the default 512-sample validation set and with 5120 samples; SSDC (N = 4096) and EED (D = 768) vs a float64 matmul of the same size | cost of the post-training analyses. Target ≤ 10 % of a validation epoch: the geometry cost is fixed: 1 + 2K passes over the 256-sample probe with the default RPI protocol (clean, K = 8 permutations, K for the untrained twin; see [`benchmarks/README.md`](../benchmarks/README.md#protocol-choices-how-much-each-one-moves-ssdc-and-eed)) |
| `data` | loader samples/s (decode + transforms, default `num_workers=0`) vs vit-nano (`pe=none`) training-step samples/s on the same batches | > 1: data loading is not the bottleneck. Images (shapes), events (synthetic-events, DvsGesture fixture), video (UCF101 fixture, decord), points (primitives; FPS + kNN run in the model's tokenizer and are reported too) |
| `dino` | one DINO training step (teacher forward on the 2 global crops, student forward + backward on all 2 + N, loss, centre, AdamW, EMA) vs classification steps on the same crops; the teacher forward alone and the step without it vs the same; EED / SSDC per checkpoint vs one `objects` training epoch | vit-nano12, batch 64 (CPU), 2 × 32 px + 4 × 16 px crops. Targets: step ≤ 1.1× (below the method's floor of 1 + the teacher-forward ratio), EED ≤ 10 % of an epoch |
| `scene` | point-cloud scene tokenization and patching vs a training step; peak memory of a windowed-attention step vs full attention at 1,024 and 4,096 tokens | tokenization ≤ 20 % of a step; memory of the windowed step linear in tokens (≤ 1.25× the token ratio) |
| `detection` | one `shapes-det` training step vs a classification step on the same backbone, PE and images; the detection loader vs the detection step | the head's overhead; loader ≥ 1× the model's consumption |
| `startup` | `bench --help`, `bench run --help` wall time (fresh processes) vs 1 s; each option-bounds error of `bench run` (`--epochs -1`, `--batch-size 0`, `--lr nan`, one per other bounded flag) vs 1.5 s | argument parsing and option checks import no torch |
| `e2e` | `bench run` wall time vs the 180 s budget | subprocess, defaults, includes analyses |
| `attention` | one attention layer per PE, attention implementation and phase (`pebench.perf.attention`) | time and peak memory of forward + backward (`train`) and of the forward without gradients (`eval`) vs `none` / `rope-axial`; implementations: each that `check_pe_impl` accepts for the PE (`sdpa`, `dense` for bias PEs, `flex`; on CPU `flex` in `eval` only), `auto` marking `bench run`'s choice; then the peak-memory growth from N to 4N per PE, implementation and phase (target ≤ 4.5× in evaluation) |

### Why the geometry probe stays at 256 samples

The only way to make the geometry analysis cost ≤ 10 % of the default run's 512-sample
validation epoch would be a probe of ≤ 25 samples. SSDC is computed from the similarity matrix
*averaged over the probe*, and a small probe does not just add noise, it biases SSDC towards 0
(noisier S, weaker rank correlation). Measured on the default run (`bench run`, `pape`,
seed 0, a temporary checkpoint), layers 1–4, measured with the protocol of that time (block outputs,
one RPI permutation):

| probe | SSDC | SSDC_RPI | EED % |
|---:|---|---|---|
| 16 | −0.116 −0.107 −0.074 −0.051 | 0.006 0.031 0.052 0.095 | 2.50 3.61 4.37 3.19 |
| 32 | −0.137 −0.141 −0.123 −0.113 | 0.039 0.054 0.078 0.163 | 2.42 3.56 4.24 3.63 |
| 64 | −0.127 −0.131 −0.116 −0.106 | 0.041 0.059 0.088 0.170 | 2.41 3.57 4.12 3.69 |
| 128 | −0.177 −0.181 −0.162 −0.139 | 0.063 0.079 0.112 0.188 | 2.44 3.58 4.19 3.69 |
| **256** | −0.182 −0.183 −0.163 −0.154 | 0.068 0.090 0.127 0.229 | 2.44 3.68 4.24 3.74 |
| 512 | −0.192 −0.193 −0.171 −0.159 | 0.068 0.091 0.124 0.239 | 2.44 3.71 4.18 3.74 |

256 is within ~0.01 of the whole validation set; 32 halves SSDC_RPI at layer 1. So the probe
stays at 256 (`analysis_options.probe_size` changes it), and the ≤ 10 % target holds only for large
validation sets (the geometry bullet under [Targets](#targets)).
"""

if __name__ == "__main__":
    raise SystemExit(main())
