"""PointROPE (LitePT, arXiv 2512.13689; code prs-eth/LitePT) against ``rope-axial``, in float64.

The reference is a port, written here, of the official CPU kernel ``pointrope_cpu`` in
``libs/pointrope/pointrope.cpp`` (the CUDA kernel ``kernels.cu`` computes the same): per token and head, axis
``a`` in ``x, y, z`` (column ``a`` of the integer positions) owns the channel block ``[2aQ, 2aQ + 2Q)`` with
``Q = d // 6``; for ``k < Q`` it rotates ``u = t[2aQ + k]``, ``v = t[2aQ + Q + k]`` by the angle
``F0 * p_a / base^(k / Q)`` (``F0 = 1``; the backward pass uses ``-F0``): ``u' = u cos - v sin``,
``v' = v cos + u sin``; channels from ``6Q`` on are left alone. LitePT calls it with ``freq = 100`` (every
config) on ``point.grid_coord``: Pointcept's ``GridSample`` ``floor(c / s) - min`` (``s``: 0.02 m ScanNet, 0.05 m
nuScenes), integer-divided by 2 at each pooling stage.

What this establishes: PointROPE is rope-axial (axial layout, ``p = 3``, ``base = freq``) on coordinates in cell
units, through a fixed channel permutation, exactly when the coordinates lie on the voxel grid; on continuous
coordinates rope-axial on ``c / s`` is PointROPE without the rounding to cells (it differs off the grid).
"""
from __future__ import annotations

import json

import pytest
import torch

from pebench.cli import main
from pebench.encodings import build_pe
from pebench.runner.config import load_preset, merge, preset_info

H = 2


def pointrope_ref(tokens: torch.Tensor, positions: torch.Tensor, base: float, F0: float = 1.0) -> torch.Tensor:
    """Port of LitePT's ``pointrope_cpu``: tokens ``(B, H, N, d)`` (the layout ``PointROPE.forward`` takes),
    integer positions ``(B, N, 3)`` -> rotated tokens (a copy; the kernel works in place)."""
    d = tokens.shape[-1]
    Q = d // 6
    out = tokens.clone()
    for axis in range(3):
        p = positions[:, None, :, axis].to(torch.int64).double()  # (B, 1, N): the kernel reads int64 positions
        for k in range(Q):
            ang = F0 * p / base ** (k / Q)
            c, s = torch.cos(ang), torch.sin(ang)
            iu, iv = k + axis * 2 * Q, k + Q + axis * 2 * Q
            u, v = tokens[..., iu], tokens[..., iv]
            out[..., iu] = u * c - v * s
            out[..., iv] = v * c + u * s
    return out


def to_pairs(t: torch.Tensor) -> torch.Tensor:
    """PointROPE's channels -> rope-axial's: pair ``aQ + k`` = (channel ``2aQ + k``, channel ``2aQ + Q + k``);
    channels from ``6Q`` on stay where they are."""
    d = t.shape[-1]
    Q = d // 6
    order = []
    for a in range(3):
        for k in range(Q):
            order += [2 * a * Q + k, 2 * a * Q + Q + k]
    order += list(range(6 * Q, d))
    return t[..., order]


def voxel_positions(c: torch.Tensor, s: float, stage: int = 0) -> torch.Tensor:
    """Pointcept's GridSample grid_coord (floor(c / s) minus its minimum), pooled ``stage`` times by 2."""
    g = torch.floor(c / s).to(torch.int64)
    g = g - g.amin(dim=1, keepdim=True)
    return torch.div(g, 2 ** stage, rounding_mode="trunc")


@pytest.mark.parametrize("d", [12, 18, 24, 32])  # 32: d % 6 = 2 channels left unrotated by both
@pytest.mark.parametrize("base", [100.0, 10.0, 1000.0])
def test_pointrope_is_rope_axial_on_voxel_coordinates(d, base):
    gen = torch.Generator().manual_seed(0)
    c = torch.rand(2, 40, 3, generator=gen, dtype=torch.float64) * 3.0  # metres
    pe = build_pe("rope-axial", dim=H * d, num_heads=H, depth=1, spatial_dims=3, base=base).double()
    for s, stage in ((0.02, 3), (0.05, 0), (0.1, 2)):  # pooled cells: anchored at the scene's minimum voxel
        pos = voxel_positions(c, s, stage)  # (B, N, 3) int64
        q, k = (torch.randn(2, H, 40, d, generator=gen, dtype=torch.float64) for _ in range(2))
        want_q, want_k = pointrope_ref(q, pos, base), pointrope_ref(k, pos, base)
        got_q, got_k = pe.layer(0).qk(to_pairs(q), to_pairs(k), None, pos.double())
        torch.testing.assert_close(got_q, to_pairs(want_q), rtol=0, atol=1e-12)
        torch.testing.assert_close(got_k, to_pairs(want_k), rtol=0, atol=1e-12)
        if stage == 0:  # the logits need no permutation, and the grid's origin (the scene's minimum cell) cancels
            aq, ak = pe.layer(0).qk(to_pairs(q), to_pairs(k), None, torch.floor(c / s))
            torch.testing.assert_close(aq @ ak.transpose(-1, -2), want_q @ want_k.transpose(-1, -2), rtol=0,
                                       atol=1e-10)


