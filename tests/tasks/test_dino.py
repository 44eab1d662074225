"""DINO task (``--task dino``): loss, centre, EMA, schedules and k-NN against direct
re-derivations; multi-crop and the embedded objects / textures sets; every 2-D PE on the crops'
grids; end-to-end runs on the embedded set and (fast-dev-run) on the real-dataset fixtures."""
from __future__ import annotations

import json
import math

import fixtures_real as F
import numpy as np
import pytest
import torch
import torchvision.transforms.v2 as v2
from ddp_support import child_env, free_port

from pebench.cli import main
from pebench.datamodules import build_datamodule
from pebench.tasks.dino.head import (
    DINOHead,
    cosine_schedule,
    dino_loss,
    ema_update,
    teacher_entropies,
    teacher_temperature,
    update_center,
)
from pebench.tasks.dino.knn import gather_eval_set, knn_accuracy, knn_predict
from pebench.tasks.dino.multicrop import DinoDataModule, MultiCropTransform, multicrop_collate

TINY_HEAD = ["--task-option", "out_dim=32", "--task-option", "head_hidden=32", "--task-option", "head_bottleneck=16"]


# ------------------------------------------------------------------ loss, centre, EMA, schedules
def _ce(t_view, s_view, center, t_temp, s_temp):
    """mean over samples b of -sum_k P_t[b, k] log P_s[b, k], element by element in float64."""
    t, sv, c = t_view.double().numpy(), s_view.double().numpy(), center.double().numpy().reshape(-1)
    per_sample = []
    for b in range(t.shape[0]):
        z = (t[b] - c) / t_temp
        p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        y = sv[b] / s_temp
        logq = y - (y.max() + math.log(np.exp(y - y.max()).sum()))
        per_sample.append(-(p * logq).sum())
    return float(np.mean(per_sample))


def _loss_reference(student, teacher, center, t_temp, s_temp):
    """Mean over every (teacher global view i, student view v != i) of :func:`_ce`."""
    return float(np.mean([_ce(ti, sv, center, t_temp, s_temp) for i, ti in enumerate(teacher)
                          for v, sv in enumerate(student) if v != i]))


@pytest.mark.parametrize("n_views", [2, 5])
def test_dino_loss_matches_the_formula(n_views):
    g = torch.Generator().manual_seed(n_views)
    B, K = 3, 7
    student = [torch.randn(B, K, generator=g) * 2 for _ in range(n_views)]
    teacher = [torch.randn(B, K, generator=g) * 2 for _ in range(2)]
    center = torch.randn(1, K, generator=g)
    got = dino_loss(student, teacher, center, 0.04, 0.1)
    assert got.item() == pytest.approx(_loss_reference(student, teacher, center, 0.04, 0.1), rel=1e-5)
    # the same-view pairs are excluded: with 2 views, each teacher view meets only the other student view
    if n_views == 2:
        only_cross = 0.5 * (_ce(teacher[0], student[1], center, 0.04, 0.1)
                            + _ce(teacher[1], student[0], center, 0.04, 0.1))
        assert got.item() == pytest.approx(only_cross, rel=1e-5)


def test_dino_loss_gradient_reaches_only_the_student():
    s = [torch.randn(2, 5, requires_grad=True) for _ in range(3)]
    t = [torch.randn(2, 5, requires_grad=True) for _ in range(2)]
    dino_loss(s, t, torch.zeros(1, 5), 0.04).backward()
    assert all(x.grad is not None for x in s) and all(x.grad is None for x in t)


def test_center_update_is_ema_of_the_batch_mean():
    c = torch.tensor([[1.0, -2.0, 0.5]])
    t = [torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]), torch.tensor([[0.0, 0.0, 0.0], [4.0, 4.0, 4.0]])]
    mean = torch.tensor([[2.0, 2.0, 2.0]])  # over all 4 teacher outputs
    torch.testing.assert_close(update_center(c, t, 0.9), 0.9 * c + 0.1 * mean)


def test_ema_update():
    t = [torch.tensor([1.0, 2.0]), torch.tensor([[3.0]])]
    s = [torch.tensor([3.0, 0.0]), torch.tensor([[-1.0]])]
    ema_update(t, s, 0.75)
    torch.testing.assert_close(t[0], torch.tensor([1.5, 1.5]))
    torch.testing.assert_close(t[1], torch.tensor([[2.0]]))


