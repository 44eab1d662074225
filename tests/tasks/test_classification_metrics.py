"""The classification task's evaluation metrics against numpy (issue #44: ``mean_class_acc``).

torchmetrics' compute groups merged ``mean_class_acc`` (macro top-1) with ``acc{k}`` (micro top-k) when
the first evaluation batch was 100 % correct (both states agree after that update), so committed runs
read ``mean_class_acc = 1.0`` while ``acc1 < 1``. The batches here reproduce that order: a first batch
with every prediction right, then batches with errors, and every metric is compared with its definition
written out in numpy.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pebench.tasks.classification.module import ClassificationTask


def _reference(logits: np.ndarray, labels: np.ndarray, k: int) -> dict[str, float]:
    """top-1 accuracy, top-k accuracy and the mean over classes of the per-class top-1 recall."""
    pred = logits.argmax(1)
    topk = np.argsort(-logits, axis=1, kind="stable")[:, :k]
    recall = [float(np.mean(pred[labels == c] == c)) for c in np.unique(labels)]
    return {"acc1": float(np.mean(pred == labels)),
            f"acc{k}": float(np.mean([y in row for y, row in zip(labels, topk)])),
            "mean_class_acc": float(np.mean(recall))}


@pytest.mark.parametrize("num_classes", [4, 8])
def test_mean_class_acc_after_a_perfect_first_batch(num_classes):
    task = ClassificationTask("image", num_classes, model="vit-probe", train_grid=(8, 8))
    k = min(5, num_classes)
    rng = np.random.default_rng(0)
    y1 = np.arange(num_classes).repeat(3)  # every class, all right
    l1 = np.eye(num_classes)[y1] * 3.0 + rng.normal(0, 0.1, (y1.size, num_classes))
    y2 = rng.integers(0, num_classes, 40)  # class-imbalanced errors: mostly predicted as class 1
    l2 = rng.normal(0, 1.0, (40, num_classes))
    l2[:, 1] += 2.0
    y3 = np.array([0, 0, 0, 2])  # a few more, so the classes' counts differ
    l3 = rng.normal(0, 1.0, (4, num_classes))
    batches = [(l1, y1), (l2, y2), (l3, y3)]
    for metrics, prefix in ((task.val_metrics, "val/"), (task.test_metrics, "test/")):
        for lg, y in batches:
            metrics.update(torch.tensor(lg, dtype=torch.float32), torch.tensor(y))
        got = {name.removeprefix(prefix): float(v) for name, v in metrics.compute().items()}
        want = _reference(np.concatenate([b[0] for b in batches]).astype(np.float32),
                          np.concatenate([b[1] for b in batches]), k)
        assert got.keys() == want.keys()
        for name in want:
            assert got[name] == pytest.approx(want[name], abs=1e-6), (prefix, name, got, want)
        assert got["acc1"] < 1.0 and got["mean_class_acc"] < 1.0  # the bug read 1.0 here
        assert abs(got["mean_class_acc"] - got["acc1"]) > 1e-3  # imbalanced errors: macro != micro