def test_backward_rotation_is_the_inverse():
    """The kernel's backward (``-F0``) undoes the forward: the rotation is orthogonal, as rope-axial's."""
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(1, H, 10, 18, generator=gen, dtype=torch.float64)
    pos = torch.randint(0, 50, (1, 10, 3), generator=gen)
    torch.testing.assert_close(pointrope_ref(pointrope_ref(q, pos, 100.0), pos, 100.0, F0=-1.0), q, rtol=0,
                               atol=1e-12)


def test_on_continuous_coordinates_only_the_grid_points_agree():
    """rope-axial on ``c / s`` equals PointROPE on the cells where ``c / s`` is an integer; elsewhere the cell
    rounding changes the logits."""
    d, s = 18, 0.05
    pe = build_pe("rope-axial", dim=H * d, num_heads=H, depth=1, spatial_dims=3).double()
    gen = torch.Generator().manual_seed(2)
    q, k = (torch.randn(1, H, 30, d, generator=gen, dtype=torch.float64) for _ in range(2))
    on_grid = torch.randint(-40, 40, (1, 30, 3), generator=gen).double() * s  # points on voxel corners
    off_grid = on_grid + torch.rand(1, 30, 3, generator=gen, dtype=torch.float64) * s * 0.9
    for c, agree in ((on_grid, True), (off_grid, False)):
        want = pointrope_ref(q, torch.floor(c / s + 1e-9), 100.0) @ pointrope_ref(k, torch.floor(c / s + 1e-9),
                                                                                   100.0).transpose(-1, -2)
        aq, ak = pe.layer(0).qk(to_pairs(q), to_pairs(k), None, c / s)
        diff = float((aq @ ak.transpose(-1, -2) - want).abs().max())
        assert (diff < 1e-9) == agree, diff


# ------------------------------------------------------------------------------------------ presets
POINTROPE_PRESETS = {"scannet-pointrope": 1 / (0.02 * 8), "nuscenes-pointrope": 1 / (0.05 * 8),
                     "primitives-scene-pointrope": 1 / (0.1 * 8), "modelnet40-pointrope": None,
                     "primitives-pointrope": None}


@pytest.mark.parametrize("name", list(POINTROPE_PRESETS))
def test_pointrope_presets_are_rope_axial_in_litepts_units(name):
    cfg, info = merge(load_preset(name)), preset_info(name)
    assert cfg.pe == "rope-axial" and cfg.pe_options == {"base": 100.0, "layout": "axial"}
    assert "PointROPE" in info["description"] and "LitePT" in info["follows"]
    scale = POINTROPE_PRESETS[name]
    if scale is not None:  # segmentation: PE units = the cells of LitePT's first attention stage (2^3 voxels)
        assert cfg.task_options["coord_scale"] == pytest.approx(scale)
    else:
        assert "coord_scale" not in cfg.task_options


@pytest.mark.slow
@pytest.mark.parametrize("name,dataset", [("primitives-pointrope", "primitives"),
                                          ("primitives-scene-pointrope", "primitives-scene")])
def test_embedded_pointrope_presets_run(name, dataset, tmp_path):
    out = tmp_path / "runs"
    rc = main(["run", "--preset", name, "--fast-dev-run", "--model", "vit-nano", "--batch-size", "2",
               "--num-workers", "0", "--precision", "32-true", "--analyses", "none", "--no-progress-bar",
               "--accelerator", "cpu", "--out", str(out)])
    assert rc in (0, None)
    res = json.loads(next(out.glob(f"{dataset}/rope-axial/**/results.json")).read_text())
    assert res["status"] == "complete" and res["pe"] == "rope-axial"
