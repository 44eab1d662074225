"""Why the bias PEs ``rpb`` and ``fire`` stay at chance on probe-decay and probe-context: the readout diagnosis.

In the committed probe sweep (``results/embedded/REPORT.md``) ``rpb`` (a learned offset table, Swin / BEiT) and
``fire`` (FIRE: a learned MLP of the normalised distance) learn neither probe in any of 10 seeds, like ``alibi``,
and the capacity check (:mod:`pebench.analysis.probe_capacity`) finds no symmetry that puts the labels out of their
reach. This script asks which of the two it is (cannot represent, or does not learn) with the machinery of
``benchmarks/alibi_diagnosis.py`` (its model builder, its oracle readouts, its loop's schedule), which located
ALiBi's failure on probe-decay in the mean-pooled readout (``results/alibi-study/REPORT.md``, finding 7).

It is a one-off diagnosis with oracle readouts, not a study: no ``bench run`` and no grid; a plain training loop in
one process on 1 thread, and heads that read tokens chosen from the scene records (so they are measuring
instruments, not methods). It writes one JSON file (``--out``, default ``results/bias-pe-readout/diagnosis.json``)
and the ``REPORT.md`` beside it, whose text is computed from that JSON alone (``report`` prints it again; a test
regenerates it byte for byte). Parts:

1. ``capacity``: :func:`pebench.analysis.probe_capacity.capacity` of each probe and PE, quoted.
2. ``float64``: the untrained ``vit-probe`` (torch seed 0) in float64 on the first 16 orbits of each probe's
   training split (data seed 0). The members of an orbit share every glyph and colour and differ in placement and
   label; per orbit, the largest difference of the logits between two of its members, then its smallest and
   largest value over the orbits. A PE whose model gives some orbit's members equal logits (to 1e-9, the capacity
   check's tolerance) is blind to what changes the label there; ``none`` must be (a control).
3. ``init``: on probe-decay's first 256 training scenes, at initialisation (torch seed 0, float32; the PEs and the
   initialisation variants of the runs): the within-orbit
   signal (as in the ALiBi diagnosis), and per block and head the bias gap seen from the ring token (bias towards
   the nearest glyph minus towards the other one, mean over scenes) and the spread (standard deviation) of the
   bias over all token pairs: how much position the PE puts into attention before training.
4. ``runs``: the readout runs. ALiBi's readout loop: torch seed = the run's seed (initialisation and batch order),
   data seed 0, 6400 training scenes, batches of 64, AdamW (betas 0.9, 0.999) at the run's learning rate, linear
   warm-up for 30 steps then constant, 300 steps; weight decay 0.05 on the parameters the recipe decays (matrices
   that the backbone does not exempt: ``rpb``'s tables are exempt, as in ``bench run``; ALiBi's loop decayed every
   matrix, which differs only for ``rpb``). Every 25 steps the mean batch loss since the previous evaluation and
   the accuracy on 512 fixed training scenes; at the end the accuracy on the 600 validation scenes. Readouts:
   ``mean`` (the recipe's head: the mean over all 100 tokens) and ``marker`` (the backbone's output at the marker
   glyph's token alone: the ring on probe-decay, the disc or ring whose radius counts on probe-context; the same
   linear head). Initialisation variants (probe-decay, seed 0, both readouts): ``rpb`` with ``table_init=alibi``
   (this script's, not an rpb option: every block's table set to ALiBi's bias of the offset, ``-slope_h |offset|``
   with ALiBi's published slopes, so the model starts with ALiBi's attention bias and can then learn any table), and
   ``fire`` with ``init_L=1`` (a published-form option: the progressive normalisation ``psi(max(L, R_i))`` active
   from the start, so the MLP's input spans [0, 1] on the 10 x 10 grid instead of [0, 0.2] with ``L = 512``).

"Learned": validation accuracy at least half way from the no-PE ceiling to 100 % (75 % on probe-decay, 66.7 % on
probe-context), as the probe study. ALiBi's and ``none``'s readout runs on probe-decay are quoted from
``results/alibi-study/diagnosis.json`` (copied into ``cited`` so the report reads one file). Timings are not recorded
(the machine was shared with training sweeps).

Usage: ``python -m benchmarks.bias_pe_readout measure [--out F] [--only WORD ...] [--steps N]`` (computes the
checks and every planned run not yet in ``--out`` whose key contains all the WORDs, saving after each run; ``--steps``
below 300 is for smoke tests and is recorded), ``python -m benchmarks.bias_pe_readout report [--out F]`` (prints the
report from the JSON).
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
from pathlib import Path
from typing import Any

PROBES = {"probe-decay": ("DecayProbeDataModule", 2, 0.5), "probe-context": ("ContextProbeDataModule", 3, 1 / 3)}
PES = ("rpb", "fire")
LEARNED_SHARE = 0.5
MARKER = {"probe-decay": "the ring token", "probe-context": "the marker token"}
STEPS, EVAL, WARMUP, BATCH, FIXED, WEIGHT_DECAY = 300, 25, 30, 64, 512, 0.05
F64_ORBITS, INIT_SCENES, TOL = 16, 256, 1e-9
ALIBI_JSON = "results/alibi-study/diagnosis.json"
#: per PE: the initialisation variant run and how the report names it
VARIANTS = {"rpb": ({"table_init": "alibi"}, "its tables initialised to ALiBi's bias (`table_init=alibi`)"),
            "fire": ({"init_L": 1.0}, "`init_L=1` (the normalisation active from the start)")}
#: (label, PE, options) of the models measured at initialisation
INIT_MODELS = [("none", "none", {}), ("rpb", "rpb", {}), ("rpb (table_init=alibi)", "rpb", {"table_init": "alibi"}),
               ("fire", "fire", {}), ("fire (init_L=1)", "fire", {"init_L": 1.0}), ("alibi", "alibi", {})]
#: (probe, PE, PE options, readout, lr, seed), in the order they are run (priority first)
PLAN: list[tuple[str, str, dict[str, Any], str, float, int]] = [
    *[("probe-decay", pe, {}, ro, 5e-3, s) for pe in PES for ro in ("mean", "marker") for s in (0, 1)],
    *[("probe-decay", "rpb", {"table_init": "alibi"}, ro, 5e-3, 0) for ro in ("marker", "mean")],
    *[("probe-decay", "fire", {"init_L": 1.0}, ro, 5e-3, 0) for ro in ("marker", "mean")],
    *[("probe-context", pe, {}, "marker", 5e-3, 0) for pe in (*PES, "none")],
    *[("probe-context", pe, {}, "mean", 5e-3, 0) for pe in PES],
]


def run_key(probe: str, pe: str, opts: dict[str, Any], readout: str, lr: float, seed: int) -> str:
    o = "".join(f"[{k}={v:g}]" if isinstance(v, float) else f"[{k}={v}]" for k, v in sorted(opts.items()))
    return f"{probe} {pe}{o} {readout} lr={lr:g} seed={seed}"


def threshold(probe: str) -> float:
    c = PROBES[probe][2]
    return c + LEARNED_SHARE * (1 - c)


# ----------------------------------------------------------------------------------------------- measuring
def _datamodule(probe: str):
    from pebench.datamodules.probes import probes

    return getattr(probes, PROBES[probe][0])(train_size=6400, val_size=600, test_size=8, data_seed=0)


def _stack(ds, n: int | None = None):
    import torch

    n = len(ds) if n is None else n
    return torch.stack([ds[i][0] for i in range(n)]), torch.tensor([ds[i][1] for i in range(n)])


def build(probe: str, pe: str, opts: dict[str, Any], seed: int = 0):
    """``alibi_diagnosis.build`` with the probe's number of classes (3 on probe-context)."""
    import torch

    from pebench.encodings.alibi import alibi_slopes
    from pebench.perf.model import PeClassifier

    from .alibi_diagnosis import IMG, PATCH

    opts = dict(opts)
    table_init = opts.pop("table_init", None)
    torch.manual_seed(seed)
    m = PeClassifier("vit-probe", pe, IMG, PATCH, num_classes=PROBES[probe][1], **opts)
    if table_init == "alibi":  # every block's table = ALiBi's bias of the offset: -slope_h * |offset|
        for layer in m.backbone.pe.layers:
            h, sy, sx = layer.table.shape
            dy = torch.arange(sy, dtype=torch.float32) - (sy - 1) // 2
            dx = torch.arange(sx, dtype=torch.float32) - (sx - 1) // 2
            dist = (dy[:, None] ** 2 + dx[None, :] ** 2).sqrt()  # (2G - 1, 2G - 1)
            with torch.no_grad():
                layer.table.copy_(-torch.tensor(alibi_slopes(h))[:, None, None] * dist)
    return m


