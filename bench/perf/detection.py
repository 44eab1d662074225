"""``bench perf detection``: cost of the detection task (``--task detection``, issue #13).

* Head overhead: training samples/s of :class:`~pebench.tasks.detection.DetectionTask`
  (tokenizer -> backbone -> ViTDet simple pyramid -> torchvision FCOS; FCOS losses, backward,
  AdamW step) against :class:`~pebench.models.ClassificationTask` (mean pool + linear head,
  cross-entropy, backward, AdamW step) on the same model preset, PE, patch and token grid and on
  the same image batch (one ``shapes-det`` training batch at its default input side 64, patch 8:
  an 8 x 8 grid). The detector uses the set's own defaults (``detection_defaults``: ``fpn_dim=64``,
  ``head_convs=2``), i.e. the model ``bench run --dataset shapes-det`` trains. Ratio detection /
  classification in samples/s: its inverse is how many times a classification step a detection
  step costs (pyramid + FCOS head, target assignment and losses).
* Data loading vs consumption: samples/s of the ``shapes-det`` train loader (COCO JSON + JPEG
  files read by the ``coco`` reader: pycocotools index, JPEG decode, aspect-preserving resize and
  pad with transforms v2, box conversion; ``num_workers`` = the ``bench run`` default 0, i.e. in
  the training process) against the detection model's training samples/s above. Ratio >= 1: the
  loader keeps up with the model without worker processes.

The two training steps are timed interleaved (A, B, A, B, ...) in one process after warm-up
steps that are not timed (:func:`pebench.perf.timing.interleaved`); the dataset is written into a
temporary cache folder (not ``~/.cache/pebench``) and removed afterwards.
"""
from __future__ import annotations

import tempfile

import torch
import torch.nn.functional as F

from pebench.datamodules import get_datamodule_class
from pebench.runner.run import load_registries, train_grid_for
from pebench.tasks.classification import ClassificationTask
from pebench.tasks.detection import DetectionTask

from .data import loader_rate
from .report import record
from .suites import SUITES
from .timing import interleaved

__all__ = ["bench_detection"]

#: the PE of the comparison: the ``bench run`` default (first of DEFAULT_PE_PREFERENCE)
PE = "pape"


@SUITES.register("detection")
def bench_detection(quick: bool = False) -> list[dict]:
    load_registries()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    batch = 4 if quick else 16  # 16: the README's shapes-det runs (--batch-size 16)
    reps, warmup = (1, 1) if quick else (4, 1)
    min_time = 0.2 if quick else 1.5
    model = "vit-nano"
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="pebench-perf-det-") as tmp:
        sizes = dict(train_size=8 if quick else 128, val_size=1, test_size=1)
        dm = get_datamodule_class("shapes-det")(batch_size=batch, cache_dir=tmp, **sizes)  # num_workers: default 0
        grid = train_grid_for(dm)  # (8, 8) at side 64, patch 8
        rate, first = loader_rate(dm.train_dataloader(), min_time)
        x, targets = first[0].to(dev), list(first[1])  # x (B, 3, S, S); targets: xyxy boxes in the input frame
        B = x.shape[0]

        torch.manual_seed(0)
        det = DetectionTask(modality=dm.modality, num_classes=dm.num_classes, in_chans=dm.in_chans, model=model,
                            pe=PE, patch_size=dm.patch_size, train_grid=grid, **dm.detection_defaults).to(dev)
        torch.manual_seed(0)
        cls = ClassificationTask(dm.modality, dm.num_classes, in_chans=dm.in_chans, model=model, pe=PE,
                                 patch_size=dm.patch_size, train_grid=grid).to(dev)
        det.train()
        cls.train()
        det_opt = torch.optim.AdamW(det.parameters(), lr=1e-4)
        cls_opt = torch.optim.AdamW(cls.parameters(), lr=1e-4)
        # a class per image (its first box's label) for the classification loss; same images either way
        y = torch.stack([t["labels"][0] if len(t["labels"]) else torch.tensor(0) for t in targets]).long().to(dev)
        sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)

        def det_step() -> None:
            det_opt.zero_grad(set_to_none=True)
            losses, _ = det.losses(x, targets)  # FCOS: focal classification + GIoU + centre-ness
            sum(losses.values()).backward()
            det_opt.step()
            sync()

        def cls_step() -> None:
            cls_opt.zero_grad(set_to_none=True)
            F.cross_entropy(cls(x), y).backward()
            cls_opt.step()
            sync()

        t = interleaved({"det": det_step, "cls": cls_step}, reps, warmup=warmup)
        det_sps, cls_sps = B / t["det"], B / t["cls"]
        side = x.shape[-1]
        shape = f"{model} pe={PE} {side}px patch {dm.patch_size} ({grid[0]}x{grid[1]} tokens) b{B}"
        rows.append(record(f"detection train step {shape}", "detection samples/s", "classification samples/s",
                           det_sps, cls_sps, "samples/s",
                           note=f"same backbone, PE, grid and images; detection adds the simple pyramid (strides "
                                f"{dm.patch_size // 2}/{dm.patch_size}/{2 * dm.patch_size}) + FCOS head "
                                f"(fpn_dim={det.hparams.fpn_dim}, head_convs={det.hparams.head_convs}), target "
                                f"assignment and losses: a detection step costs {t['det'] / t['cls']:.1f} "
                                f"classification steps; medians of {reps} steps after {warmup} warm-up"))
        print(f"  {rows[-1]['name']}: {rows[-1]['ratio']:.3f}", flush=True)
        note = (f"shapes-det train loader (COCO JSON + JPEG via the coco reader, resize + pad to {side}), batch "
                f"{dm.batch_size}, num_workers={dm.num_workers}; model = the detection step above")
        if rate < det_sps:
            note += " — loader slower than the model: the step waits on data; use --num-workers N"
        rows.append(record(f"detection data shapes-det ({side}px)", "loader samples/s",
                           "detection train samples/s", rate, det_sps, "samples/s", target=1.0, note=note))
        print(f"  {rows[-1]['name']}: {rows[-1]['ratio']:.3f}", flush=True)
    return rows
