"""STRING (Cayley) with a class token, against the definition (Schenck et al., ICML 2025): a token at
``r`` is rotated by ``R(r) = expm(sum_a r_a L_a)`` with commuting skew generators ``L_a = P^T A_a P``
(``A_a``: RoPE's 2 x 2 blocks turning pair ``k`` by the frequency ``f[a, h, k]``), and a prefix token is
not rotated (``R = I``). The reference builds ``R`` with ``scipy.linalg.expm`` from the layer's
parameters in float64, with a random (non-identity) ``P``, and compares every logit, class-to-patch,
patch-to-class and patch-to-patch."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch

from pebench.encodings import build_pe

D, H = 32, 2  # head dim 16


def _definition_rotations(layer, coords: np.ndarray, d: int) -> np.ndarray:
    """``(H, N, d, d)``: ``expm(sum_a r_a P^T A_a P)`` per head and token."""
    upper = layer.upper.detach().double().numpy()  # (H, d(d-1)/2)
    freqs = layer.freqs.detach().double().numpy()  # (p, H, d/2)
    iu = np.triu_indices(d, k=1)
    out = np.zeros((upper.shape[0], coords.shape[0], d, d))
    for h in range(upper.shape[0]):
        S = np.zeros((d, d))
        S[iu] = upper[h]
        S = S - S.T
        P = (np.eye(d) - S) @ np.linalg.inv(np.eye(d) + S)  # Cayley
        gens = []
        for a in range(freqs.shape[0]):
            A = np.zeros((d, d))
            for k in range(d // 2):  # pair (2k, 2k+1) turned by +f: [[0, -f], [f, 0]]
                A[2 * k + 1, 2 * k], A[2 * k, 2 * k + 1] = freqs[a, h, k], -freqs[a, h, k]
            gens.append(P.T @ A @ P)
        for n, r in enumerate(coords):
            out[h, n] = scipy.linalg.expm(sum(r[a] * gens[a] for a in range(len(gens))))
    return out


@pytest.mark.parametrize("p", [2, 3])
def test_cayley_string_logits_with_a_class_token_match_the_definition(p):
    torch.manual_seed(0)
    pe = build_pe("string", dim=D, num_heads=H, depth=1, spatial_dims=p, num_prefix_tokens=1).double()
    layer = pe.layer(0)
    with torch.no_grad():  # a generic P far from I (S starts at 0, where P = I hides the prefix rule)
        layer.upper.copy_(torch.randn(layer.upper.shape, dtype=torch.float64) * 0.5)
    orth = layer.orthogonal(torch.float64).detach()
    assert (orth - torch.eye(D // H, dtype=torch.float64)).abs().max() > 0.5
    N, d = 6, D // H
    coords = torch.rand(N, p, dtype=torch.float64) * 6 - 3
    q = torch.randn(2, H, 1 + N, d, dtype=torch.float64)
    k = torch.randn(2, H, 1 + N, d, dtype=torch.float64)
    with torch.no_grad():
        qr, kr = layer.qk(q, k, None, coords)
    got = (qr @ kr.transpose(-1, -2)).numpy()  # (B, H, 1 + N, 1 + N)

    R = _definition_rotations(layer, coords.numpy(), d)  # (H, N, d, d)
    rot = np.concatenate([np.broadcast_to(np.eye(d), (H, 1, d, d)), R], axis=1)  # prefix: the identity
    qd = np.einsum("htij,bhtj->bhti", rot, q.numpy())
    kd = np.einsum("htij,bhtj->bhti", rot, k.numpy())
    want = np.einsum("bhid,bhjd->bhij", qd, kd)
    np.testing.assert_allclose(got[:, :, 0, 1:], want[:, :, 0, 1:], rtol=1e-10, atol=1e-10)  # class -> patch
    np.testing.assert_allclose(got[:, :, 1:, 0], want[:, :, 1:, 0], rtol=1e-10, atol=1e-10)  # patch -> class
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)  # every logit
    # the class token's logits with a patch depend on where the patch is (P^T RoPE(r_j) P does)
    assert np.abs(want[:, :, 0, 1:] - np.einsum("bhd,bhjd->bhj", q.numpy()[:, :, 0], k.numpy()[:, :, 1:])).max() > 1e-3


def test_cayley_string_at_p_identity_leaves_the_class_token_unrotated():
    """At initialisation (S = 0, P = I) the class token's q and k are returned as they came."""
    pe = build_pe("string", dim=D, num_heads=H, depth=1, spatial_dims=2, num_prefix_tokens=1).double()
    q = torch.randn(1, H, 5, D // H, dtype=torch.float64)
    with torch.no_grad():
        qr, _ = pe.layer(0).qk(q, q, None, torch.rand(4, 2, dtype=torch.float64))
    torch.testing.assert_close(qr[:, :, 0], q[:, :, 0], rtol=0, atol=0)