def _within_orbit(logits, k: int) -> float:
    """Mean |centred logit - its orbit mean| over orbits of ``k`` consecutive scenes (ALiBi's, for any ``k``)."""
    c = logits - logits.mean(1, keepdim=True)
    orb = c.view(-1, k, c.shape[1])
    return (orb - orb.mean(1, keepdim=True)).abs().mean().item()


def capacity_part() -> dict[str, dict[str, str]]:
    from pebench.analysis.probe_capacity import capacity

    return {p: {pe: capacity(p, pe).reason for pe in (*PES, "alibi")} for p in PROBES}


def float64_part() -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {}
    for probe, (_, k, _) in PROBES.items():
        X, _ = _stack(_datamodule(probe).train_dataset(), F64_ORBITS * k)
        out[probe] = {}
        for pe in ("none", *PES, "alibi"):
            m = build(probe, pe, {}).double().eval()
            with torch.no_grad():
                o = m(X.double()).view(F64_ORBITS, k, -1)  # (orbits, k, C)
            gap = (o[:, :, None] - o[:, None, :]).abs().amax(dim=(1, 2, 3))  # (orbits,)
            out[probe][pe] = {"orbits": F64_ORBITS, "min_over_orbits": gap.min().item(),
                              "max_over_orbits": gap.max().item(), "separated": int((gap > TOL).sum())}
    return out