def test_ema_update_batched_equals_the_per_tensor_update_bitwise():
    g = torch.Generator().manual_seed(0)
    t = [torch.randn(7, 5, generator=g), torch.randn(3, generator=g), torch.randn(2, 2, 2, generator=g)]
    s = [torch.randn_like(x) for x in t]
    expected = [x.clone().mul_(0.9961).add_(y, alpha=1.0 - 0.9961) for x, y in zip(t, s)]
    ema_update(t, s, 0.9961)
    for got, want in zip(t, expected):
        assert torch.equal(got, want)


def test_teacher_entropies_detect_both_collapses():
    K = 8
    # uniform collapse (teacher output = centre): every distribution uniform, H = log K both ways
    hs, hm = teacher_entropies([torch.ones(4, K), torch.ones(4, K)], torch.ones(1, K), 0.04)
    assert hs.item() == pytest.approx(math.log(K)) and hm.item() == pytest.approx(math.log(K))
    # one-prototype collapse: every sample sharp on prototype 3 -> both entropies ~ 0
    sharp = torch.zeros(4, K)
    sharp[:, 3] = 1.0
    hs, hm = teacher_entropies([sharp, sharp], torch.zeros(1, K), 0.04)
    assert hs.item() < 1e-6 and hm.item() < 1e-6
    # healthy: each sample sharp on its own prototype -> per-sample ~ 0, batch mean ~ log(#distinct)
    hs, hm = teacher_entropies([torch.eye(K)[:4], torch.eye(K)[4:]], torch.zeros(1, K), 0.04)
    assert hs.item() < 1e-6 and hm.item() == pytest.approx(math.log(K), rel=1e-6)
    # random logits against numpy, element by element
    g = torch.Generator().manual_seed(0)
    t, c = [torch.randn(3, K, generator=g) for _ in range(2)], torch.randn(1, K, generator=g)
    z = (np.concatenate([x.double().numpy() for x in t]) - c.double().numpy()) / 0.07
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    ref_sample = float(np.mean(-(p * np.log(p)).sum(1)))
    m = p.mean(0)
    hs, hm = teacher_entropies(t, c, 0.07)
    assert hs.item() == pytest.approx(ref_sample, rel=1e-5) and hm.item() == pytest.approx(float(-(m * np.log(m)).sum()), rel=1e-5)


def test_schedules():
    # cosine 0.996 -> 1 without warm-up: start, middle, (near) end
    assert cosine_schedule(0, 100, 0.996, 1.0) == pytest.approx(0.996)
    assert cosine_schedule(50, 100, 0.996, 1.0) == pytest.approx(0.998)
    assert cosine_schedule(100, 100, 0.996, 1.0) == pytest.approx(1.0)
    # linear warm-up 0 -> base over 10 steps, then cosine base -> final over the other 90
    assert cosine_schedule(5, 100, 1.0, 0.0, warmup_steps=10) == pytest.approx(0.5)
    assert cosine_schedule(10, 100, 1.0, 0.0, warmup_steps=10) == pytest.approx(1.0)
    assert cosine_schedule(55, 100, 1.0, 0.0, warmup_steps=10) == pytest.approx(0.5)
    # teacher temperature: linspace(0.04, 0.07, 4) over 4 epochs, then 0.07
    assert [teacher_temperature(e, 4) for e in range(6)] == pytest.approx([0.04, 0.05, 0.06, 0.07, 0.07, 0.07])


def test_head_last_layer_is_weight_normalised():
    head = DINOHead(16, out_dim=40, hidden_dim=24, bottleneck_dim=8)
    with torch.no_grad():
        head.last_layer.mul_(torch.arange(1, 41, dtype=torch.float32)[:, None])  # row scale must not matter
    out = head(torch.randn(5, 16))
    assert out.shape == (5, 40)
    z = torch.nn.functional.normalize(head.mlp(torch.zeros(1, 16) + 1.0), dim=-1)
    w = head.last_layer / head.last_layer.norm(dim=1, keepdim=True)
    torch.testing.assert_close(head(torch.zeros(1, 16) + 1.0), z @ w.T)
    assert out.abs().max() <= 1.0 + 1e-5  # cosines


