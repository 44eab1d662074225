"""``bench perf peers``: the interval helper and the report of missing peers (the timed comparisons run
in ``bench perf peers``; tests never time)."""
from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from pebench.perf import peers
from pebench.perf.suites import SUITE_MODULES, load_suite


def test_interval95_brackets_the_median_by_order_statistics():
    assert peers.interval95([3.0, 1.0, 2.0]) == (1.0, 3.0)  # too few rounds: min and max
    v = [float(i) for i in range(1, 101)]
    lo, hi = peers.interval95(v)
    # binomial(100, 1/2): the 95 % interval of the median spans ranks 50 -/+ 9.8
    assert 39 <= lo <= 42 and 59 <= hi <= 62
    rng = random.Random(0)
    hits = 0
    for _ in range(400):  # coverage of the true median (0) of a symmetric distribution
        lo, hi = peers.interval95([rng.gauss(0, 1) for _ in range(15)])
        hits += lo <= 0 <= hi
    assert hits / 400 > 0.9


def test_suite_registered_and_missing_peers_are_named(monkeypatch, capsys):
    assert SUITE_MODULES["peers"] == "peers" and load_suite("peers") is peers.bench_peers
    monkeypatch.setattr(peers, "PEERS", {n: f"no_such_module_{i}" for i, n in enumerate(peers.PEERS)})
    rows = peers.bench_peers(quick=True)  # nothing installed: LieRE's comparison (no PyPI peer), then one record
    names = [r["name"] for r in rows]
    assert names[-1] == "peers missing" and len(rows) == 6
    assert sum("liere vs LieRE's official algorithm" in n for n in names) == 4  # train, eval; time and memory
    assert names[-2].startswith("peers train floor ") and 0 < rows[-2]["ratio"] < 1
    out = capsys.readouterr().out
    for name in ("timm", "rotary-embedding-torch", "x-transformers"):
        assert name in rows[-1]["note"] and name in out
    assert not math.isnan(rows[-1]["ratio"])


def test_missing_peers_lists_uninstalled_modules(monkeypatch):
    monkeypatch.setattr(peers, "PEERS", {"a": "json", "b": "no_such_module_xyz"})
    assert peers.missing_peers() == ["b"]


def test_timm_rel_pos_bias_peer_is_the_same_computation_as_rpb():
    """The rpb comparison times the same bias: with timm's table copied into pebench's (its (H, 2G-1, 2G-1) layout
    flattened row-major, as timm's RelPosBias), the two attention layers give the same output."""
    import torch
    torch.manual_seed(0)
    grid, dim, heads = (4, 4), 32, 4
    peer_bias = peers._TimmRelPosBias(heads, grid)
    assert peer_bias(16).shape == (1, heads, 16, 16)
    ours = peers._OurAttention(dim, heads, "rpb", grid)
    peer = peers._PeerAttention(dim, heads, bias=peer_bias)
    peer.qkv.load_state_dict(ours.attn.qkv.state_dict())
    peer.proj.load_state_dict(ours.attn.proj.state_dict())
    table = peer_bias.rpb.relative_position_bias_table  # ((2G-1)^2, H)
    with torch.no_grad():
        ours.pe.layer(0).table.copy_(table.T.reshape(heads, 7, 7))
    x = torch.randn(2, 16, dim)
    torch.testing.assert_close(ours(x), peer(x), rtol=1e-5, atol=1e-6)


