"""Tiny fixtures of the real datasets, written into a temporary folder in their official formats.

Real encodings: JPEG / TIFF via PIL, XviD ``.avi`` via ``cv2.VideoWriter`` (fourcc XVID, available
in opencv-python-headless), DVS Gesture ``(N, 4)`` ``x, y, p, t[ms]`` ``.npy`` arrays (what
``tonic.datasets.DVSGesture`` loads), ``.off`` meshes, CIFAR python pickles. A few classes, a few
samples each; ``truncate`` damages a file for the corrupt-sample tests.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

IN_WNIDS = ["n01440764", "n01443537", "n02869837"]  # tench, goldfish (1K idx 0, 1), bonnet (ImageNet-100)
IN100_WNIDS = ["n01558993", "n02869837"]  # both in the CMC list; n01440764 is not


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def write_image(path: Path, size: tuple[int, int] = (40, 48), seed: int = 0, mode: str = "RGB",
                fmt: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    h, w = size
    arr = _rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    img = Image.fromarray(arr).convert(mode)
    img.save(path, format=fmt or ("TIFF" if path.suffix == ".tif" else "JPEG"))
    return path


def truncate(path: Path, keep: float = 0.4) -> Path:
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: max(int(len(data) * keep), 1)])
    return Path(path)


def imagenet(root: Path, wnids=IN_WNIDS, per_class: int = 2, meta_bin: bool = False) -> Path:
    for split in ("train", "val"):
        for ci, w in enumerate(wnids):
            for j in range(per_class):
                write_image(root / split / w / f"{w}_{split}_{j}.JPEG", seed=ci * 10 + j + (split == "val") * 100)
    if meta_bin:
        import torch

        val_wnids = [w for w in wnids for _ in range(per_class)]
        torch.save(({w: (f"class-{w}",) for w in wnids}, val_wnids), root / "meta.bin")
    return root


def imagenet_v2(root: Path, classes=(0, 1, 999), per_class: int = 2) -> Path:
    base = root / "imagenetv2-matched-frequency-format-val"
    for c in classes:
        for j in range(per_class):
            write_image(base / str(c) / f"img{j}.jpeg", seed=c + j)
    return root


def imagenet_r(root: Path, wnids=("n01443537", "n02869837"), per_class: int = 2) -> Path:
    for w in wnids:
        for j in range(per_class):
            write_image(root / "imagenet-r" / w / f"art_{j}.jpg", seed=j)
    return root


def imagenet_hr(root: Path) -> Path:
    write_image(root / "n01440764" / "a.JPEG", size=(96, 128))
    write_image(root / "1" / "b.png", size=(128, 96), fmt="PNG")
    return root


def _py2_str(s: str | bytes) -> bytes:
    """A Python 2 ``str`` as cPickle protocol 2 writes it (SHORT_BINSTRING / BINSTRING)."""
    b = s.encode("latin1") if isinstance(s, str) else s
    if len(b) < 256:
        return b"U" + bytes([len(b)]) + b
    return b"T" + len(b).to_bytes(4, "little") + b


def _py2_int(i: int) -> bytes:
    return b"K" + bytes([i]) if 0 <= i < 256 else b"J" + int(i).to_bytes(4, "little", signed=True)


def _py2_value(v: object) -> bytes:
    if isinstance(v, np.ndarray):  # numpy 1.x under Python 2: _reconstruct + ndarray + dtype, data as a str
        assert v.dtype == np.uint8 and v.ndim == 2
        dtype = (b"cnumpy\ndtype\n" + _py2_str("u1") + _py2_int(0) + _py2_int(1) + b"\x87R"
                 + b"(" + _py2_int(3) + _py2_str("|") + b"NNN" + _py2_int(-1) + _py2_int(-1) + _py2_int(0) + b"tb")
        return (b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\n" + _py2_int(0) + b"\x85" + _py2_str("b")
                + b"\x87R(" + _py2_int(1) + _py2_int(v.shape[0]) + _py2_int(v.shape[1]) + b"\x86" + dtype
                + b"\x89" + _py2_str(v.tobytes()) + b"tb")
    if isinstance(v, list):
        return b"](" + b"".join(_py2_value(x) for x in v) + b"e" if v else b"]"
    if isinstance(v, int):
        return _py2_int(v)
    return _py2_str(v)  # type: ignore[arg-type]


def py2_pickle(entry: dict) -> bytes:
    """``entry`` (str keys; lists, str, int and 2-D uint8 arrays) pickled byte for byte as Python 2's cPickle
    (protocol 2) wrote the official CIFAR files: strings are py2 ``str`` (BINSTRING), so the only globals are
    the array's ``numpy.core.multiarray._reconstruct``, ``numpy.ndarray`` and ``numpy.dtype``."""
    body = b"".join(_py2_str(k) + _py2_value(v) for k, v in entry.items())
    return b"\x80\x02}(" + body + b"u."


