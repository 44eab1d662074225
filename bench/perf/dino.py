"""``bench perf dino``: cost of the DINO task (``--task dino``).

* Multi-crop overhead: one DINO training step (teacher forward on the 2 global crops, student
  forward + backward on all 2 + N crops, loss, centre, AdamW, EMA) against classification
  training steps on the same 2 + N crops (one forward + backward + AdamW per crop size group,
  the same backbone, a linear head) -- seconds per batch, ratio DINO / classification, target
  <= 1.1. The DINO step does strictly more work (the teacher forward and the projection head),
  so the ratio shows what that work costs. Two more rows split it: the teacher forward alone (the
  floor of the ratio: it cannot be skipped) and the step without it (head, loss, centre, EMA).
* Per-checkpoint EED evaluation (:func:`pebench.analysis.geometry.geometry` without RPI, the
  call the task makes after each epoch) against one training epoch of the embedded ``objects``
  set at its default size (steps per epoch x the measured DINO step time), target <= 0.10.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from pebench.analysis.geometry import geometry
from pebench.datamodules import build_datamodule
from pebench.tasks.dino import DinoTask
from pebench.tasks.dino.head import dino_loss, ema_update, update_center

from .report import record
from .suites import SUITES
from .timing import interleaved

__all__ = ["bench_dino"]


@SUITES.register("dino")
def bench_dino(quick: bool = False) -> list[dict]:
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model, batch, n_local = ("vit-nano", 4, 2) if quick else ("vit-nano12", 64 if dev.type == "cpu" else 256, 4)
    reps = 1 if quick else 2
    head = dict(out_dim=64, head_hidden=64, head_bottleneck=32) if quick else \
        dict(out_dim=1024, head_hidden=512, head_bottleneck=128)
    torch.manual_seed(0)
    task = DinoTask(num_classes=10, model=model, pe="rope-axial", patch_size=4, train_grid=(8, 8), **head).to(dev)
    views = [torch.randn(batch, 3, 32, 32, device=dev) for _ in range(2)]
    views += [torch.randn(batch, 3, 16, 16, device=dev) for _ in range(n_local)]
    opt = torch.optim.AdamW(task.student.parameters(), lr=1e-4)
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)

    def dino_step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            t_out = task.forward_views(task.teacher, views[:2])
        s_out = task.forward_views(task.student, views)
        dino_loss(s_out, t_out, task.center, 0.04).backward()
        task.center.copy_(update_center(task.center, t_out))
        opt.step()
        ema_update(task.teacher.parameters(), task.student.parameters(), 0.996)
        sync()

    dim = task.backbone.embed_dim
    linear = torch.nn.Linear(dim, 10).to(dev)
    cls_params = [*task.student["tokenizer"].parameters(), *task.student["backbone"].parameters(),
                  *linear.parameters()]
    cls_opt = torch.optim.AdamW(cls_params, lr=1e-4)
    groups = [torch.cat(views[:2]), torch.cat(views[2:])] if n_local else [torch.cat(views[:2])]
    labels = [torch.randint(0, 10, (g.shape[0],), device=dev) for g in groups]

    def cls_steps() -> None:
        for x, y in zip(groups, labels):
            cls_opt.zero_grad(set_to_none=True)
            F.cross_entropy(linear(task._pooled(task.student, x)), y).backward()
            cls_opt.step()
        sync()

    @torch.no_grad()
    def teacher_forward() -> None:
        task.forward_views(task.teacher, views[:2])
        sync()

    t = interleaved({"dino": dino_step, "cls": cls_steps, "teacher": teacher_forward}, reps, warmup=1)
    name = f"{model} b{batch} 2x32px + {n_local}x16px"
    rows = [record(f"dino train step {name}", "dino step",
                   "classification steps, same crops", t["dino"], t["cls"], "s", higher_is_better=False, target=1.1,
                   note="DINO adds a teacher forward on the 2 global crops and the projection head"),
            # the part of the ratio that no implementation can remove: the teacher must see the global crops
            record(f"dino teacher forward {name}", "teacher forward, 2 global crops",
                   "classification steps, same crops", t["teacher"], t["cls"], "s", higher_is_better=False,
                   note="floor of the step ratio above: 1 + this ratio"),
            record(f"dino step without its teacher forward {name}", "dino step - teacher forward",
                   "classification steps, same crops", t["dino"] - t["teacher"], t["cls"], "s",
                   higher_is_better=False, target=1.1,
                   note="the rest of DINO's overhead: projection head, loss, centre, one AdamW step, EMA")]
    dm = build_datamodule("objects", batch_size=batch, **({"train_size": 16, "val_size": 8} if quick else {}))
    probe = 8 if quick else 256
    g = interleaved({"eed": lambda: geometry(task, dm, probe_size=probe, rpi=False)}, 1 if quick else 2, warmup=1)
    steps = math.ceil(dm.train_size / batch)
    rows.append(record(f"dino EED per checkpoint (probe {probe}) vs one objects epoch ({steps} steps)",
                       "EED + SSDC per layer", "training epoch", g["eed"], steps * t["dino"], "s",
                       higher_is_better=False, target=0.10,
                       note="epoch time = steps x the DINO step time above (data loading not included)"))
    return rows
