"""FlexAttention against the dense reference for every bias PE, forward and backward, on the device at hand.

``attend(..., impl="auto")`` picks FlexAttention for the bias PEs (alibi, fire, lookhere, rpb) on CUDA in both
phases (``pebench.models.attention``); no test can check that path on the CPU-only CI (torch has no CPU
FlexAttention backward). This script is that check, run on a GPU machine:

    python -m benchmarks.flex_cuda_check [--tokens 1024] [--json FILE]

For each PE whose layer has a ``flex_score_mod``: the same q, k, v, x and coords (float32, batch 2, 4 heads
of 32, a square raster of ``--tokens`` patches plus one prefix token, padding in the second sequence) through
``impl="dense"`` and ``impl="flex"``; the output and the gradients of q, k, v and of the PE's parameters
(``(out * w).sum()`` with a fixed random ``w``) compared as max |a - b| / max |b|. A phase that raises is
reported with the exception's type and first line, not hidden. On CPU only the forward runs (no backward
there). Prints a markdown table; ``--json`` writes the rows.
"""
from __future__ import annotations

import argparse
import json
import math
import time

import torch

from pebench.encodings import build_pe, list_pes
from pebench.models import grid_coords
from pebench.models.attention import attend, bias_kind

HEADS, HEAD_DIM, BATCH, PREFIX = 4, 32, 2, 1


def _rel(a: torch.Tensor | None, b: torch.Tensor | None) -> float:
    if a is None or b is None:
        return float("nan") if (a is None) != (b is None) else 0.0
    return float((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-30))


def _run(layer, impl: str, inputs: tuple, w: torch.Tensor, grad: bool) -> tuple[torch.Tensor, list, float]:
    q, k, v, x, coords, key_mask = (t.detach().clone().requires_grad_(grad and t.is_floating_point()
                                                                      and t is not inputs[4])
                                    for t in inputs)
    for p in layer.parameters():
        p.grad = None
    if q.is_cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.set_grad_enabled(grad):
        out, used = attend(q, k, v, x, layer, coords, key_mask, scale=HEAD_DIM ** -0.5, impl=impl)
        if used != impl:
            raise RuntimeError(f"attend used {used}, not {impl}")
        grads: list = []
        if grad:
            (out * w).sum().backward()
            grads = [t.grad for t in (q, k, v)] + [p.grad for p in layer.parameters()]
    if q.is_cuda:
        torch.cuda.synchronize()
    return out.detach(), grads, time.perf_counter() - t0


def check(pe: str, tokens: int, device: torch.device) -> dict:
    side = int(math.isqrt(tokens))
    torch.manual_seed(0)
    layer = build_pe(pe, dim=HEADS * HEAD_DIM, num_heads=HEADS, depth=1, spatial_dims=2,
                     num_prefix_tokens=PREFIX, grid=(side, side)).to(device).layer(0)
    T = side * side + PREFIX
    g = torch.Generator(device="cpu").manual_seed(1)
    q, k, v = (torch.randn(BATCH, HEADS, T, HEAD_DIM, generator=g).to(device) for _ in range(3))
    x = torch.randn(BATCH, T, HEADS * HEAD_DIM, generator=g).to(device)
    coords = grid_coords((side, side)).to(device)  # (N, 2)
    key_mask = torch.ones(BATCH, T, dtype=torch.bool, device=device)
    key_mask[1, -(side + 3):] = False
    w = torch.randn(BATCH, HEADS, T, HEAD_DIM, generator=g).to(device)
    inputs = (q, k, v, x, coords, key_mask)
    grad = device.type == "cuda"
    row: dict = {"pe": pe, "tokens": T, "device": torch.cuda.get_device_name(device) if grad else "cpu",
                 "phase": "forward+backward" if grad else "forward"}
    _run(layer, "dense", inputs, w, grad)  # warm-up (the first call also fills caches such as FIRE's table)
    ref, ref_grads, t_dense = _run(layer, "dense", inputs, w, grad)
    row["dense_ms"] = round(1e3 * t_dense, 2)
    try:
        _run(layer, "flex", inputs, w, grad)  # compiles
        out, grads, t_flex = _run(layer, "flex", inputs, w, grad)
    except Exception as e:  # noqa: BLE001 - the point is to report it
        row["flex_error"] = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:300]}"
        return row
    row.update(flex_ms=round(1e3 * t_flex, 2), out_rel=_rel(out, ref))
    if grad:
        names = ["q", "k", "v"] + [n for n, _ in layer.named_parameters()]
        row["grad_rel"] = {n: _rel(a, b) for n, a, b in zip(names, grads, ref_grads)}
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=1024, help="patch tokens, a square (default: 1024)")
    ap.add_argument("--json", default=None, metavar="FILE", help="write the rows as JSON")
    args = ap.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    pes = []
    for pe in list_pes():
        try:
            layer = build_pe(pe, dim=HEADS * HEAD_DIM, num_heads=HEADS, depth=1, spatial_dims=2,
                             num_prefix_tokens=PREFIX, grid=(4, 4)).layer(0)
        except (TypeError, ValueError):
            continue
        if bias_kind(layer) == "flex":
            pes.append(pe)
    rows = [check(pe, args.tokens, device) for pe in pes]
    print(f"torch {torch.__version__}, {rows[0]['device'] if rows else device}")
    print("| PE | tokens | phase | dense ms | flex ms | output rel. diff | worst gradient rel. diff | flex error |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        gr = r.get("grad_rel") or {}
        worst = max(gr.items(), key=lambda kv: kv[1]) if gr else None
        print(f"| {r['pe']} | {r['tokens']} | {r['phase']} | {r.get('dense_ms', '')} | {r.get('flex_ms', '')} | "
              f"{r.get('out_rel', float('nan')):.2e} | {f'{worst[1]:.2e} ({worst[0]})' if worst else ''} | "
              f"{r.get('flex_error', '')} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
