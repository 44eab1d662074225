"""DINO's teacher never sees the training-time coordinate augmentation (``--coord-aug``): its backbone
stays in evaluation mode as DINOv3's teacher does, while the student's coords are augmented."""
from __future__ import annotations

import pytest
import torch

from pebench.models.vit import set_coord_augment


def _task(pe: str):
    from pebench.tasks.dino import DinoTask

    # no stochastic depth in the student either, so that only the augmentation can change an output
    return DinoTask(num_classes=4, model="vit-nano", pe=pe, patch_size=4, train_grid=(8, 8), out_dim=16,
                    head_hidden=16, head_bottleneck=8, drop_path=0.0)


def _outputs(task, net: str, views, aug: str, seed: int = 0):
    set_coord_augment(task, aug)
    torch.manual_seed(seed)  # the augmentation's draws
    with torch.no_grad():
        return torch.cat(task.forward_views(getattr(task, net), views))  # (V * B, K)


@pytest.mark.parametrize("pe", ["rope-axial", "alibi"])
def test_teacher_output_ignores_coord_augment_student_output_does_not(pe):
    torch.manual_seed(0)
    task = _task(pe)
    task.train()  # what Lightning does at the start of fitting
    views = [torch.randn(3, 3, 32, 32), torch.randn(3, 3, 32, 32), torch.randn(3, 3, 16, 16)]
    plain_t = _outputs(task, "teacher", views[:2], "none")
    aug_t = _outputs(task, "teacher", views[:2], "dinov3")
    assert torch.equal(aug_t, plain_t)
    plain_s = _outputs(task, "student", views, "none")
    aug_s = _outputs(task, "student", views, "dinov3")
    assert (aug_s - plain_s).abs().max() > 1e-4  # the student's coords are rescaled
    # the student's augmentation is random, the teacher's output is not: two draws differ for the student only
    assert not torch.equal(_outputs(task, "student", views, "dinov3", seed=1), aug_s)
    assert torch.equal(_outputs(task, "teacher", views[:2], "dinov3", seed=1), plain_t)


def test_teacher_backbone_stays_in_eval_mode_through_mode_changes_and_feature_extraction():
    task = _task("rope-axial")
    set_coord_augment(task, "dinov3")
    for mode in (True, False, True):
        task.train(mode)
        assert not task.teacher["backbone"].training and not task.teacher["backbone"].coord_aug.training
        assert task.student["backbone"].coord_aug.training is mode and task.teacher["head"].training is mode
    task._feats(torch.randn(2, 3, 32, 32))  # evaluation features put the teacher in eval and back
    assert task.teacher["head"].training and task.teacher["tokenizer"].training
    assert not task.teacher["backbone"].training