def test_head_batch_norm_option():
    plain = DINOHead(16, out_dim=40, hidden_dim=24, bottleneck_dim=8)
    bn = DINOHead(16, out_dim=40, hidden_dim=24, bottleneck_dim=8, use_bn=True)
    assert not any(isinstance(m, torch.nn.BatchNorm1d) for m in plain.mlp)
    kinds = [type(m).__name__ for m in bn.mlp]  # Linear -> BN -> GELU per hidden layer, plain bottleneck Linear
    assert kinds == ["Linear", "BatchNorm1d", "GELU", "Linear", "BatchNorm1d", "GELU", "Linear"]
    bn.train()
    x = torch.randn(6, 16) * 5 + 3
    h = bn.mlp[1](bn.mlp[0](x))  # the batch-normalised hidden pre-activation: zero mean, unit variance per unit
    torch.testing.assert_close(h.mean(0), torch.zeros(24), atol=1e-5, rtol=0)
    assert bn(x).shape == (6, 40)


# ------------------------------------------------------------------ k-NN
def _knn_numpy(train, train_y, query, C, k, T):
    train = train / np.linalg.norm(train, axis=1, keepdims=True)
    query = query / np.linalg.norm(query, axis=1, keepdims=True)
    out = np.zeros((len(query), C))
    for q in range(len(query)):
        sims = np.array([float(np.dot(query[q], t)) for t in train])
        for j in np.argsort(-sims, kind="stable")[:k]:
            out[q, train_y[j]] += math.exp(sims[j] / T)
    return out


def test_knn_matches_naive_numpy():
    rng = np.random.default_rng(0)
    train, query = rng.standard_normal((60, 6)), rng.standard_normal((17, 6))
    train_y, query_y = rng.integers(0, 5, 60), rng.integers(0, 5, 17)
    ref = _knn_numpy(train, train_y, query, 5, 20, 0.07)
    got = knn_predict(torch.tensor(train), torch.tensor(train_y), torch.tensor(query), 5, k=20, temperature=0.07,
                      chunk=4)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4)
    acc = knn_accuracy(got, torch.tensor(query_y), (1, 5))
    assert acc[1] == pytest.approx(float(np.mean(ref.argmax(1) == query_y)))
    assert acc[5] == 1.0  # 5 classes
    # k larger than the bank: every training sample votes
    small = knn_predict(torch.tensor(train[:3]), torch.tensor(train_y[:3]), torch.tensor(query), 5, k=20)
    np.testing.assert_allclose(small.numpy(), _knn_numpy(train[:3], train_y[:3], query, 5, 3, 0.07), rtol=1e-4)


def test_linear_probe_separates_separable_features():
    from pebench.tasks.dino.knn import linear_probe

    g = torch.Generator().manual_seed(0)
    centres = torch.randn(3, 8, generator=g) * 4
    y_tr, y_te = torch.arange(60) % 3, torch.arange(30) % 3
    x_tr = centres[y_tr] + 0.3 * torch.randn(60, 8, generator=g)
    x_te = centres[y_te] + 0.3 * torch.randn(30, 8, generator=g)
    assert linear_probe(x_tr, y_tr, x_te, y_te, 3) == 1.0
    # shuffled training labels carry no information: far from perfect on the test set
    assert linear_probe(x_tr, y_tr[torch.randperm(60, generator=g)], x_te, y_te, 3) < 0.8


def test_gather_eval_set_orders_by_index_in_one_process():
    f = torch.arange(8.0).view(4, 2)
    feats, labels = gather_eval_set(f, torch.tensor([0, 1, 2, 3]), torch.tensor([3, 0, 2, 1]))
    torch.testing.assert_close(feats, f[[1, 3, 2, 0]])
    assert labels.tolist() == [1, 3, 2, 0]


# ------------------------------------------------------------------ data
@pytest.mark.parametrize("name,classes", [("objects", 10), ("textures", 8)])
def test_embedded_sets_are_deterministic(name, classes):
    a = build_datamodule(name, train_size=40, val_size=8, seed=3)
    b = build_datamodule(name, train_size=40, val_size=8, seed=3)
    xa, ya = a.train_dataset()[5]
    xb, yb = b.train_dataset()[5]
    assert xa.shape == (3, 32, 32) and ya == yb and torch.equal(xa, xb)
    assert a.num_classes == classes
    assert len({a.train_dataset()[i][1] for i in range(40)}) > classes // 2
    # same scene at another side length (resolution-independent rendering)
    assert a.val_dataset(48)[0][1] == a.val_dataset()[0][1]
    assert not torch.equal(a.train_dataset()[0][0], a.val_dataset()[0][0])  # splits differ


