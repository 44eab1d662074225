"""Naive float64 references of the rotation PEs (liere, comrope, string, rope-axial's layouts).

Each reference builds the full ``d x d`` rotation matrix of every token and head from the paper's
formula with numpy / scipy (``scipy.linalg.expm`` of the summed generator, explicit 2 x 2 RoPE
blocks, explicit circulant matrices), reading only the PE's learned parameters; nothing here calls
the PE's own maths. Used by tests/test_rotation_pes.py and tests/test_encodings.py.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.linalg
import torch

__all__ = ["rotation_matrices", "rotated_qk", "naive_logits", "layout_pair_angles", "axial_pair_angles"]


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float64).cpu().numpy()


def _skew_upper(upper: np.ndarray, b: int) -> np.ndarray:
    """b x b skew matrix whose strict upper triangle, read row by row, is ``upper``."""
    m = np.zeros((b, b))
    idx = 0
    for i in range(b):
        for j in range(i + 1, b):
            m[i, j] = upper[idx]
            m[j, i] = -upper[idx]
            idx += 1
    return m


def _block_diag(blocks: list[np.ndarray], d: int) -> np.ndarray:
    out = np.zeros((d, d))
    o = 0
    for blk in blocks:
        n = blk.shape[0]
        out[o:o + n, o:o + n] = blk
        o += n
    return out


def _rope_matrix(angles: np.ndarray, d: int) -> np.ndarray:
    """Block-diagonal rotation of channel pairs (2k, 2k+1) by ``angles[k]`` (missing pairs: identity)."""
    r = np.eye(d)
    for k, a in enumerate(angles):
        c, s = math.cos(a), math.sin(a)
        r[2 * k:2 * k + 2, 2 * k:2 * k + 2] = [[c, -s], [s, c]]
    return r


def _generators(pe, layer) -> np.ndarray:
    """The full ``(H, p, d, d)`` generators of a liere / comrope layer, from its parameters."""
    H, d, p = pe.num_heads, pe.head_dim, pe.spatial_dims
    out = np.zeros((H, p, d, d))
    if pe.name == "liere":
        up = _np(layer.upper)  # (H, p, m, b(b-1)/2)
        b = pe.block_size
        for h in range(H):
            for a in range(p):
                out[h, a] = _block_diag([_skew_upper(up[h, a, k], b) for k in range(up.shape[2])], d)
        return out
    base = _np(layer.base)  # (H, m, b, b)
    m = base.shape[1]
    for h in range(H):
        for a in range(p):
            blocks = []
            for k in range(m):
                s = base[h, k] - base[h, k].T
                if pe.variant == "ld":
                    blocks.append(_np(layer.theta)[a, k] * s)
                else:
                    blocks.append(s if k % p == a else np.zeros_like(s))
            out[h, a] = _block_diag(blocks, d)
    return out


def _kept(frac: float, F: int) -> int:
    """p-RoPE (Barbero et al. 2024): the highest floor(p F) of a ladder's F frequencies are kept."""
    return math.floor(frac * F)


