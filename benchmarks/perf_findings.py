"""Write docs/performance.md from the committed performance measurements.

    python -m benchmarks.perf_findings [--perf docs/perf.json] [--attention docs/perf_attention.json]
        [--peers docs/perf_peers.json] [--contention docs/perf_contention.json] [--analyze docs/perf_analyze.json]
        [--doc docs/performance.md]

``--perf`` is the JSON of ``bench perf all`` (records ``{"name", "suite", "a_value", "b_value", "ratio",
"target", "meets_target", "higher_is_better", ...}``), ``--attention`` the JSON of ``bench perf
attention`` (rows ``{"pe", "variant", "impl", "phase", "auto", "n_tokens", "time_ms", "peak_mem_mb", ...}``).
The page's prose is fixed (`perf_findings_page.md`, beside this file); every number in it is read from those files: the
targets met and missed, the training step of every PE against ``none`` with the cost of its attention
layer, the attention layer at the largest token count measured, and the floors that explain the misses.
``--peers`` (``bench perf peers --json``), ``--contention`` (``bench perf contention --json``) and ``--analyze``
(``bench perf analyze --json``) are read when the files exist (their sections say "not measured" otherwise).
"""
from __future__ import annotations

import argparse
import json
import math
import re
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


def _overhead_rows(perf: list[dict]):
    """``pe-overhead`` training-step records as ``(pe, tokens, record)``."""
    for r in perf:
        if r["suite"] == "pe-overhead" and r["name"].startswith("pe-overhead train"):
            yield r["a"].removeprefix("pe="), int(r["name"].split("(")[1].split()[0]), r


def flop_floors(perf: list[dict]) -> dict[str, dict[int, float]]:
    """``pe-overhead``'s FLOP floor per PE and token count (``none``'s counted FLOPs per step over the PE's)."""
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for pe, tokens, r in _overhead_rows(perf):
        if "flop_floor" in r:
            out[pe][tokens] = r["flop_floor"]
    return dict(out)


def step_ratios(perf: list[dict]) -> dict[str, dict[int, tuple[float, list[float]]]]:
    """``pe-overhead`` training-step ratios (samples/s against ``none``): PE -> tokens -> (ratio of the
    medians, per-round ratios; ``[ratio]`` when the record has no rounds)."""
    out: dict[str, dict[int, tuple[float, list[float]]]] = defaultdict(dict)
    for pe, tokens, r in _overhead_rows(perf):
        out[pe][tokens] = (r["ratio"], list(r.get("round_ratios") or [r["ratio"]]))
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
    # the threshold the run sorted its PEs by (records before 2026-12-06 carry it in the heavy PEs' notes only)
    heavy = {float(r["heavy_step"]) for r in perf if r["suite"] == "pe-overhead" and "heavy_step" in r} or \
        {float(m.group(1)) for r in perf if r["suite"] == "pe-overhead"
         for m in [re.search(r"its step > ([0-9.]+)x none's", r.get("note") or "")] if m}
    if len(heavy) == 1:
        lines += ["", f"*alone*: timed in its own interleave with `none` (fewer rounds), because its warm-up step "
                  f"took over {heavy.pop():g}× `none`'s: in one shared round, the memory such steps free slowed the "
                  "candidates after them."]
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


def _augment_sentence(perf: list[dict]) -> str:
    """What PaPE's q augmentation costs in the budget's layer: the step with that augmentation held constant
    (``attention-budget``), against the real step and the time the 1.15x budget allows."""
    held = _record(perf, "attention fwd+bwd N=1024 d=64 pape, augmentation held constant")
    budget = _record(perf, "attention fwd+bwd N=1024 d=64 pape vs rope-axial")
    if not (held and budget):
        return ""
    cost = budget["a_value"] - held["a_value"]
    allowed = budget["target"] * budget["b_value"] - held["a_value"]
    return (f" With its q augmentation held constant (computed once, without gradient, and reused) the layer costs "
            f"{_r(held['ratio'])}× RoPE-axial's: the augmentation's forward and backward take {cost:.2f} ms of PaPE's "
            f"{budget['a_value']:.2f} ms, where the {budget['target']:g}× budget leaves "
            + (f"{allowed:.2f} ms above that step." if allowed > 0 else "nothing above that step."))