def cifar100(root: Path, n_train: int = 6, n_test: int = 4) -> Path:
    """The official layout and file format (Python 2 cPickle, protocol 2; see :func:`py2_pickle`)."""
    d = root / "cifar-100-python"
    d.mkdir(parents=True, exist_ok=True)
    rng = _rng(0)
    for name, n in (("train", n_train), ("test", n_test)):
        entry = {"filenames": [f"{name}_{i}.png" for i in range(n)], "batch_label": name,
                 "fine_labels": [int(x) for x in rng.integers(0, 100, n)],
                 "coarse_labels": [int(x) for x in rng.integers(0, 20, n)],
                 "data": rng.integers(0, 256, (n, 3072), dtype=np.uint8)}
        (d / name).write_bytes(py2_pickle(entry))
    (d / "meta").write_bytes(py2_pickle({"fine_label_names": [f"class{i}" for i in range(100)],
                                         "coarse_label_names": [f"super{i}" for i in range(20)]}))
    return root


def tiny_imagenet(root: Path, wnids=("n02123045", "n01443537"), per_class: int = 2) -> Path:
    base = root / "tiny-imagenet-200"
    (base / "val" / "images").mkdir(parents=True, exist_ok=True)
    (base / "wnids.txt").write_text("\n".join(wnids) + "\n")  # unsorted on purpose
    ann = []
    for ci, w in enumerate(wnids):
        for j in range(per_class):
            mode = "L" if (ci, j) == (0, 0) else "RGB"  # one grayscale JPEG, as in the real set
            write_image(base / "train" / w / "images" / f"{w}_{j}.JPEG", size=(64, 64), seed=ci * 7 + j, mode=mode)
            name = f"val_{ci * per_class + j}.JPEG"
            write_image(base / "val" / "images" / name, size=(64, 64), seed=50 + ci * 7 + j, mode=mode)
            ann.append(f"{name}\t{w}\t0\t0\t63\t63")
        (base / "train" / w / f"{w}_boxes.txt").write_text("")
    (base / "val" / "val_annotations.txt").write_text("\n".join(ann) + "\n")
    return root


def ucmerced(root: Path, classes=("agricultural", "beach", "forest"), per_class: int = 5,
             split_files: bool = False) -> Path:
    base = root / "UCMerced_LandUse" / "Images"
    names = {"train": [], "val": [], "test": []}
    for ci, c in enumerate(classes):
        for j in range(per_class):
            size = (37, 40) if (ci, j) == (0, 0) else (40, 40)  # one image not square, as in the real set
            write_image(base / c / f"{c}{j:02d}.tif", size=size, seed=ci * 10 + j)
            names["train" if j < 3 else ("val" if j == 3 else "test")].append(f"{c}{j:02d}.tif")
    if split_files:
        for s, lst in names.items():
            (root / f"uc_merced-{s}.txt").write_text("\n".join(lst) + "\n")
    return root


def write_avi(path: Path, frames: int = 12, size: tuple[int, int] = (48, 64), seed: int = 0) -> Path:
    import cv2

    path.parent.mkdir(parents=True, exist_ok=True)
    h, w = size
    wr = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"XVID"), 25, (w, h))
    assert wr.isOpened(), "XVID writer unavailable"
    base = _rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    for i in range(frames):
        wr.write(np.roll(base, 3 * i, axis=1))
    wr.release()
    return path


def ucf101(root: Path, classes=("ApplyEyeMakeup", "Basketball", "YoYo"), per_class: int = 2) -> Path:
    lists = root / "ucfTrainTestlist"
    lists.mkdir(parents=True, exist_ok=True)
    (lists / "classInd.txt").write_text("".join(f"{i + 1} {c}\n" for i, c in enumerate(classes)))
    for fold in (1, 2, 3):
        train, test = [], []
        for ci, c in enumerate(classes):
            for j in range(per_class):
                rel = f"{c}/v_{c}_g{j + 1:02d}_c01.avi"
                (test if (j + fold) % per_class == 0 else train).append(rel)
                if fold == 1:
                    write_avi(root / "UCF-101" / rel, frames=10 + 3 * j, seed=ci * 10 + j)
        (lists / f"trainlist0{fold}.txt").write_text("".join(f"{r} {classes.index(r.split('/')[0]) + 1}\r\n"
                                                              for r in train))
        (lists / f"testlist0{fold}.txt").write_text("".join(f"{r}\r\n" for r in test))
    return root


