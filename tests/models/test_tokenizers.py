"""Tokenizers: shapes, coords, the patch each token comes from, FPS/kNN against brute force."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pebench.models import (
    ImageTokenizer,
    PointTokenizer,
    ResolutionError,
    TubeletTokenizer,
    farthest_point_sample,
    grid_coords,
    knn_group,
)


def test_grid_coords_row_major():
    c = grid_coords((2, 3))
    assert c.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    assert grid_coords((2, 2, 2)).shape == (8, 3)


@pytest.mark.parametrize("side", [16, 24, 40])
def test_image_tokens_sit_at_their_patch(side):
    torch.manual_seed(0)
    tok = ImageTokenizer(embed_dim=8, patch_size=4)
    img = torch.randn(2, 3, side, side)
    tb = tok(img)
    g = side // 4
    assert tb.x.shape == (2, g * g, 8) and tb.grid == (g, g) and tb.coords.shape == (g * g, 2)
    w, b = tok.proj.proj.weight, tok.proj.proj.bias  # (D, 3, 4, 4)
    for n in [0, g + 1, g * g - 1]:
        y, x = (int(v) for v in tb.coords[n])
        patch = img[:, :, 4 * y:4 * y + 4, 4 * x:4 * x + 4]
        expected = torch.einsum("bchw,dchw->bd", patch, w) + b
        torch.testing.assert_close(tb.x[:, n], expected, rtol=1e-5, atol=1e-5)


def test_image_not_divisible_raises():
    with pytest.raises(ResolutionError, match="not divisible"):
        ImageTokenizer(8, 4)(torch.randn(1, 3, 30, 32))


@pytest.mark.parametrize("chans", [3, 2])  # video frames, event voxels (polarity channels)
def test_tubelet_tokens_sit_at_their_tubelet(chans):
    torch.manual_seed(0)
    tok = TubeletTokenizer(embed_dim=6, patch_size=4, tubelet=2, in_chans=chans)
    clip = torch.randn(2, chans, 6, 8, 12)
    tb = tok(clip)
    assert tb.grid == (3, 2, 3) and tb.x.shape == (2, 18, 6) and tb.coords.shape == (18, 3)
    ref = F.conv3d(clip, tok.proj.weight, tok.proj.bias, stride=(2, 4, 4))  # (B, D, t, h, w)
    for n in range(18):
        t, y, x = (int(v) for v in tb.coords[n])
        torch.testing.assert_close(tb.x[:, n], ref[:, :, t, y, x], rtol=1e-5, atol=1e-5)
    with pytest.raises(ResolutionError):
        tok(torch.randn(1, chans, 5, 8, 8))


def _fps_numpy(p: np.ndarray, n: int) -> list[int]:
    chosen, d = [0], np.full(len(p), np.inf)
    for _ in range(n - 1):
        d = np.minimum(d, ((p - p[chosen[-1]]) ** 2).sum(-1))
        chosen.append(int(d.argmax()))
    return chosen


def test_farthest_point_sample_matches_numpy():
    torch.manual_seed(0)
    pts = torch.randn(3, 200, 3, dtype=torch.float64)
    idx = farthest_point_sample(pts, 16)
    for b in range(3):
        assert idx[b].tolist() == _fps_numpy(pts[b].numpy(), 16)


def test_knn_group_matches_brute_force():
    torch.manual_seed(0)
    pts = torch.randn(2, 100, 3, dtype=torch.float64)
    centres = pts[:, :5]
    groups = knn_group(pts, centres, 7)  # (B, G, k, 3)
    for b in range(2):
        for g in range(5):
            d = ((pts[b] - centres[b, g]) ** 2).sum(-1)
            want = (pts[b, d.argsort()[:7]] - centres[b, g]).numpy()
            got = groups[b, g].numpy()
            assert sorted(map(tuple, np.round(got, 9))) == sorted(map(tuple, np.round(want, 9)))


def test_point_tokenizer_coords_are_scaled_centres_and_permutation_invariant():
    torch.manual_seed(0)
    tok = PointTokenizer(embed_dim=16, num_groups=8, group_size=4, coord_scale=4.0).eval()
    pts = torch.randn(2, 64, 3)
    tb = tok(pts)
    assert tb.x.shape == (2, 8, 16) and tb.coords.shape == (2, 8, 3) and tb.grid is None
    idx = farthest_point_sample(pts, 8)
    torch.testing.assert_close(tb.coords, 4.0 * torch.gather(pts, 1, idx.unsqueeze(-1).expand(-1, -1, 3)))
    # shuffling the input points (keeping point 0 first, FPS's seed) gives the same tokens
    perm = torch.cat([torch.zeros(1, dtype=torch.long), torch.randperm(63) + 1])
    tb2 = tok(pts[:, perm])
    torch.testing.assert_close(tb2.coords, tb.coords)
    torch.testing.assert_close(tb2.x, tb.x, rtol=1e-5, atol=1e-5)
    assert tok(pts, num_groups=16).x.shape == (2, 16, 16)