def misses(perf: list[dict], attn: list[dict], peers: list[dict] | None = None) -> str:
    """Generated sentences: what each missed CPU target costs and the floor beneath it (LieRE's floor and its
    comparison with the official algorithm from ``peers``, when given)."""
    auto = auto_rows(attn)
    out = []
    steps = step_ratios(perf)
    slow = {pe: by_n for pe, by_n in steps.items() if step_verdict(by_n.values()) != "met"}
    low = {pe: b for pe, b in flop_floors(perf).items() if pe in slow and min(b.values()) < STEP_TARGET + 0.05}
    if low:
        cells = "; ".join(f"{pe} {', '.join(f'{_r(x)} at {n}' for n, x in sorted(b.items()))} tokens" for pe, b in low.items())
        out.append(f"* **FLOP floor** (`none`'s counted FLOPs per step over the PE's): {cells}. At or below "
                   f"{STEP_TARGET + 0.05:g} the target asks small per-token maps to run as efficiently as the backbone's "
                   "largest products; below it, no exact implementation whose time follows its FLOPs meets it.")
    if "liere" in slow and step_verdict(slow["liere"].values()) == "missed":
        t, m = layer_ratio(auto, "liere", "train", 1024), layer_ratio(auto, "liere", "train", 1024, "peak_mem_mb")
        out.append("* **LieRE** computes a matrix exponential per token, head and layer (non-commuting `d x d` "
                   "generators) and its backward: the method's defining computation, not an overhead around it"
                   + (f"; one attention layer at N = 1,024 costs {_r(t)}× the time and {_r(m)}× the memory of `none`'s "
                      "(`bench perf attention`)" if t is not None else "") + ". The ratio improves with the batch size."
                   + _liere_peer_sentence(peers or []))
    floor = _record(perf, "attention fwd+bwd N=1024 d=64 kernel floor")
    vs_none = _record(perf, "attention fwd+bwd N=1024 d=64 pape vs none")
    if "pape" in slow and step_verdict(slow["pape"].values()) == "missed" and floor and vs_none:
        out.append(f"* **PaPE** adds per-token work (its `A x` map to m = 50 parabolas per head, the softplus, the "
                   f"fold into q) and a wider SDPA head (5 extra dims for 2-D coordinates, padded to a multiple of 8): one attention layer at N = 1,024 "
                   f"costs {_r(vs_none['ratio'])}× `none`'s, of which the wider kernel alone, with no PE work, is "
                   f"{_r(floor['ratio'])}× RoPE-axial's (`attention-budget`, *kernel floor*)." + _augment_sentence(perf))
    verdicts = {pe: step_verdict(by_n.values()) for pe, by_n in slow.items()}
    def desc(pes: list[str]) -> str:
        return "; ".join(f"{pe} {', '.join(f'{_r(v[0])} at {n}' for n, v in sorted(slow[pe].items()))} tokens" for pe in pes)

    biased = [pe for pe in ("rpb", "fire") if verdicts.get(pe) == "missed"]
    if biased:
        n = min((m for pe, phase, m in auto if pe in biased and phase == "train"), default=None)
        layer = ", ".join(f"{pe} {_r(x)}×" for pe in biased
                          for x in [layer_ratio(auto, pe, "train", n) if n else None] if x is not None)
        out.append(f"* **{', '.join(biased)}** ({desc(biased)}): a learned bias, built as a `(H, N, N)` tensor each step "
                   "with its gradient (`bias-flash`: the flash kernel forward, the backward written out with `P`)"
                   + (f". torch's CPU flash kernel returns no gradient for its mask, so that backward holds `P` and `dS` "
                      f"as `(B, H, N, N)` tensors, which the flash backward of `none` never forms: one attention layer "
                      f"at N = {n:,} trains in {layer} `none`'s time (`bench perf attention`)" if layer else "") + ".")
    learned = [pe for pe in ("rope-mixed", "string", "comrope") if verdicts.get(pe) == "missed"]
    if learned:
        out.append(f"* **{', '.join(learned)}** ({desc(learned)}): learned frequencies, so the phases and their gradient (a "
                   "complex product per token and channel pair) are recomputed every step (RoPE-axial caches its "
                   "phases); STRING's and ComRoPE's bases are folded into the q/k weights (`fold_basis`), and each "
                   "PE computes every layer's tables in one batch per forward.")
    unsure = [pe for pe, v in verdicts.items() if v == "inconclusive"]
    if unsure:
        out.append(f"* **{', '.join(unsure)}**: inconclusive, the interval over rounds contains the target "
                   "(table below).")
    teacher = _record(perf, "dino teacher forward vit-nano12 b64 2x32px + 4x16px")
    step = _record(perf, "dino train step vit-nano12 b64 2x32px + 4x16px")
    rest = _record(perf, "dino step without its teacher forward vit-nano12 b64 2x32px + 4x16px")
    if teacher and step and rest and not step["meets_target"]:
        # a floor only where the rest of the step costs at least the classification steps: the rest holds the
        # student's forward and backward on the same crops, but also differs from them (head, loss, no classifier)
        bound = float(step["target"]) - float(teacher["ratio"])
        floor = (f"so no implementation whose other work matched the classification steps gets below "
                 f"{_r(1 + teacher['ratio'])}×" if rest["ratio"] >= 1 else
                 f"so the target asks the rest of the step to cost at most {_r(bound)} of them")
        out.append(f"* **DINO's step** is {_r(step['ratio'])}× the classification steps on the same crops (target "
                   f"{_bound(step)}): the teacher's forward on the 2 global crops, which DINO cannot skip, alone "
                   f"costs {_r(teacher['ratio'])} of them, {floor}; the step without it is {_r(rest['ratio'])}× "
                   f"({_bound(rest)}).")
    geo = [r for r in perf if r["name"].startswith("analysis geometry")]
    if geo and not all(r["meets_target"] for r in geo):
        sizes = ", ".join(f"{_r(r['ratio'])}× with {r['name'].split('val ')[1].split(',')[0]} validation samples"
                          for r in geo)
        out.append("* **The geometry analysis** is a fixed number of passes over a fixed 256-sample probe (1 + 2K forwards "
                   f"with the default RPI protocol), so its cost against a validation epoch falls with the validation set: "
                   f"{sizes} (target {_bound(geo[0])}); at a fixed cost it would be met from about {_needed(geo):,} "
                   "validation samples (extrapolated linearly from the largest set measured). The probe cannot shrink "
                   "without biasing SSDC (below).")
    wall = _record(perf, "perf wall time all suites")
    if wall and wall.get("meets_target") is False:
        suites = sorted((r for r in perf if r["name"].startswith("perf wall time ") and r.get("suite") != "all"),
                        key=lambda r: -r["a_value"])
        parts = ", ".join(f"{r['suite']} {r['a_value']:.0f} s" for r in suites)
        out.append(f"* **`bench perf all`** took {wall['a_value']:.0f} s against its {wall['b_value']:g} s budget: "
                   f"{parts} (each suite's wall time in [`perf.md`](perf.md), largest first).")
    return "\n".join(out) or "Every measured CPU target is met."