def dvsgesture(root: Path, users=(("train", 1, "fluorescent"), ("test", 24, "led")), labels=(0, 3, 10)) -> Path:
    rng = _rng(0)
    for split, user, light in users:
        folder = "ibmGestureTrain" if split == "train" else "ibmGestureTest"
        d = root / "DVSGesture" / folder / f"user{user:02d}_{light}"
        d.mkdir(parents=True, exist_ok=True)
        for lab in labels:
            n = 400
            ev = np.stack([rng.integers(0, 128, n), rng.integers(0, 128, n), rng.integers(0, 2, n),
                           np.sort(rng.integers(0, 1500, n))], axis=1).astype(np.int64)  # t in ms
            np.save(d / f"{lab}.npy", ev)
    return root


def write_off(path: Path, kind: int = 0, header_on_first_line: bool = False) -> Path:
    """A tetrahedron (kind 0) or a unit cube with quad faces (kind 1)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == 0:
        v = [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
        f = [[3, 0, 1, 2], [3, 0, 1, 3], [3, 0, 2, 3], [3, 1, 2, 3]]
    else:
        v = [[x, y, z] for x in (0, 2) for y in (0, 1) for z in (0, 1)]
        f = [[4, 0, 1, 3, 2], [4, 4, 5, 7, 6], [4, 0, 1, 5, 4], [4, 2, 3, 7, 6], [4, 0, 2, 6, 4], [4, 1, 3, 7, 5]]
    head = f"OFF{len(v)} {len(f)} 0\n" if header_on_first_line else f"OFF\n{len(v)} {len(f)} 0\n"
    body = "".join(" ".join(str(float(c)) for c in p) + "\n" for p in v)
    body += "".join(" ".join(str(i) for i in face) + "\n" for face in f)
    path.write_text(head + body)
    return path


def modelnet_raw(root: Path, classes=("airplane", "chair", "sofa"), per_split: int = 2) -> Path:
    for ci, c in enumerate(classes):
        for split in ("train", "test"):
            for j in range(per_split):
                write_off(root / "raw" / c / split / f"{c}_{j + 1 + (split == 'test') * 100:04d}.off", kind=(ci + j) % 2,
                          header_on_first_line=(ci == 1 and j == 0))
    return root


def modelnet_resampled(root: Path, classes=("airplane", "chair"), per_split: int = 2, n_points: int = 300) -> Path:
    base = root / "modelnet40_normal_resampled"
    base.mkdir(parents=True, exist_ok=True)
    (base / "modelnet40_shape_names.txt").write_text("\n".join(classes) + "\n")
    rng = _rng(0)
    lists = {"train": [], "test": []}
    for c in classes:
        for k in range(2 * per_split):
            shape = f"{c}_{k + 1:04d}"
            pts = rng.normal(size=(n_points, 6)).astype(np.float32)
            (base / c).mkdir(exist_ok=True)
            np.savetxt(base / c / f"{shape}.txt", pts, delimiter=",", fmt="%.6f")
            lists["train" if k < per_split else "test"].append(shape)
    for s, lst in lists.items():
        (base / f"modelnet40_{s}.txt").write_text("\n".join(lst) + "\n")
    return root


def all_fixtures(tmp: Path) -> dict[str, Path]:
    """dataset name -> fixture root (for the end-to-end CLI test)."""
    return {"imagenet": imagenet(tmp / "imagenet"), "cifar100": cifar100(tmp / "cifar"),
            "tiny-imagenet": tiny_imagenet(tmp / "tiny"), "ucmerced": ucmerced(tmp / "ucm"),
            "ucf101": ucf101(tmp / "ucf"), "dvsgesture": dvsgesture(tmp / "dvs"),
            "modelnet40": modelnet_raw(tmp / "mn")}


__all__ = [n for n in dir() if not n.startswith("_") and n not in ("os", "Path", "np", "Image")]
