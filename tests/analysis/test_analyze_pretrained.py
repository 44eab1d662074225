"""``bench analyze`` on timm's own ViT definitions (pebench.analysis.pretrained, pebench.cli.analyze).

Tiny random-weight models of four families (plain APE ViT, rope-vit axial, DINOv2, DINOv3) are saved
in the real checkpoint formats, loaded back and analysed; the taps are checked against timm's own
forward pass, RPI against the per-family contract, and a mismatched checkpoint against the one-line
error. Nothing downloads (``pretrained=False``, ``HF_HUB_OFFLINE=1``).
"""
from __future__ import annotations

import json
import os

import pytest
import timm
import torch
from safetensors.torch import save_file

from pebench.analysis.pretrained import CheckpointError, TimmTask, check_state_dict, input_affine_for, read_state_dict
from pebench.analysis.robustness import image_codec
from pebench.cli import main
from pebench.datamodules import get_datamodule_class
from pebench.leaderboard.runs import collect_runs

os.environ["HF_HUB_OFFLINE"] = "1"

SMALL = {"img_size": 32, "patch_size": 8, "depth": 2, "embed_dim": 32, "num_heads": 2}
#: family -> (timm name, checkpoint file, how it is stored, expected pe family)
FAMILIES = {
    "vit": ("vit_tiny_patch16_224", "vit.safetensors", "safetensors", "ape"),
    "rope": ("vit_small_patch16_rope_224", "rope.pth", "model", "rope-axial"),
    "dinov2": ("vit_small_patch14_dinov2", "dinov2.safetensors", "safetensors", "ape"),
    "dinov3": ("vit_small_patch16_dinov3", "dinov3.pth", "plain", "rope-dinov3"),
}
#: the smallest analysis settings (the protocol itself is tested in test_analysis_evaluators.py)
FAST = ["--data-option", "train_size=32", "--data-option", "val_size=16", "--probe-samples", "32",
        "--analysis-option", "probe_size=8", "--analysis-option", "rpi_permutations=2",
        "--analysis-option", "alpha_samples=8", "--analysis-option", "robustness_samples=8",
        "--analysis-option", "extrapolation_samples=8", "--resolutions", "32,64"]


def _model_args() -> list[str]:
    return [a for k, v in SMALL.items() for a in ("--model-option", f"{k}={v}")]


def _save(model: torch.nn.Module, path: str, how: str) -> None:
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    if how == "safetensors":
        save_file(sd, path)
    else:
        torch.save({how: sd} if how in ("model", "state_dict") else sd, path)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """family -> checkpoint path of a tiny random model (seed 1; the analysis twin uses seed 0)."""
    root = tmp_path_factory.mktemp("ckpt")
    out = {}
    for fam, (name, file, how, _) in FAMILIES.items():
        torch.manual_seed(1)
        m = timm.create_model(name, pretrained=False, num_classes=0 if fam != "vit" else 1000, **SMALL)
        _save(m, str(root / file), how)
        out[fam] = str(root / file)
    return out


def _task(fam: str, path: str) -> TimmTask:
    sd = read_state_dict(path)
    task = TimmTask(FAMILIES[fam][0], SMALL, num_classes=int(sd["head.weight"].shape[0]) if "head.weight" in sd else 0)
    task.load_checkpoint(sd, path)
    return task.eval()