def _liere_peer_sentence(peers: list[dict]) -> str:
    """LieRE's floor (the matrix exponential's share of the layer's training step) and the official algorithm's
    comparison, from ``bench perf peers``; empty without them."""
    floor = next((r for r in peers if r["name"].startswith("peers train floor ") and "liere" in r["name"]), None)
    vs = next((r for r in peers if r["name"].startswith("peers train ") and "LieRE's official algorithm" in r["name"]
               and " peak memory " not in r["name"]), None)
    if floor is None:
        return ""
    out = (f" In one attention layer's training step (`bench perf peers`), the per-token matrix exponential and its "
           f"backward alone take {floor['ratio']:.0%}: the floor of any implementation that computes them with "
           "`torch.linalg.matrix_exp`")
    if vs is not None:
        iv = vs.get("interval95")
        out += (f"; pebench's step runs at {_r(vs['ratio'])}×" + (f" [{_r(iv[0])}, {_r(iv[1])}]" if iv else "")
                + " the official algorithm's (its rotations broadcast over the batch, its exponential's own backward)")
    return out + "."


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
    split = {r["name"].removeprefix("peers train ").split(" split ", 1)[0]: r for r in peers
             if r["name"].startswith("peers train ") and " split " in r["name"] and " rpb vs " in r["name"]}
    if {"forward", "backward"} <= set(split):
        f, b = split["forward"], split["backward"]

        def cmp(r: dict) -> str:
            return "faster" if r["a_value"] < r["b_value"] else "slower" if r["a_value"] > r["b_value"] else "as fast"
        lines += ["", f"Where the `rpb` training step's time goes ({f['note']}): pebench's forward is {cmp(f)} than "
                  f"timm's ({f['a_value']:.2f} ms against {f['b_value']:.2f} ms), its backward {cmp(b)} "
                  f"({b['a_value']:.2f} ms against {b['b_value']:.2f} ms). `bias-flash` runs the flash kernel forward, "
                  "which keeps no "
                  "attention matrix, and recomputes `P` in its backward; timm's mask, which needs a gradient, sends "
                  "SDPA to its math path, which keeps `P` from its forward for the backward (one `(B, H, N, N)` "
                  "tensor held between the two; in pebench, `attention_impl=dense` is that path)."]
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
            fair = f" (fair share {r['fair_share']:g}×)" if r.get("fair_share") else ""  # records since 2026-12-06
            lines.append(f"| {r['name'].removeprefix('contention ')}{fair} | {ratio(r)} | {_bound(r)}× | "
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
            f"is read from those files." + _commits_sentence(perf, attn))


def _commits_sentence(perf: list[dict], attn: list[dict]) -> str:
    """The code the two files were measured with (their records' ``commit``; records before 2026-12-06 have none)."""
    def commits(rows: list[dict]) -> str:
        found = sorted({str(r["commit"]) for r in rows if r.get("commit")})
        return " and ".join(f"`{c}`" for c in found)
    a, b = commits(perf), commits(attn)
    if not (a or b):
        return ""
    return (" Measured at commit " + (f"{a} (`bench perf all`)" if a else "") + (", " if a and b else "")
            + (f"{b} (`bench perf attention`)" if b else "") + ".")


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
              targets=targets_table(perf, attn), misses=misses(perf, attn, peers), overhead=overhead_table(perf),
              large_n=large_n_table(attn), peers=peers_table(peers), contention=contention_table(contention),
              analyze=analyze_section(analyze)),
         args.doc)
    return 0


#: the page's fixed prose, with ``@@BLOCK@@`` markers that :func:`main` fills from the measurements
PAGE = (Path(__file__).parent / "perf_findings_page.md").read_text(encoding="utf-8")

if __name__ == "__main__":
    raise SystemExit(main())