def test_objects_size_and_clutter_options():
    from pebench.datamodules.synthetic.objects import objects_scene

    for i in range(20):
        big = objects_scene(np.random.default_rng([0, 0, i]), object_size=(0.35, 0.45), clutter=(0, 2),
                            background=(0.3, 0.35))
        plain = objects_scene(np.random.default_rng([0, 0, i]))
        assert 0.35 <= big["r"] <= 0.45 and len(big["clutter_kinds"]) <= 2
        assert 0.3 <= big["bg"].min() and big["bg"].max() <= 0.35
        assert 0.18 <= plain["r"] <= 0.30 and 6 <= len(plain["clutter_kinds"]) <= 12 and plain["bg"].max() <= 0.6
        assert big["label"] == plain["label"]  # the same draws: only the ranges differ
    dm = build_datamodule("objects", train_size=4, val_size=4, object_size=[0.3, 0.3], clutter=[0, 0])
    assert dm.object_size == (0.3, 0.3) and dm.clutter == (0, 0)
    for bad in ({"object_size": [0.3]}, {"object_size": [0.4, 0.2]}, {"object_size": [0.2, 0.6]},
                {"clutter": [3, 1]}, {"clutter": "many"}, {"background": [0.5, 1.5]}):
        with pytest.raises(ValueError, match="object_size|clutter|background"):
            build_datamodule("objects", train_size=4, val_size=4, **bad)


def test_multicrop_views_and_collate():
    dm = build_datamodule("objects", train_size=8, val_size=4, batch_size=4)
    wrapped = DinoDataModule(dm, 32, 16, 3)
    views = wrapped.transform(dm.train_dataset()[0][0])
    assert [tuple(v.shape) for v in views] == [(3, 32, 32)] * 2 + [(3, 16, 16)] * 3
    batch = multicrop_collate([(views, 1), None, (views, 2)])
    assert len(batch[0]) == 5 and batch[0][0].shape == (2, 3, 32, 32) and batch[1].tolist() == [1, 2]
    assert batch[2] == {"skipped": 1}
    # wrapper delegates to the dataset's datamodule; bank = train split, query = test split, with indices
    assert wrapped.num_classes == 10 and wrapped.modality == "image"
    bank, query = wrapped.val_dataloader()
    x, y, idx = next(iter(bank))
    assert x.shape == (4, 3, 32, 32) and idx.tolist() == [0, 1, 2, 3]
    torch.testing.assert_close(x[1], dm.train_dataset()[1][0])
    assert len(query.dataset) == 4
    t = MultiCropTransform(32, 16, 0)
    assert len(t(dm.train_dataset()[1][0])) == 2  # no local crops


def test_multicrop_colour_options_reach_every_view():
    dm = build_datamodule("objects", train_size=4, val_size=4)
    img = dm.train_dataset()[0][0]
    torch.manual_seed(0)
    t = MultiCropTransform(32, 16, 2, colour_jitter=(0.8, 0.7, 0.6, 0.5), grayscale_p=1.0)
    for view in t(img):  # grayscale always: the three de-normalised channels are equal
        rgb = view * t.std + t.mean
        torch.testing.assert_close(rgb[0], rgb[1], atol=1e-5, rtol=0)
        torch.testing.assert_close(rgb[1], rgb[2], atol=1e-5, rtol=0)
    for comp in (t.global1, t.global2, t.local):
        jitter = [m for m in comp.transforms if isinstance(m, v2.RandomApply)][0].transforms[0]
        assert isinstance(jitter, v2.ColorJitter)
        assert jitter.brightness == pytest.approx((0.2, 1.8)) and jitter.contrast == pytest.approx((0.3, 1.7))
        assert jitter.saturation == pytest.approx((0.4, 1.6)) and jitter.hue == pytest.approx((-0.5, 0.5))
    base = MultiCropTransform(32, 16, 1)  # the official strengths by default
    jitter = [m for m in base.local.transforms if isinstance(m, v2.RandomApply)][0].transforms[0]
    assert jitter.brightness == pytest.approx((0.6, 1.4)) and jitter.hue == pytest.approx((-0.1, 0.1))
    with pytest.raises(ValueError, match="colour_jitter"):
        MultiCropTransform(32, 16, 1, colour_jitter=(0.4, 0.4, 0.2, 0.6))


