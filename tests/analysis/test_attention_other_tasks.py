"""The attention analysis reads any task's backbone: DINO (through ``features()``) and detection (no
``features()``: the task's own forward), each attention call checked against probs @ v of the block."""
from __future__ import annotations

import pytest
import torch

from pebench.analysis.attention import attention_maps
from pebench.models.attention import attend


def _check(task, x):
    maps = attention_maps(task, x)
    assert len(maps) == task.backbone.depth and all(len(calls) == 1 for calls in maps)
    for layer, ((probs, coords, mask),) in enumerate(maps):
        rows = probs.sum(-1)
        torch.testing.assert_close(rows, torch.ones_like(rows), rtol=1e-10, atol=1e-10)
        assert probs.shape[-1] == probs.shape[-2] and mask is None
        # the block's attention output is probs @ v for the inputs the hook saw
        attn = task.backbone.blocks[layer].attn
        seen = {}
        h = attn.register_forward_pre_hook(lambda m, a: seen.update(x=a[0]))  # returns None: args unchanged
        with torch.no_grad():
            (task.features(x) if callable(getattr(task, "features", None)) else task(x))
        h.remove()
        xin = seen["x"]
        B, T, _ = xin.shape
        with torch.no_grad():
            q, k, v = attn.qkv(xin).reshape(B, T, 3, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
            out, _ = attend(q, k, v, xin, task.backbone.pe.layer(layer), coords, None, scale=attn.scale)
        torch.testing.assert_close(probs @ v, out, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("pe", ["rope-axial", "alibi"])
def test_dino_and_detection_backbones(pe):
    from pebench.tasks.detection import DetectionTask
    from pebench.tasks.dino import DinoTask

    torch.manual_seed(0)
    dino = DinoTask(num_classes=4, model="vit-nano", pe=pe, patch_size=4, train_grid=(4, 4), out_dim=16,
                    head_hidden=16, head_bottleneck=8).double().eval()
    _check(dino, torch.randn(2, 3, 16, 16, dtype=torch.float64))
    det = DetectionTask(modality="image", num_classes=2, pe=pe, patch_size=8, train_grid=(4, 4),
                        fpn_dim=32, head_convs=1).double().eval()
    _check(det, torch.randn(1, 3, 32, 32, dtype=torch.float64))