def _embedded(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The residual stream entering block 0 (B, P + N, D), by timm's own pieces."""
    out = model._pos_embed(model.patch_embed(x))
    out = out[0] if isinstance(out, tuple) else out  # Eva also returns its rotary table
    return model.norm_pre(out)


@pytest.mark.parametrize("fam", list(FAMILIES))
def test_taps_are_timms_own_features(fam, checkpoints):
    """block_out == timm's forward_intermediates; attn_in[l] == blocks[l].norm1(stream entering block l)."""
    task = _task(fam, checkpoints[fam])
    m, P = task.model, task.backbone.num_prefix_tokens
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        block_out, coords = task.features(x, tap="block_out")
        attn_in, _ = task.features(x, tap="attn_in")
        ref = m.forward_intermediates(x, norm=False, output_fmt="NLC", intermediates_only=True,
                                      return_prefix_tokens=True)  # [(patch (B, N, D), prefix (B, P, D))]
        streams = [_embedded(m, x)] + [torch.cat([pre, patch], 1) for patch, pre in ref]
        expected_in = [m.blocks[i].norm1(streams[i])[:, P:] for i in range(len(m.blocks))]
    assert len(block_out) == len(attn_in) == SMALL["depth"]
    for ours, (patch, _) in zip(block_out, ref):
        torch.testing.assert_close(ours, patch, rtol=0, atol=0)
    for ours, exp in zip(attn_in, expected_in):
        torch.testing.assert_close(ours, exp)
    # pebench's coordinate contract: row-major (row, column) patch positions
    assert coords.tolist() == [[r, c] for r in range(4) for c in range(4)]


@pytest.mark.parametrize("fam", ["vit", "rope"])
def test_rpi_moves_content_not_positions(fam, checkpoints):
    task = _task(fam, checkpoints[fam])
    m = task.model
    with torch.no_grad():  # layer scale 1 instead of 1e-5, so that the blocks' updates are visible below
        for n, p in m.named_parameters():
            if "gamma" in n:
                p.fill_(1.0)
    x = torch.randn(2, 3, 32, 32)
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        clean_in, _ = task.features(x, tap="attn_in")
        perm_in, _ = task.features(x, content_perm=perm, tap="attn_in")
        clean_out, _ = task.features(x, tap="block_out")
        perm_out, _ = task.features(x, content_perm=perm, tap="block_out")
        if fam == "vit":  # APE: permuted patch embeddings, then the table added in place
            emb = m.patch_embed(x).flatten(1, 2)[:, perm] + m.pos_embed[:, 1:]  # (B, N, D); pos_embed[:, 0]: class
            torch.testing.assert_close(perm_in[0], m.blocks[0].norm1(emb))
        else:  # RoPE: nothing positional before attention, so the layer-0 tokens are just moved
            torch.testing.assert_close(perm_in[0], clean_in[0][:, perm])
    # either way positions are anchored: the block outputs are not the clean ones moved along
    assert not torch.allclose(perm_out[-1], clean_out[-1][:, perm], atol=1e-4)


@pytest.mark.parametrize("fam", ["vit", "rope"])
def test_per_sample_permutations_equal_one_sample_at_a_time(fam, checkpoints):
    """A (B, N) content permutation (RPI's per-sample draw) gives each sample what its own (N,) one gives it."""
    task = _task(fam, checkpoints[fam])
    x = torch.randn(3, 3, 32, 32)
    perms = torch.stack([torch.randperm(16, generator=torch.Generator().manual_seed(s)) for s in range(3)])
    with torch.no_grad():
        both, _ = task.features(x, content_perm=perms, tap="block_out")
        for s in range(3):
            one, _ = task.features(x[s:s + 1], content_perm=perms[s], tap="block_out")
            for a, b in zip(both, one):
                torch.testing.assert_close(a[s:s + 1], b, rtol=1e-5, atol=1e-5)


def test_alpha_scales_only_the_patch_table(checkpoints):
    task = _task("vit", checkpoints["vit"])
    pe, table = task.backbone.pe, task.model.pos_embed.detach().clone()
    assert pe.additive and pe.name == "ape"
    pe.alpha = 0.5
    torch.testing.assert_close(task.model.pos_embed[:, 1:], 0.5 * table[:, 1:])
    torch.testing.assert_close(task.model.pos_embed[:, :1], table[:, :1])  # the class entry is not positional
    pe.alpha = 1.0
    assert torch.equal(task.model.pos_embed, table)
    assert not _task("rope", checkpoints["rope"]).backbone.pe.additive


def test_checkpoint_mismatch_is_one_line(checkpoints, tmp_path, capsys):
    sd = read_state_dict(checkpoints["rope"])
    model = TimmTask("vit_small_patch16_rope_224", SMALL).model
    bad = dict(sd)
    bad["blocks.0.attn.qkv.weight"] = torch.zeros(3, 3)
    with pytest.raises(CheckpointError, match=r"key 'blocks\.0\.attn\.qkv\.weight' has shape \(3, 3\)"):
        check_state_dict(model, bad, "x")
    with pytest.raises(CheckpointError, match="unexpected key 'extra'"):
        check_state_dict(model, {**sd, "extra": torch.zeros(1)}, "x")
    missing = {k: v for k, v in sd.items() if k != "cls_token"}
    save_file(missing, str(tmp_path / "missing.safetensors"))
    out = tmp_path / "out"
    rc = main(["analyze", "--model", "timm:vit_small_patch16_rope_224", "--checkpoint",
               str(tmp_path / "missing.safetensors"), "--dataset", "shapes", "--out", str(out), *_model_args()])
    lines = capsys.readouterr().err.strip().splitlines()  # the error is the only line: no stage line before it
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("bench: error:")
    assert "missing key 'cls_token'" in lines[0]
    assert not out.exists()
    rc = main(["analyze", "--model", "timm:vit_small_patch16_rope_224", "--checkpoint", str(tmp_path / "none.pth"),
               "--dataset", "shapes", "--out", str(out), *_model_args()])
    assert rc == 2 and "does not exist" in capsys.readouterr().err and not out.exists()
    # a model built with other options than the checkpoint's: the first key whose shape differs
    rc = main(["analyze", "--model", "timm:vit_small_patch16_rope_224", "--checkpoint", checkpoints["rope"],
               "--dataset", "shapes", "--out", str(out), *_model_args(), "--model-option", "embed_dim=64"])
    err = capsys.readouterr().err
    assert rc == 2 and "key 'cls_token' has shape (1, 1, 32), the model expects (1, 1, 64)" in err
    assert not out.exists()


def test_four_families_run_the_full_analysis_set(checkpoints, tmp_path, capsys):
    out = tmp_path / "runs"
    for fam, (name, _, _, pe) in FAMILIES.items():
        rc = main(["analyze", "--model", f"timm:{name}", "--checkpoint", checkpoints[fam], "--dataset", "shapes",
                   "--out", str(out), "--seed", "0", *_model_args(), *FAST])
        assert rc == 0, capsys.readouterr().err
        run_dir = out / "shapes" / pe / f"timm-{name}" / "seed0"  # a portable folder name (no ':')
        res = json.loads((run_dir / "results.json").read_text())
        assert res["status"] == "complete" and res["task"] == "analysis"
        assert (res["dataset"], res["pe"], res["model"], res["seed"]) == ("shapes", pe, f"timm:{name}", 0)
        src = res["model_source"]
        assert src["library"] == "timm" and src["name"] == name and len(src["checkpoint_sha256"]) == 64
        applies = ["geometry", "robustness", "alpha", "extrapolation"] if pe == "ape" else \
            ["geometry", "robustness", "extrapolation"]
        assert res["analyses"] == applies
        geo = res["geometry"]
        assert geo["layers"] == [0, 1] and len(geo["ssdc"]) == 2 and len(geo["ssdc_rpi_init"]) == 2
        assert set(res["robustness"]) >= {"clean_acc", "jpeg", "blur"}
        assert [r["resolution"] for r in res["extrapolation"]] == ["32", "64"]
        assert all("acc1" in r for r in res["extrapolation"])
        assert ("alpha_sweep" in res) == (pe == "ape")
        assert 0.0 <= res["metrics"]["val/acc1"] <= 1.0
        assert (run_dir / "geometry.png").is_file()
    rows = collect_runs(out)
    assert sorted(r["model"] for r in rows) == sorted(f"timm:{n}" for n, *_ in FAMILIES.values())
    assert {r["status"] for r in rows} == {"complete"}


def test_inputs_reach_the_model_in_its_own_normalisation(checkpoints):
    """The datamodule's normalised batch -> [0, 1] -> the model's pretrained_cfg mean / std."""
    dm = get_datamodule_class("shapes")(batch_size=4, seed=0)
    task = _task("vit", checkpoints["vit"])
    task.set_input_affine(input_affine_for(dm, task.model))
    x = torch.randn(2, 3, 32, 32)
    cfg = task.model.pretrained_cfg
    mean, std = torch.tensor(cfg["mean"]).view(1, 3, 1, 1), torch.tensor(cfg["std"]).view(1, 3, 1, 1)
    torch.testing.assert_close(task._prep(x), (image_codec(dm)[0](x) - mean) / std)


def test_native_head(tmp_path, capsys):
    """--head native uses the checkpoint's classifier; it must have the dataset's class count."""
    torch.manual_seed(2)
    for classes in (8, 10):
        m = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=classes, **SMALL)
        _save(m, str(tmp_path / f"head{classes}.pth"), "state_dict")
    base = ["analyze", "--model", "timm:vit_tiny_patch16_224", "--dataset", "shapes", "--out", str(tmp_path / "out"),
            "--head", "native", "--analyses", "robustness", *_model_args(), *FAST]
    assert main([*base, "--checkpoint", str(tmp_path / "head10.pth")]) == 2
    assert "needs a classifier for 8 classes; the checkpoint's has 10" in capsys.readouterr().err
    assert main([*base, "--checkpoint", str(tmp_path / "head8.pth")]) == 0
    res = json.loads(next((tmp_path / "out").rglob("results.json")).read_text())
    assert res["analyses"] == ["robustness"] and "probe/train_acc1" not in res["metrics"]


