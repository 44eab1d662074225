"""ViTDet's simple feature pyramid (Li, Mao, Girshick, He, ECCV 2022, "Exploring Plain Vision
Transformer Backbones for Object Detection", Sec. 3 / Fig. 2c) and the detector built on it.

From the last block's single-scale token map at stride ``s`` (the patch size) the pyramid makes
maps at strides ``s/2, s, 2s`` (and ``4s`` with ``levels=4``): a stride-2 transposed convolution
(x2), the map itself (x1), 2x2 max pooling (x1/2), each followed by a 1x1 and a 3x3 convolution
with channel LayerNorm to ``out_channels`` (ViTDet's ``norm="LN"``); the optional fourth level is
a stride-2 max-pool of the third (ViTDet's ``LastLevelMaxPool``). For the paper's stride-16 map
these are strides 8 / 16 / 32 (/ 64); for pebench's small inputs with patch 4 or 8 the same x2 /
x1 / x1/2 scaling applies relative to the token stride.

Detection head, losses, box coder, anchor-point generation and post-processing are torchvision's
FCOS (Tian et al., ICCV 2019; anchor-free like the YOLO-style head of the PaPE harness, which we do
not use): :class:`torchvision.models.detection.FCOS` with this pyramid as its ``backbone``. Only its
components are called (:class:`Detector`), not ``FCOS.forward``, because pebench's datamodules
already resize, normalise and pad (FCOS's ``GeneralizedRCNNTransform`` would resize again) and the
features come from the ViT's token map. FCOS was chosen over RetinaNet because it is anchor-free
(one point per location, no anchor shapes to tune for the small synthetic sets) and its per-level
size ranges follow directly from the strides (the anchor "size" of a level = its stride, so
level ``i`` regresses boxes whose largest side distance lies in ``(4 s_i, 8 s_i]``, the first
level from 0 and the last to infinity).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Sequence

import torch
from torch import Tensor, nn
from torchvision.models.detection import FCOS
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.fcos import FCOSHead
from torchvision.models.detection.image_list import ImageList

__all__ = ["LayerNorm2d", "SimpleFeaturePyramid", "Detector", "PYRAMID_SCALES"]

#: resampling factor of each pyramid level relative to the token map (ViTDet: 4, 2, 1, 1/2; the
#: x4 level is left out as in ViTDet's detectors that start at stride 8)
PYRAMID_SCALES = (2.0, 1.0, 0.5)


class LayerNorm2d(nn.Module):
    """LayerNorm over the channels of a ``(B, C, H, W)`` map (ViTDet / ConvNeXt ``LN``)."""

    def __init__(self, channels: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels, eps=eps)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class SimpleFeaturePyramid(nn.Module):
    """``(B, D, h, w)`` token map at stride ``s`` -> ``OrderedDict`` of ``levels`` maps
    ``(B, out_channels, h * f, w * f)`` for ``f`` in ``2, 1, 1/2 (, 1/4)``."""

    def __init__(self, in_channels: int, out_channels: int, levels: int = 3) -> None:
        super().__init__()
        if levels not in (3, 4):
            raise ValueError(f"the simple feature pyramid has 3 or 4 levels, got {levels}")
        self.out_channels = out_channels  # read by torchvision's FCOS
        self.levels = levels
        d = in_channels
        self.resample = nn.ModuleList([
            nn.ConvTranspose2d(d, d // 2, kernel_size=2, stride=2),  # x2
            nn.Identity(),                                            # x1
            nn.MaxPool2d(kernel_size=2, stride=2),                    # x1/2
        ])
        dims = (d // 2, d, d)
        self.proj = nn.ModuleList([nn.Sequential(
            nn.Conv2d(c, out_channels, 1, bias=False), LayerNorm2d(out_channels),
            nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False), LayerNorm2d(out_channels),
        ) for c in dims])

    def forward(self, x: Tensor) -> "OrderedDict[str, Tensor]":
        out: OrderedDict[str, Tensor] = OrderedDict()
        for i, (rs, proj) in enumerate(zip(self.resample, self.proj)):
            out[str(i)] = proj(rs(x))
        if self.levels == 4:
            out["3"] = nn.functional.max_pool2d(out["2"], kernel_size=1, stride=2)  # LastLevelMaxPool
        return out

    def strides(self, token_stride: int) -> list[float]:
        """Pixel stride of each level for a token map at ``token_stride``."""
        s = [token_stride / 2, float(token_stride), 2.0 * token_stride]
        return s + [4.0 * token_stride] if self.levels == 4 else s


class Detector(nn.Module):
    """Simple feature pyramid + torchvision FCOS head / loss / post-processing on a token map.

    ``forward(feature_map, image_sizes, targets)`` with ``feature_map`` ``(B, D, h, w)`` at
    ``token_stride`` pixels, ``image_sizes`` the un-padded ``(H, W)`` of each input (boxes are clipped
    to it) and ``padded_hw`` the input's size -> losses (``targets`` given) or detections
    (``[{"boxes" (n, 4) xyxy input px, "scores" (n,), "labels" (n,)}]``)."""

    def __init__(self, in_channels: int, num_classes: int, token_stride: int, out_channels: int = 128,
                 levels: int = 3, head_convs: int = 4, score_thresh: float = 0.05, nms_thresh: float = 0.6,
                 detections_per_img: int = 100, topk_candidates: int = 1000,
                 center_sampling_radius: float = 1.5) -> None:
        super().__init__()
        if out_channels % 32:
            raise ValueError(f"out_channels must be a multiple of 32 (the FCOS head's GroupNorm(32)), "
                             f"got {out_channels}")
        pyramid = SimpleFeaturePyramid(in_channels, out_channels, levels)
        sizes = tuple((s,) for s in pyramid.strides(token_stride))  # anchor size = level stride (FCOS)
        anchors = AnchorGenerator(sizes, ((1.0,),) * len(sizes))
        head = FCOSHead(out_channels, 1, num_classes, num_convs=head_convs)
        # FCOS's own transform is never used (see the module docstring); its sizes are irrelevant
        self.fcos = FCOS(pyramid, num_classes, anchor_generator=anchors, head=head,
                         center_sampling_radius=center_sampling_radius, score_thresh=score_thresh,
                         nms_thresh=nms_thresh, detections_per_img=detections_per_img,
                         topk_candidates=topk_candidates)
        self.token_stride = token_stride

    @property
    def pyramid(self) -> SimpleFeaturePyramid:
        return self.fcos.backbone

    def forward(self, feature_map: Tensor, padded_hw: Sequence[int], image_sizes: list[tuple[int, int]],
                targets: list[dict] | None = None, detect: bool = True
                ) -> tuple[dict[str, Tensor] | None, list[dict[str, Tensor]] | None]:
        """-> (losses or None, detections or None): losses when ``targets`` is given, detections when
        ``detect``."""
        feats = list(self.pyramid(feature_map).values())
        head_outputs = self.fcos.head(feats)
        # anchor points: strides come from padded_hw / level size (an ImageList of the right shape)
        B = feature_map.shape[0]
        shell = torch.empty((B, 0, int(padded_hw[0]), int(padded_hw[1])), device=feature_map.device,
                            dtype=feature_map.dtype)
        anchors = self.fcos.anchor_generator(ImageList(shell, image_sizes), feats)
        n_per_level = [f.shape[2] * f.shape[3] for f in feats]
        losses = dets = None
        if targets is not None:
            losses = self.fcos.compute_loss(targets, head_outputs, anchors, n_per_level)
        if detect:
            split_out = {k: list(v.split(n_per_level, dim=1)) for k, v in head_outputs.items()}
            split_anchors = [list(a.split(n_per_level)) for a in anchors]
            dets = self.fcos.postprocess_detections(split_out, split_anchors, image_sizes)
        return losses, dets