def test_liere_official_algorithm_peer_is_the_same_rotation_as_liere():
    """The LieRE comparison times the same rotation: with pebench's generators written into the official
    layout (raw ``(p, 1, H, d, d)``, strict upper triangle), both layers rotate q and k alike (float64)."""
    import torch
    torch.manual_seed(0)
    grid, dim, heads = (3, 4), 32, 2
    d = dim // heads
    ours = peers._OurAttention(dim, heads, "liere", grid).double()
    upper = ours.pe.layer(0).upper  # (H, p, 1, d(d-1)/2)
    rows, cols = torch.triu_indices(d, d, offset=1)
    q, k = torch.randn(2, 2, heads, 12, d, dtype=torch.float64)
    want_q, want_k = ours.pe.layer(0).qk(q, k, None, ours.coords)
    # a float64 twin (positions and exponential in float64), then the official float32 path itself
    for exp_dtype, tol in ((torch.float64, 1e-10), (torch.float32, 1e-4)):
        official = peers._LieREOfficial(heads, d, grid, exp_dtype=exp_dtype)
        with torch.no_grad():
            official.raw.zero_()
            for a in range(len(grid)):
                official.raw[a, 0, :, rows, cols] = upper[:, a, 0].to(exp_dtype)
        got_q, got_k = official(q.to(exp_dtype), k.to(exp_dtype))
        torch.testing.assert_close(got_q.double(), want_q, rtol=tol, atol=tol)
        torch.testing.assert_close(got_k.double(), want_k, rtol=tol, atol=tol)


def test_each_comparison_runs_in_a_fresh_interpreter_outside_quick(monkeypatch):
    """Not under ``quick``, every comparison whose peer is installed goes to ``_isolated`` (its own process), in
    order; a missing peer's comparisons are skipped and named."""
    calls = []
    monkeypatch.setattr(peers, "_isolated", lambda name: calls.append(name) or [])
    monkeypatch.setattr(peers, "missing_peers", lambda: ["x-transformers"])
    rows = peers.bench_peers(quick=False)
    assert calls == [c for c in peers.COMPARISONS if c != "x-transformers"]
    assert [r["name"] for r in rows] == ["peers missing"] and "x-transformers" in rows[0]["note"]


def test_a_spawned_comparison_returns_the_in_process_records():
    """The spawned interpreter runs the same comparison (thread count and denormals passed on) and its records
    come back: the same measurements, by name, as in this process."""
    spawned = peers._isolated("liere", quick=True)
    here = peers._comparison("liere", True)
    assert [r["name"] for r in spawned] == [r["name"] for r in here] and len(here) == 5
    assert all(r["ratio"] > 0 for r in spawned)


def test_each_comparison_times_blocks_of_steps_outside_quick(monkeypatch):
    """Outside ``quick``, a whole-backbone comparison times ``BACKBONE_BLOCK`` steps per round over
    ``BACKBONE_ROUNDS`` rounds and a one-layer comparison ``LAYER_BLOCK`` steps per round over ``LAYER_ROUNDS``;
    ``quick`` times single steps."""
    pytest.importorskip("timm")
    seen = {}

    def fake_compare(label, ours, peer, peer_name, x, y, reps, loss=None, block=1):
        seen[label.split(" vs ")[0].split()[-1]] = (reps, block)
        return []

    monkeypatch.setattr(peers, "_compare", fake_compare)
    monkeypatch.setattr(peers, "_train_split", lambda *args: [])
    for name in ("timm-rope-mixed", "timm-rpb"):
        peers._comparison(name, quick=False)
    assert seen == {"rope-mixed": (peers.BACKBONE_ROUNDS, peers.BACKBONE_BLOCK),
                    "rpb": (peers.LAYER_ROUNDS, peers.LAYER_BLOCK)}
    assert peers.BACKBONE_BLOCK > 1 and peers.LAYER_BLOCK > 1
    seen.clear()
    peers._comparison("timm-rope-mixed", quick=True)
    assert seen == {"rope-mixed": (2, 1)}


def test_the_performance_page_states_the_blocks_and_rounds_of_the_comparisons():
    """The page's fixed prose (benchmarks/perf_findings_page.md) gives the suite's counts as the code has them."""
    page = " ".join((Path(__file__).parents[2] / "benchmarks" / "perf_findings_page.md").read_text().split())
    assert f"{peers.BACKBONE_BLOCK} for a whole backbone ({peers.BACKBONE_ROUNDS} rounds;" in page
    assert f"{peers.LAYER_BLOCK} for one attention layer ({peers.LAYER_ROUNDS} rounds;" in page