# ------------------------------------------------------------------ the task
def _task(pe: str, **kw):
    from pebench.tasks.dino import DinoTask

    return DinoTask(num_classes=4, model="vit-nano", pe=pe, patch_size=4, train_grid=(8, 8), out_dim=16,
                    head_hidden=16, head_bottleneck=8, **kw)


def _image_pes():
    from pebench.encodings import get_pe_class, list_pes

    return [p for p in list_pes() if "image" in tuple(get_pe_class(p).modalities)]


@pytest.mark.parametrize("pe", _image_pes())
def test_every_image_pe_takes_global_and_local_grids(pe):
    torch.manual_seed(0)
    task = _task(pe)
    views = [torch.randn(2, 3, 32, 32), torch.randn(2, 3, 32, 32), torch.randn(2, 3, 16, 16)]
    out = task.forward_views(task.student, views)
    assert [tuple(o.shape) for o in out] == [(2, 16)] * 3 and all(torch.isfinite(o).all() for o in out)
    # views run as size groups; a local view alone gives the same output (own 4x4 grid, own coords)
    task.eval()
    with torch.no_grad():
        alone = task.forward_views(task.student, views[2:])[0]
        grouped = task.forward_views(task.student, views)[2]
    torch.testing.assert_close(alone, grouped, rtol=1e-4, atol=1e-5)


def test_teacher_starts_as_student_and_gets_no_gradient():
    task = _task("rope-axial")
    for (n, s), t in zip(task.student.named_parameters(), task.teacher.parameters()):
        assert torch.equal(s, t), n
        assert not t.requires_grad
    names = {n for g in task.param_groups() for n in [id(p) for p in g["params"]]}
    assert names == {id(p) for p in task.student.parameters()}
    decay = task.param_groups()[0]["params"]
    assert all(p.ndim > 1 for p in decay)


def test_clipping_is_per_parameter_and_last_layer_frozen_in_epoch_0():
    task = _task("none", clip_grad=3.0, freeze_last_layer=1)
    assert task.current_epoch == 0  # no trainer attached: epoch 0
    for p in task.student.parameters():
        p.grad = torch.full_like(p, 10.0)
    small = task.student["head"].mlp[0].bias
    small.grad = torch.full_like(small, 1e-3)  # below the threshold: unchanged
    task.on_before_optimizer_step(None)
    assert task.student["head"].last_layer.grad is None
    torch.testing.assert_close(small.grad, torch.full_like(small, 1e-3))
    for n, p in task.student.named_parameters():
        if p.grad is not None and p is not small:
            assert p.grad.norm().item() == pytest.approx(3.0, rel=1e-4), n


def test_batched_clipping_equals_the_per_parameter_loop_bitwise():
    task = _task("none", clip_grad=3.0, freeze_last_layer=0)
    g = torch.Generator().manual_seed(1)
    for p in task.student.parameters():
        p.grad = torch.randn(p.shape, generator=g) * float(torch.rand((), generator=g) * 4)
    expected, norms = [], []
    for p in task.student.parameters():  # the official loop: scale each gradient to norm <= clip
        norms.append(p.grad.norm(2).item())
        expected.append(p.grad * torch.clamp(3.0 / (p.grad.norm(2) + 1e-6), max=1.0))
    assert min(norms) < 3.0 < max(norms)  # both branches of the clamp are exercised
    task.on_before_optimizer_step(None)
    for p, want in zip(task.student.parameters(), expected):
        assert torch.equal(p.grad, want)