def init_part() -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    from .alibi_diagnosis import GRID, cells_of

    ds = _datamodule("probe-decay").train_dataset()
    X, Y = _stack(ds, INIT_SCENES)
    pairs = []  # (ring, near, far) token indices
    for i in range(INIT_SCENES):
        s = ds.scene(i)
        ring, disc, cross = (y * GRID + x for y, x in cells_of(s))
        pairs.append((ring, *((disc, cross) if s["label"] == 0 else (cross, disc))))
    idx = torch.tensor(pairs)
    out: dict[str, Any] = {}
    for name, pe, opts in INIT_MODELS:
        m = build("probe-decay", pe, opts)
        m.train()
        logits = m(X)
        F.cross_entropy(logits, Y).backward()
        grad = math.sqrt(sum(p.grad.pow(2).sum().item() for p in m.parameters() if p.grad is not None))
        rec: dict[str, Any] = {"within_orbit": _within_orbit(logits.detach(), 2), "grad_norm": grad, "heads": []}
        if pe != "none":
            tb = m.tokenizer(X[:1])
            with torch.no_grad():
                for layer in range(len(m.backbone.blocks)):
                    b = m.backbone.pe.layer(layer).bias(tb.coords)[0]  # (H, N, N)
                    for h in range(b.shape[0]):
                        gap = (b[h, idx[:, 0], idx[:, 1]] - b[h, idx[:, 0], idx[:, 2]]).mean().item()
                        rec["heads"].append({"layer": layer, "head": h, "bias_gap": gap, "bias_std": b[h].std().item()})
        out[name] = rec
    return out