@pytest.mark.parametrize("fam", ["vit", "dinov3"])
def test_attn_in_stops_after_the_last_tap(fam, checkpoints):
    """attn_in needs nothing after the last block's attention input: that block's attention and MLP do
    not run, and the taps equal those read from a forward pass that runs to the end."""
    task = _task(fam, checkpoints[fam])
    m = task.model
    calls = {"attn": 0, "mlp": 0}
    m.blocks[-1].attn.register_forward_hook(lambda *a: calls.__setitem__("attn", calls["attn"] + 1))
    m.blocks[-1].mlp.register_forward_hook(lambda *a: calls.__setitem__("mlp", calls["mlp"] + 1))
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        feats, _ = task.features(x, tap="attn_in")
        assert calls == {"attn": 0, "mlp": 0}
        task.features(x, tap="block_out")
        assert calls == {"attn": 1, "mlp": 1}
        P = task.backbone.num_prefix_tokens
        full = []  # the attention inputs of a pass that runs to the end

        def grab(mod, args, kwargs):
            full.append((args[0] if args else kwargs["x"])[:, P:])

        hooks = [b.attn.register_forward_pre_hook(grab, with_kwargs=True) for b in m.blocks]
        m.forward_intermediates(x, indices=None, norm=False, output_fmt="NLC", intermediates_only=True)
        for h in hooks:
            h.remove()
    assert len(feats) == len(full) == len(m.blocks)
    for ours, ref in zip(feats, full):
        assert torch.equal(ours, ref)