def test_multicrop_views_stay_finite_where_bicubic_overshoots():
    """Red = green = a sharp checkerboard, blue exactly 0: the bicubic resize undershoots 0 in red
    and green where blue is 0, a pixel on which the colour jitter's RGB -> HSV round trip gives NaN
    (30 of 50 calls had a NaN view before the resize was clamped back to [0, 1])."""
    yy, xx = torch.meshgrid(torch.arange(32), torch.arange(32), indexing="ij")
    board = (((yy // 4) + (xx // 4)) % 2).float()
    x = torch.stack([board, board, torch.zeros_like(board)])  # (3, 32, 32) in [0, 1]
    t = MultiCropTransform(32, 16, 2)
    img = (x - t.mean) / t.std
    torch.manual_seed(0)
    for _ in range(50):
        for v in t(img):
            assert torch.isfinite(v).all()


# ------------------------------------------------------------------ end to end
def _results(root):
    found = list(root.glob("**/results.json"))
    assert len(found) == 1
    return json.loads(found[0].read_text())


@pytest.mark.slow
def test_run_dino_objects_pape_records_knn_and_eed(tmp_path):
    rc = main(["run", "--task", "dino", "--dataset", "objects", "--pe", "pape", "--model", "vit-nano", "--epochs", "1",
               "--warmup-epochs", "0", "--batch-size", "8", "--data-option", "train_size=16", "--data-option", "val_size=8",
               "--task-option", "n_local=1", "--task-option", "eed_probe_size=8", *TINY_HEAD,
               "--out", str(tmp_path), "--no-progress-bar", "--analyses", "none"])
    assert rc in (0, None)
    r = _results(tmp_path)
    assert r["task"] == "dino" and r["primary_metric"] == "test/knn_top1" and r["status"] == "complete"
    for k in ("test/knn_top1", "test/knn_top5", "test/linear_top1", "test/knn_top1_init", "test/linear_top1_init"):
        assert 0.0 <= r["metrics"][k] <= 1.0, k
    assert [h["epoch"] for h in r["eed_checkpoints"]] == [0, 1]  # at init and after the epoch
    for h in r["eed_checkpoints"]:
        assert len(h["eed_percent"]) == 4 and all(0 < e <= 100 for e in h["eed_percent"])
        assert len(h["ssdc"]) == 4
    # training moved the teacher: EED at init and after training differ
    assert r["eed_checkpoints"][0]["eed_percent"] != r["eed_checkpoints"][-1]["eed_percent"]
    png = next(tmp_path.rglob("eed_checkpoints.png"))  # EED / SSDC over depth, one line per checkpoint
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.parametrize("name,folder", [("cifar100", "cifar"), ("tiny-imagenet", "tiny"), ("ucmerced", "ucm")])
def test_dino_fast_dev_run_on_real_fixtures(name, folder, tmp_path):
    roots = {"cifar100": F.cifar100, "tiny-imagenet": F.tiny_imagenet, "ucmerced": F.ucmerced}
    root = roots[name](tmp_path / folder)
    rc = main(["run", "--preset", f"{name}-dino-smoke", "--data-root", str(root), "--fast-dev-run",
               "--out", str(tmp_path / "runs"), "--no-progress-bar"])
    assert rc in (0, None)
    r = _results(tmp_path / "runs")
    assert r["task"] == "dino" and "test/knn_top1" in r["metrics"]
    assert r["eed_checkpoints"] and r["eed_checkpoints"][-1]["epoch"] == 1


def test_dino_user_errors_exit_2(tmp_path, capsys):
    base = ["run", "--task", "dino", "--out", str(tmp_path), "--epochs", "1"]
    assert main(base + ["--dataset", "objects", "--task-option", "nope=1"]) == 2
    assert "unknown task option 'nope'" in capsys.readouterr().err
    assert main(base + ["--dataset", "objects", "--task-option", "local_size=18"]) == 2
    assert "not a positive multiple of the patch size" in capsys.readouterr().err
    assert main(base + ["--dataset", "objects", "--task-option", "colour_jitter=[0.4,0.4]"]) == 2
    assert "colour_jitter must be" in capsys.readouterr().err
    assert main(base + ["--dataset", "objects", "--task-option", "grayscale_p=1.5"]) == 2
    assert "grayscale_p must be a probability" in capsys.readouterr().err
    assert main(base + ["--dataset", "moving-shapes"]) == 2
    assert "needs an image dataset" in capsys.readouterr().err
    assert main(base + ["--dataset", "objects", "--analyses", "robustness"]) == 2
    assert "does not apply to --task dino" in capsys.readouterr().err
    assert main(["run", "--dataset", "objects", "--task-option", "n_local=2", "--out", str(tmp_path)]) == 2
    assert not any(tmp_path.iterdir())


# ------------------------------------------------------------------ DDP (gloo, 2 processes)
_SHARDS = (5, 2)  # uneven: rank 0 holds 5 samples, rank 1 holds 2


def _ddp_inputs():
    g = torch.Generator().manual_seed(3)
    n = sum(_SHARDS)
    teacher = [torch.randn(n, 6, generator=g) for _ in range(2)]  # 2 global views, (N, K)
    feats, labels = torch.randn(n, 4, generator=g), torch.arange(n) % 3
    index = torch.randperm(n, generator=g)  # dataset positions, shuffled across the shards
    return teacher, feats, labels, index


def _ddp_worker(rank: int, port: int, out_dir: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        teacher, feats, labels, index = _ddp_inputs()
        sl = slice(0, _SHARDS[0]) if rank == 0 else slice(_SHARDS[0], None)
        center = update_center(torch.full((1, 6), 0.5), [t[sl] for t in teacher], momentum=0.9)
        f, y = gather_eval_set(feats[sl], labels[sl], index[sl])
        torch.save({"center": center, "feats": f, "labels": y}, f"{out_dir}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.ddp
@pytest.mark.timeout(180)
def test_ddp_centre_and_eval_gather_equal_the_single_process_ones(tmp_path):
    """Centring averages the teacher outputs of *all* ranks (count-weighted, so uneven shards are
    exact) and the k-NN / linear-probe sets are every rank's samples once, in dataset order."""
    import torch.multiprocessing as mp

    mp.spawn(_ddp_worker, args=(free_port(), str(tmp_path)), nprocs=2, join=True)
    teacher, feats, labels, index = _ddp_inputs()
    want_center = 0.9 * 0.5 + 0.1 * torch.cat(teacher).double().mean(0, keepdim=True)
    order = index.argsort()
    for rank in range(2):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        torch.testing.assert_close(got["center"].double(), want_center, atol=1e-6, rtol=0)
        torch.testing.assert_close(got["feats"], feats[order])
        assert got["labels"].tolist() == labels[order].tolist()


@pytest.mark.ddp
@pytest.mark.slow
def test_ddp_dino_run_evaluates_like_one_process(tmp_path):
    """`bench run --task dino --devices 2 --strategy ddp` on CPU: the evaluation before training
    (k-NN, linear probe, EED per layer) sees the same model and the same test samples on both
    ranks, so it must equal the single-process run's (9 test samples: uneven shards, no padding)."""
    import subprocess
    import sys

    args = ["run", "--task", "dino", "--dataset", "objects", "--pe", "rope-axial", "--model", "vit-nano",
            "--epochs", "1", "--warmup-epochs", "0", "--batch-size", "8", "--data-option", "train_size=16",
            "--data-option", "val_size=9", "--task-option", "n_local=1", "--task-option", "eed_probe_size=9",
            *TINY_HEAD, "--no-progress-bar", "--analyses", "none", "--accelerator", "cpu"]
    env = child_env(OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "pebench.cli", *args, "--devices", "2", "--strategy", "ddp",
                        "--out", str(tmp_path / "ddp")], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
    assert main([*args, "--devices", "1", "--out", str(tmp_path / "single")]) in (0, None)
    ddp, single = _results(tmp_path / "ddp"), _results(tmp_path / "single")
    assert ddp["status"] == single["status"] == "complete"
    for k in ("test/knn_top1_init", "test/knn_top5_init", "test/linear_top1_init"):
        assert ddp["metrics"][k] == pytest.approx(single["metrics"][k], abs=1e-6), k
    e_ddp, e_single = ddp["eed_checkpoints"][0], single["eed_checkpoints"][0]
    assert e_ddp["epoch"] == e_single["epoch"] == 0
    np.testing.assert_allclose(e_ddp["eed_percent"], e_single["eed_percent"], rtol=1e-4)
    np.testing.assert_allclose(e_ddp["ssdc"], e_single["ssdc"], rtol=1e-4, atol=1e-6)
    assert [h["epoch"] for h in ddp["eed_checkpoints"]] == [0, 1]