def _optimiser(m, lr: float):
    import torch

    exempt = {f"backbone.{n}" for n in m.backbone.no_weight_decay()}
    decay, rest = [], []
    for name, p in m.named_parameters():
        skip = p.ndim <= 1 or name.endswith(".bias") or name in exempt
        (rest if skip else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": rest, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.999))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / WARMUP if s < WARMUP else 1.0)
    return opt, sched


def readout_run(run: tuple, data: dict[str, tuple], steps: int) -> dict[str, Any]:
    import torch

    from .alibi_diagnosis import train_step

    probe, pe, opts, readout, lr, seed = run
    m = build(probe, pe, opts, seed)

    def forward(x, tok):
        tb = m.tokenizer(x)
        t = m.backbone(tb.x, tb.coords, tb.grid, tb.mask)  # (B, 100, D)
        if readout == "mean":
            return m.head(t, tb.mask)
        return m.head(t[torch.arange(len(x)).unsqueeze(1), tok[:, :1]], None)  # the marker token's output

    X, Y, T = data["train"]
    opt, sched = _optimiser(m, lr)
    g = torch.Generator().manual_seed(seed)
    order: list[int] = []
    trace: list[dict[str, Any]] = []
    window: list[float] = []
    first_loss = math.nan
    for step in range(steps + 1):
        if step % EVAL == 0 or step == steps:
            m.eval()
            with torch.no_grad():
                o = forward(X[:FIXED], T[:FIXED])
            trace.append({"step": step, "acc": (o.argmax(1) == Y[:FIXED]).float().mean().item()})
            if window:
                trace[-1]["loss"] = sum(window) / len(window)  # mean batch loss since the previous evaluation
            window = []
        if step == steps:
            break
        window.append(train_step(m, opt, sched, forward, (X, Y, T), order, g, BATCH))
        if step == 0:
            first_loss = window[0]
    Xv, Yv, Tv = data["val"]
    m.eval()
    with torch.no_grad():
        val = (forward(Xv, Tv).argmax(1) == Yv).float().mean().item()
    return {"key": run_key(*run), "probe": probe, "pe": pe, "options": opts, "readout": readout, "lr": lr,
            "seed": seed, "steps": steps, "first_loss": first_loss, "trace": trace, "val_acc": val}


def _probe_data(probe: str) -> dict[str, tuple]:
    from .alibi_diagnosis import readout_tokens

    dm = _datamodule(probe)
    tr, va = dm.train_dataset(), dm.val_dataset()
    return {"train": (*_stack(tr), readout_tokens(tr, 0)), "val": (*_stack(va), readout_tokens(va, 0))}


def cited_runs() -> dict[str, Any]:
    """ALiBi's and ``none``'s readout runs on probe-decay (ring token and the recipe's mean, lr 5e-3)."""
    d = json.loads(Path(ALIBI_JSON).read_text())
    keep = {"alibi, ring token", "none, ring token (control)", "alibi, all 100 tokens (the recipe's mean)"}
    runs = [{"label": r["label"], "pe": r["pe"], "readout": {"ring": "marker"}.get(r["readout"], r["readout"]),
             "lr": r["lr"], "seed": r["seed"], "trace": [{"step": t["step"], "acc": t["acc"]} for t in r["trace"]],
             "val_acc": r["val_acc"]}
            for r in d["readout"]["runs"] if r["label"] in keep and r["lr"] == 5e-3]
    return {"source": ALIBI_JSON, "steps": d["readout"]["steps"], "runs": runs}


#: what the measurements depend on: uncommitted changes there are recorded
DEPENDS = ("benchmarks/alibi_diagnosis.py", "benchmarks/bias_pe_readout.py", "encodings", "models", "datamodules",
           "analysis", "bench/perf")


def provenance(before: dict[str, Any] | None = None) -> dict[str, Any]:
    """HEAD, the uncommitted files of :data:`DEPENDS`, every HEAD seen while measuring (``before``'s too), and the
    files of :data:`DEPENDS` that differ between the first and the last of them."""
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], capture_output=True, text=True).stdout

    head = git("rev-parse", "HEAD").strip()
    dirty = git("status", "--porcelain", "--untracked-files=all", "--", *DEPENDS).splitlines()
    commits = [c for c in (before or {}).get("commits", [(before or {}).get("commit", head)])]
    commits += [head] if head not in commits else []
    changed = git("diff", "--name-only", commits[0], head, "--", *DEPENDS).split() if len(commits) > 1 else []
    return {"commit": head, "commits": commits, "changed_between": sorted(changed),
            "uncommitted": sorted(line[3:] for line in dirty)}