def axial_pair_angles(coords: np.ndarray, d: int, base: float, frac: float = 1.0) -> np.ndarray:
    """Angles ``(N, d/2)`` of rope-axial's axial layout: axis ``a`` owns pairs ``a F .. a F + F - 1``,
    ``F = d // (2 p)``, pair ``k`` of it turns by ``c_a base^(-k/F)`` (0 for ``k >= floor(frac F)``,
    p-RoPE); leftover pairs 0."""
    N, p = coords.shape
    F = d // (2 * p)
    out = np.zeros((N, d // 2))
    for n in range(N):
        for a in range(p):
            for k in range(_kept(frac, F)):
                out[n, a * F + k] = coords[n, a] * base ** (-k / F)
    return out


def layout_pair_angles(layout: str, coords: np.ndarray, d: int, base: float, frac: float = 1.0) -> np.ndarray:
    """Angles ``(N, d/2)`` of rope-axial's non-axial layouts, from the written rules: one ladder
    ``base^(-k/F)`` over all ``F = d/2`` pairs; 2-D coords are ``(y, x)`` with time 0; p-RoPE
    (``frac < 1``) leaves the pairs past the highest ``floor(frac F)`` unrotated."""
    F = d // 2
    w = [base ** (-k / F) if k < _kept(frac, F) else 0.0 for k in range(F)]
    if coords.shape[1] == 2:
        coords = np.concatenate([np.zeros((coords.shape[0], 1)), coords], axis=1)
    out = np.zeros((coords.shape[0], F))
    if layout == "mrope":  # Qwen2-VL: 16 / 24 / 24 of 64 pairs
        t = F // 4
        y = (F - t) // 2
        owner = ["t"] * t + ["y"] * y + ["x"] * (F - t - y)
    elif layout == "mrope-interleaved":  # Qwen3-VL: t, y, x cycled, 24 / 20 / 20 of 64 pairs
        y = 5 * F // 16
        owner = [("t", "y", "x")[k % 3] if k < 3 * y else "t" for k in range(F)]
    elif layout == "videorope":  # y, x alternate on the high frequencies, the lowest quarter on t
        t = F // 4
        owner = [("y", "x")[k % 2] for k in range(F - t)] + ["t"] * t
    else:
        raise ValueError(layout)
    for n, (tt, yy, xx) in enumerate(coords):
        if layout == "videorope":
            t2 = 2.0 * tt  # adjustable temporal spacing delta = 2
            pos = {"t": t2, "y": yy + t2, "x": xx + t2}  # diagonal layout
        else:
            pos = {"t": tt, "y": yy, "x": xx}
        for k in range(F):
            out[n, k] = pos[owner[k]] * w[k]
    return out


def rotation_matrices(pe, layer_idx: int, coords: torch.Tensor) -> np.ndarray:
    """``(H, N, d, d)`` rotation of each head and token (coords ``(N, p)``) for a rotation PE."""
    H, d = pe.num_heads, pe.head_dim
    c = _np(coords)
    N = c.shape[0]
    out = np.zeros((H, N, d, d))
    layer = pe.layer(layer_idx)
    if pe.name in ("liere", "comrope"):
        gen = _generators(pe, layer)
        s = _np(layer.scale)
        for h in range(H):
            for n in range(N):
                out[h, n] = scipy.linalg.expm(sum(s[a] * c[n, a] * gen[h, a] for a in range(c.shape[1])))
        return out
    if pe.name == "string" and pe.p_form == "cayley":
        up = _np(layer.upper)
        f = _np(layer.freqs)  # (p, H, d/2)
        for h in range(H):
            S = _skew_upper(up[h], d)
            P = (np.eye(d) - S) @ np.linalg.inv(np.eye(d) + S)
            for n in range(N):  # the definition's P^T RoPE(r) P (R(0) = I, like a prefix token's)
                out[h, n] = P.T @ _rope_matrix(c[n] @ f[:, h, :], d) @ P
        return out
    if pe.name == "string":  # circulant
        cols = _np(layer.cols)  # (p, H, d)
        for h in range(H):
            L = []
            for a in range(cols.shape[0]):
                C = np.array([[cols[a, h, (i - j) % d] for j in range(d)] for i in range(d)])
                L.append(C - C.T)
            for n in range(N):
                out[h, n] = scipy.linalg.expm(sum(c[n, a] * L[a] for a in range(len(L))))
        return out
    if pe.name == "rope-axial":
        ang = (axial_pair_angles(c, d, pe.base, pe.p) if pe.layout == "axial"
               else layout_pair_angles(pe.layout, c, d, pe.base, pe.p))
        for n in range(N):
            out[:, n] = _rope_matrix(ang[n], d)
        return out
    raise ValueError(f"no rotation reference for {pe.name}")


def rotated_qk(pe, layer_idx: int, q: torch.Tensor, k: torch.Tensor, coords: torch.Tensor,
               num_prefix_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """q, k ``(B, H, P + N, d)`` with patch rows rotated by :func:`rotation_matrices` (prefix rows kept)."""
    P = num_prefix_tokens
    rot = torch.from_numpy(rotation_matrices(pe, layer_idx, coords)).to(q.dtype)  # (H, N, d, d)
    qr, kr = q.clone(), k.clone()
    qr[:, :, P:] = torch.einsum("hnij,bhnj->bhni", rot, q[:, :, P:])
    kr[:, :, P:] = torch.einsum("hnij,bhnj->bhni", rot, k[:, :, P:])
    return qr, kr


def naive_logits(pe, layer_idx: int, q: torch.Tensor, k: torch.Tensor, coords: torch.Tensor,
                 num_prefix_tokens: int) -> np.ndarray:
    """``S[b, h, i, j] = (R_i q_i) . (R_j k_j)`` by a double loop over tokens (unscaled), float64."""
    P = num_prefix_tokens
    rot = rotation_matrices(pe, layer_idx, coords)  # (H, N, d, d)
    qn, kn = _np(q), _np(k)
    B, H, T, d = qn.shape
    out = np.zeros((B, H, T, T))
    for b in range(B):
        for h in range(H):
            for i in range(T):
                qi = qn[b, h, i] if i < P else rot[h, i - P] @ qn[b, h, i]
                for j in range(T):
                    kj = kn[b, h, j] if j < P else rot[h, j - P] @ kn[b, h, j]
                    out[b, h, i, j] = qi @ kj
    return out
