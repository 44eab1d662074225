"""ComRoPE's fast path (``impl="eig"``: one spectral decomposition per layer, then RoPE phases) against
the definition (``impl="expm"``: per-token matrix exponentials) and scipy, in float64 with gradients;
and the ``positions`` option (current grid, as the official code, or training grid).

The naive float64 references of tests/support/rotation_refs.py (scipy ``expm`` of the summed
generators) check the default path's logits in tests/encodings/test_rotation_pes.py; here the two
implementations are compared on the same parameters, gradients included.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch
from rotation_refs import naive_logits

from pebench.encodings import PEConfigError, build_pe
from pebench.encodings.comrope import phase_basis
from pebench.models import build_backbone

D, H = 48, 2  # head dim 24: blocks of 2, 4, 6, 8 (and 3 for the odd fallback)


def pair(p: int, P: int, **opts):
    """The same ComRoPE (same parameters) with ``impl=eig`` and ``impl=expm``, float64."""
    out = []
    for impl in ("eig", "expm"):
        torch.manual_seed(0)
        out.append(build_pe("comrope", dim=D, num_heads=H, depth=2, spatial_dims=p, num_prefix_tokens=P,
                            grid=(5, 6) if p == 2 else (3, 5, 6), impl=impl, **opts).double())
    return out


def coords_of(B: int, n: int, p: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(B, n, p, generator=g, dtype=torch.float64) * 6 - 1


def attention_loss(pe, layer: int, q, k, c, w) -> torch.Tensor:
    """A scalar of the attention probabilities under ``pe`` (weights ``w``): what the logits feed."""
    qr, kr = pe.layer(layer).qk(q, k, None, c)
    return ((qr @ kr.transpose(-1, -2) / 5.0).softmax(-1) * w).sum()


CASES = [{"block_size": 8}, {"block_size": 4}, {"block_size": 6}, {"block_size": 2},
         {"variant": "ap", "block_size": 4}, {"variant": "ap", "block_size": 2},
         {"block_size": 3}]  # 3: odd, the expm fallback


@pytest.mark.parametrize("P", [0, 1])
@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("opts", CASES, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_eig_equals_expm_with_gradients(opts, p, P):
    fast, ref = pair(p, P, **opts)
    N, B = 7, 2
    c = coords_of(B, N, p)
    g = torch.Generator().manual_seed(1)
    q0 = torch.randn(B, H, P + N, D // H, generator=g, dtype=torch.float64)
    k0 = torch.randn(B, H, P + N, D // H, generator=g, dtype=torch.float64)
    w = torch.randn(B, H, P + N, P + N, generator=g, dtype=torch.float64)
    grads = []
    for pe in (fast, ref):
        q, k = q0.clone().requires_grad_(), k0.clone().requires_grad_()
        with torch.no_grad():
            qr, kr = pe.layer(1).qk(q, k, None, c)
        logits = qr @ kr.transpose(-1, -2)
        loss = attention_loss(pe, 1, q, k, c, w)
        loss.backward()
        grads.append((logits, q.grad, k.grad, {n: t.grad for n, t in pe.named_parameters() if t.grad is not None}))
    (lf, qf, kf, pf), (lr, qr_, kr_, pr) = grads
    torch.testing.assert_close(lf, lr, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(qf, qr_, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(kf, kr_, rtol=1e-9, atol=1e-10)
    assert set(pf) == set(pr) and {n.split(".")[-1] for n in pf} == ({"base", "theta"} if opts.get("variant", "ld")
                                                                       == "ld" else {"base"})
    for n in pf:
        assert pf[n].abs().max() > 0
        torch.testing.assert_close(pf[n], pr[n], rtol=1e-8, atol=1e-10)
    # and the logits against the scipy reference (one batch element: naive_logits takes (N, p) coords)
    np.testing.assert_allclose(lf[:1].numpy(), naive_logits(fast, 1, q0[:1], k0[:1], c[0], P), rtol=1e-9, atol=1e-9)


def test_eig_equals_expm_in_a_backbone_step_float64():
    """Whole backbone (CLS token, 2-D grid coords broadcast over the batch): outputs and every gradient."""
    outs = []
    for impl in ("eig", "expm"):
        torch.manual_seed(0)
        bb = build_backbone("vit-nano", pe="comrope", spatial_dims=2, grid=(4, 4), class_token=True,
                            impl=impl).double()
        x = torch.randn(2, 16, bb.embed_dim, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
        ys, xs = torch.meshgrid(torch.arange(4.0), torch.arange(4.0), indexing="ij")
        c = torch.stack([ys.flatten(), xs.flatten()], -1).double()
        y = bb(x, c, (4, 4))
        (y.square().mean()).backward()
        outs.append((y.detach(), {n: t.grad.clone() for n, t in bb.named_parameters() if t.grad is not None}))
    torch.testing.assert_close(outs[0][0], outs[1][0], rtol=1e-10, atol=1e-10)
    assert outs[0][1].keys() == outs[1][1].keys()
    for n in outs[0][1]:
        torch.testing.assert_close(outs[0][1][n], outs[1][1][n], rtol=1e-8, atol=1e-10, msg=n)


@pytest.mark.parametrize("b", [2, 4, 8])
def test_phase_basis_is_the_real_spectral_form(b):
    """``S = U J U^T`` with ``U`` orthogonal and ``J`` the 2 x 2 blocks ``[[0, -l], [l, 0]]``; hence
    ``expm(t S) = U rot(t l) U^T`` (checked against scipy's expm)."""
    g = torch.Generator().manual_seed(b)
    m = torch.randn(3, b, b, generator=g, dtype=torch.float64)
    s = m - m.transpose(-1, -2)
    u, lam = phase_basis(s)
    assert u.shape == (3, b, b) and lam.shape == (3, b // 2)
    torch.testing.assert_close(u.transpose(-1, -2) @ u, torch.eye(b, dtype=torch.float64).expand(3, b, b),
                               rtol=0, atol=1e-12)
    for i in range(3):
        t = 0.7
        rot = np.zeros((b, b))
        j_blocks = np.zeros((b, b))
        for j, lj in enumerate(lam[i].tolist()):
            cth, sth = np.cos(t * lj), np.sin(t * lj)
            rot[2 * j:2 * j + 2, 2 * j:2 * j + 2] = [[cth, -sth], [sth, cth]]
            j_blocks[2 * j:2 * j + 2, 2 * j:2 * j + 2] = [[0, -lj], [lj, 0]]
        ui = u[i].numpy()
        np.testing.assert_allclose(ui @ j_blocks @ ui.T, s[i].numpy(), atol=1e-12)
        np.testing.assert_allclose(ui @ rot @ ui.T, scipy.linalg.expm(t * s[i].numpy()), atol=1e-12)


def _grid(h: int, w: int) -> torch.Tensor:
    ys, xs = torch.meshgrid(torch.arange(float(h)), torch.arange(float(w)), indexing="ij")
    return torch.stack([ys.flatten(), xs.flatten()], -1).double()  # (h*w, 2)


@pytest.mark.parametrize("impl", ["eig", "expm"])
def test_positions_current_divides_by_the_current_grid(impl):
    """``current`` (default): on a 6 x 6 grid a model trained on 3 x 3 uses s = 1/6 (positions in [0, 1],
    interpolation, as the official code); ``train`` keeps s = 1/4 (extrapolation). Each is checked against
    the same parameters with that scale fixed by ``coord_scale``, and against scipy."""
    torch.manual_seed(0)
    kw = dict(dim=D, num_heads=H, depth=1, spatial_dims=2, grid=(3, 3), impl=impl)
    cur = build_pe("comrope", **kw).double()
    train = build_pe("comrope", positions="train", **kw).double()
    train.load_state_dict(cur.state_dict())
    assert cur.positions == "current" and cur.layers[0].scale.tolist() == [1 / 3, 1 / 3]
    c = _grid(6, 6)
    g = torch.Generator().manual_seed(3)
    q = torch.randn(1, H, 36, D // H, generator=g, dtype=torch.float64)
    k = torch.randn(1, H, 36, D // H, generator=g, dtype=torch.float64)

    def logits(pe, grid):
        pe.encode_tokens(torch.zeros(1, 36, D, dtype=torch.float64), c, grid)
        qr, kr = pe.layer(0).qk(q, k, None, c)
        return (qr @ kr.transpose(-1, -2)).detach()

    for side, pe, grid in ((6, cur, (6, 6)), (3, train, (6, 6)), (3, cur, (3, 3)), (3, cur, None)):
        fixed = build_pe("comrope", coord_scale=[1 / side] * 2, **kw).double()
        fixed.load_state_dict(cur.state_dict())
        got = logits(pe, grid)
        torch.testing.assert_close(got, logits(fixed, grid), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(got.numpy(), naive_logits(fixed, 0, q, k, c, 0), rtol=1e-9, atol=1e-9)
    assert not torch.allclose(logits(cur, (6, 6)), logits(train, (6, 6)))
    # coord_scale is fixed whatever the grid
    fixed = build_pe("comrope", coord_scale=[0.5, 0.5], **kw).double()
    fixed.encode_tokens(torch.zeros(1, 36, D), c, (6, 6))
    assert fixed.layers[0].position_scale().tolist() == [0.5, 0.5]


def test_positions_current_in_the_backbone_sees_the_grid_it_is_given():
    """Through the backbone: evaluating a 4 x 4-trained model on 8 x 8 tokens with ``current`` equals the
    ``train`` model trained on 8 x 8 (same parameters): both divide by 8."""
    torch.manual_seed(0)
    a = build_backbone("vit-nano", pe="comrope", spatial_dims=2, grid=(4, 4)).double().eval()
    b = build_backbone("vit-nano", pe="comrope", spatial_dims=2, grid=(8, 8), positions="train").double().eval()
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 64, a.embed_dim, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(a(x, _grid(8, 8), (8, 8)), b(x, _grid(8, 8), (8, 8)), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kw", [{"impl": "naive"}, {"positions": "test"}])
def test_bad_options_raise(kw):
    with pytest.raises(PEConfigError):
        build_pe("comrope", dim=D, num_heads=H, depth=1, spatial_dims=2, **kw)