def measure(out: Path, only: list[str], steps: int) -> None:
    import torch

    torch.set_num_threads(1)
    d = json.loads(out.read_text()) if out.exists() else {}
    d.update({"model": "vit-probe", "data_seed": 0, "train_scenes": 6400, "val_scenes": 600, "fixed_scenes": FIXED,
              "batch": BATCH, "warmup": WARMUP, "eval_every": EVAL, "weight_decay": WEIGHT_DECAY,
              "provenance": provenance(d.get("provenance"))})
    out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        out.write_text(json.dumps(d, indent=1) + "\n")
        (out.parent / "REPORT.md").write_text(report(d))

    for name, fn in (("capacity", capacity_part), ("float64", float64_part), ("init", init_part),
                     ("cited", cited_runs)):
        if name not in d:
            d[name] = fn()
            print(name, "done", flush=True)
    d.setdefault("runs", [])
    done = {r["key"] for r in d["runs"]}
    data: dict[str, dict[str, tuple]] = {}
    save()
    for run in PLAN:
        key = run_key(*run)
        if key in done or not all(w in key for w in only):
            continue
        if run[0] not in data:
            data = {run[0]: _probe_data(run[0])}  # one probe's tensors at a time
        r = readout_run(run, data[run[0]], steps)
        d["runs"].append(r)
        d["provenance"] = provenance(d["provenance"])
        save()
        print(key, r["trace"][-1], "val", r["val_acc"], flush=True)


# ----------------------------------------------------------------------------------------------- reporting
def pct(x: float) -> str:
    return f"{100 * x:.1f}"


def first_at(trace: list[dict[str, Any]], acc: float) -> str:
    return next((str(t["step"]) for t in trace if t["acc"] >= acc), "never")


def _label(r: dict[str, Any]) -> str:
    o = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(r.get("options", {}).items()))
    return f"`{r['pe']}`" + (f" ({o})" if o else "")


def _group(runs: list[dict[str, Any]], probe: str, pe: str, readout: str, lr: float = 5e-3,
           opts: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [r for r in runs if r.get("probe", "probe-decay") == probe and r["pe"] == pe and r["readout"] == readout
            and r["lr"] == lr and r.get("options", {}) == (opts or {})]


def _outcome(runs: list[dict[str, Any]], probe: str) -> str:
    k = sum(r["val_acc"] >= threshold(probe) for r in runs)
    return (f"learned in {k} of {len(runs)} seed{'s' if len(runs) != 1 else ''} (val "
            + " / ".join(pct(r["val_acc"]) for r in runs) + " %" + "".join(
                f"; seed {r['seed']} reached {pct(t['acc'])} % on the fixed training scenes at step {t['step']}, then "
                f"{pct(r['trace'][-1]['acc'])} % at step {r['trace'][-1]['step']}"
                for r in runs for t in [_peak(r)] if r["val_acc"] < threshold(probe) <= t["acc"]) + ")")


def _peak(r: dict[str, Any]) -> dict[str, Any]:
    return max(r["trace"], key=lambda t: t["acc"])


def _transient(runs: list[dict[str, Any]], probe: str) -> bool:
    """Some run that did not learn passed the learned line on the fixed training scenes during training."""
    return any(r["val_acc"] < threshold(probe) <= _peak(r)["acc"] for r in runs)


def _learned(runs: list[dict[str, Any]], probe: str) -> bool | None:
    """True if every run learned, False if none did, None if mixed or no runs."""
    if not runs:
        return None
    k = sum(r["val_acc"] >= threshold(probe) for r in runs)
    return True if k == len(runs) else False if k == 0 else None


def _verdict(d: dict[str, Any], pe: str) -> str:
    runs = d.get("runs", [])
    parts = []
    for probe in PROBES:
        f64 = d["float64"][probe][pe]
        rep = f64["separated"] == f64["orbits"]
        mean, marker = _group(runs, probe, pe, "mean"), _group(runs, probe, pe, "marker")
        lm, lk = _learned(mean, probe), _learned(marker, probe)
        if not rep:
            what = "cannot represent it (some orbit's members get equal float64 logits)"
        elif lk and lm is False:
            what = ("representable, and it does not learn it under the mean-pool readout: read at "
                    f"{MARKER[probe]} it {_outcome(marker, probe)}, through the mean it {_outcome(mean, probe)}")
        elif lk and not mean:
            what = (f"representable, and learnable: read at {MARKER[probe]} it {_outcome(marker, probe)}; "
                    "the mean readout was not run here (the probe sweep's 10 seeds stay at chance)")
        elif lk is False and lm is False:
            what = (f"representable, but through the mean it {_outcome(mean, probe)} and read at {MARKER[probe]} "
                    f"it {_outcome(marker, probe)}: not the readout alone")
        elif lk is False and not mean:
            what = (f"representable, but read at {MARKER[probe]} it {_outcome(marker, probe)}: not the readout "
                    "alone (the mean readout was not run here)")
        elif not marker:
            what = "representable; no readout run here (they did not fit this session's CPU share)"
        else:
            what = (f"representable; mixed: through the mean {_outcome(mean, probe) if mean else 'not run'}, at "
                    f"{MARKER[probe]} {_outcome(marker, probe)}")
        if rep:
            evidence = (f"representable (the untrained float64 model separates {f64['separated']} of "
                        f"{f64['orbits']} orbits, by at least {f64['min_over_orbits']:.1e})")
            what = what.replace("representable", evidence, 1)
        opts, desc = VARIANTS[pe]
        vk, vm = _group(runs, probe, pe, "marker", opts=opts), _group(runs, probe, pe, "mean", opts=opts)
        if vk or vm:
            what += (f". With {desc}: " + ", ".join(x for x in (
                f"read at {MARKER[probe]} it {_outcome(vk, probe)}" if vk else "",
                f"through the mean it {_outcome(vm, probe)}" if vm else "") if x))
            if lk is False and _learned(vk, probe) and _learned(vm, probe) is not True:
                what += (". So two things keep it at chance here: its near-zero initial bias, which reading "
                         f"{MARKER[probe]} alone does not get past within the budget, and, once that is removed, the "
                         "mean-pool readout" + (" (as for ALiBi)" if _learned(vm, probe) is False else ""))
            elif lk is False and _learned(vk, probe) is False and _transient(vk, probe):
                what += (". That initialisation took it off chance for a while but the gain did not hold (one seed): "
                         "the near-flat initial bias is implicated, not established")
            elif lk is False and _learned(vk, probe) is False:
                what += ". That initialisation does not change it either: the cause is not located by these runs"
        parts.append(f"on `{probe}` {what}")
    return f"- **`{pe}`**: " + "; ".join(parts) + "."


def report(d: dict[str, Any]) -> str:
    prov = d["provenance"]
    runs = d.get("runs", [])
    short = sorted({r["steps"] for r in runs if r["steps"] != STEPS})
    L = ["# rpb and fire on probe-decay and probe-context: cannot represent, or do not learn?", "",
         "Generated by `python -m benchmarks.bias_pe_readout` from `diagnosis.json` (beside this file). Do not edit by "
         "hand. A one-off diagnosis with oracle readouts (the head reads a token chosen from the scene record), in the "
         "plain training loop of `benchmarks/alibi_diagnosis.py`; not a study (no `bench run`). Measured at commit"
         + (f" `{prov['commit'][:7]}`" if len(prov.get("commits", [])) < 2 else
            "s " + ", ".join(f"`{c[:7]}`" for c in prov["commits"]) + " (HEAD moved while it ran; between them "
            + (", ".join(f"`{f}`" for f in prov["changed_between"]) + " changed" if prov["changed_between"] else
               "none of the files it depends on changed") + ")")
         + (" with uncommitted changes in " + ", ".join(f"`{p}`" for p in prov["uncommitted"]) if prov["uncommitted"]
            else "") + "." + (f" {d['note']}" if d.get("note") else ""), "",
         "## Verdicts", ""]
    L += [_verdict(d, pe) for pe in PES]
    L += ["", "Each readout ran 1 or 2 seeds on one data seed: a located cause, not a verdict on 10 seeds"
          + (f"; runs of {', '.join(map(str, short))} steps are smoke tests" if short else "") + ".", "",
          "## Capacity (`pebench.analysis.probe_capacity.capacity`)", "",
          "| probe | PE | `capacity(probe, PE).reason` |", "|---|---|---|"]
    for probe, row in d["capacity"].items():
        for pe, reason in row.items():
            L.append(f"| `{probe}` | `{pe}` | {reason} |")
    L += ["", "No symmetry is declared for these two probes (`BREAKERS` lists none), so the check above computes "
          "nothing for them. **Float64 check** (this script): the untrained `vit-probe` (torch seed 0) in float64 on "
          f"the first {F64_ORBITS} orbits of the training split (data seed 0); per orbit the largest logit difference "
          f"between two members (same glyphs and colours, other places, other labels); an orbit counts as separated "
          f"above {TOL:g}.", "",
          "| probe | PE | smallest over orbits | largest over orbits | orbits separated |", "|---|---|---:|---:|---:|"]
    for probe, row in d["float64"].items():
        for pe, v in row.items():
            L.append(f"| `{probe}` | `{pe}` | {v['min_over_orbits']:.2e} | {v['max_over_orbits']:.2e} | "
                     f"{v['separated']} of {v['orbits']} |")
    L += ["", f"**At initialisation** (float32, torch seed 0, the first {INIT_SCENES} probe-decay training scenes): "
          "within-orbit signal (mean absolute difference of the centred logits between the two members of an orbit), "
          "gradient norm of the loss, and per head the bias gap seen from the ring (towards the nearest glyph minus "
          "towards the other; mean over scenes) and the standard deviation of the bias over all token pairs.", "",
          "| PE | within-orbit signal | gradient norm | bias gap per head (block 0; block 1) | bias std per head "
          "(block 0; block 1) |", "|---|---:|---:|---|---|"]
    for pe, v in d["init"].items():
        def per_block(field: str, fmt: str) -> str:
            blocks = sorted({h["layer"] for h in v["heads"]})
            return "; ".join(", ".join(format(h[field], fmt) for h in v["heads"] if h["layer"] == b) for b in blocks)
        L.append(f"| {pe} | {v['within_orbit']:.2e} | {v['grad_norm']:.4f} | "
                 f"{per_block('bias_gap', '.3f') if v['heads'] else '-'} | "
                 f"{per_block('bias_std', '.3f') if v['heads'] else '-'} |")
    L += ["", "## Readout runs", "",
          f"Torch seed = the run's seed, data seed {d['data_seed']}, {d['train_scenes']} training scenes, batches of "
          f"{d['batch']}, AdamW, linear warm-up for {d['warmup']} steps then a constant learning rate, weight decay "
          f"{d['weight_decay']:g} on the matrices the recipe decays. Accuracy % on {d['fixed_scenes']} fixed training "
          f"scenes every {2 * d['eval_every']} steps, the loss of the first batch and the mean batch loss of the last "
          f"{d['eval_every']} steps (ln 2 = 0.6931, ln 3 = 1.0986), the first evaluated "
          f"step (every {d['eval_every']}) at ≥ 75 % and at the probe's learned line, and the accuracy on the "
          f"{d['val_scenes']} validation scenes at the end. `mean`: the recipe's head (mean over all 100 tokens); "
          "`marker`: the backbone's output at the marker's token alone (the ring on probe-decay; the disc or ring "
          "whose radius counts on probe-context).", ""]
    for probe in PROBES:
        pr = [r for r in runs if r["probe"] == probe]
        if not pr:
            continue
        steps = [t["step"] for t in pr[0]["trace"]][::2]
        L += [f"### `{probe}` (ceiling without position {pct(PROBES[probe][2])} %, learned: val ≥ "
              f"{pct(threshold(probe))} %)", "",
              "| PE | readout | lr | seed | " + " | ".join(f"step {s}" for s in steps)
              + " | loss, first batch | loss, last 25 steps | first ≥ 75 % | first ≥ learned line | val % "
              "| learned |",
              "|---|---|---:|---:|" + "---:|" * (len(steps) + 5) + "---|"]
        for r in pr:
            acc = {t["step"]: t["acc"] for t in r["trace"]}
            L.append(f"| {_label(r)} | {r['readout']} | {r['lr']:g} | {r['seed']} | "
                     + " | ".join(pct(acc[s]) if s in acc else "" for s in steps)
                     + f" | {r['first_loss']:.4f} | {r['trace'][-1]['loss']:.4f} | {first_at(r['trace'], 0.75)} | "
                     f"{first_at(r['trace'], threshold(probe))} | {pct(r['val_acc'])} | "
                     f"{'yes' if r['val_acc'] >= threshold(probe) else 'no'} |")
        L.append("")
    c = d["cited"]
    L += [f"**Quoted from `{c['source']}`** (ALiBi's readout runs on probe-decay, the same loop and schedule, "
          f"{c['steps']} steps, lr 5e-3; its loop decayed every matrix):", "",
          "| run | readout | seed | first ≥ 75 % | val % | learned |", "|---|---|---:|---:|---:|---|"]
    for r in c["runs"]:
        L.append(f"| {r['label']} | {r['readout']} | {r['seed']} | {first_at(r['trace'], 0.75)} | "
                 f"{pct(r['val_acc'])} | {'yes' if r['val_acc'] >= threshold('probe-decay') else 'no'} |")
    missing = [run_key(*p) for p in PLAN if run_key(*p) not in {r["key"] for r in runs}]
    L += ["", "## Not run", "",
          ("Planned runs not in `diagnosis.json` (they did not fit the session's CPU share; `measure --only ...` "
           "adds them): " + "; ".join(f"`{k}`" for k in missing) + ". Nothing above is claimed about them."
           if missing else "Every planned run is in `diagnosis.json`."), ""]
    return "\n".join(L)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("measure", "report"))
    ap.add_argument("--out", type=Path, default=Path("results/bias-pe-readout/diagnosis.json"))
    ap.add_argument("--only", nargs="*", default=[], help="run only planned runs whose key contains every word")
    ap.add_argument("--steps", type=int, default=STEPS)
    args = ap.parse_args()
    if args.action == "measure":
        measure(args.out, args.only, args.steps)
    else:
        print(report(json.loads(args.out.read_text())), end="")


if __name__ == "__main__":
    main()
