"""``primitives-scene``: embedded synthetic rooms for 3-D semantic segmentation, written to disk in
ScanNet's preprocessed layout and read by the ``scannet`` datamodule's code.

Each room (deterministic from ``(gen_seed, split, index)``): a rectangular floor of 2.5-4 m per side
at z = 0 with its corner at the origin (an absolute scene frame like ScanNet's), 3-4 low walls
(0.8-1.4 m high), and 2-5 objects standing on the floor without overlapping: boxes (rotated about
z), cylinders (side + top) and spheres. Points are drawn uniformly on the visible surfaces
(``density`` points per m^2; floor under objects removed), with analytic normals. Classes:
``floor, wall, box, cylinder, sphere``. Colours are random per surface and carry no class
information, so the label must come from geometry (arrangement of patches) -- what the backbone
and its PE see.

On disk (``<cache>/primitives-scene/<key>/{train,val}/<scene>/{coord,color,normal,segment20}.npy``,
``segment20.npy`` holding this set's 5 class ids): written once per generation key into a temporary
directory and renamed into place (atomic; a concurrent writer that loses the race removes its
copy). ``<cache>`` is ``$PEBENCH_CACHE`` or ``~/.cache/pebench``. Normals are stored but not used
as features by default (``normals=False``: they would give floor vs wall away per point).

Sized for CPU minutes: 512 training and 64 validation rooms of 0.7-1.9k points after 0.1 m grid
sampling (about 90 tokens of 16 points per room); measured runs are in the README's "3-D scene
segmentation" section.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, ClassVar

import numpy as np

from pebench.core.io import publish_dir

from ..base import float_option, int_option
from ..registry import register_datamodule
from .scannet import ScanNetDataModule

__all__ = ["PrimitivesSceneDataModule", "PRIMITIVE_SCENE_CLASSES", "make_room", "write_scene_set"]

PRIMITIVE_SCENE_CLASSES = ("floor", "wall", "box", "cylinder", "sphere")
GENERATOR_VERSION = 1


def _rect(rng: np.random.Generator, origin: np.ndarray, u: np.ndarray, v: np.ndarray, density: float
          ) -> np.ndarray:
    """Uniform points on the parallelogram ``origin + s u + t v``, ``s, t in [0, 1]``."""
    area = float(np.linalg.norm(np.cross(u, v)))
    n = rng.poisson(area * density)
    st = rng.random((n, 2))
    return origin + st[:, :1] * u + st[:, 1:] * v


def make_room(rng: np.random.Generator, density: float = 60.0) -> dict[str, np.ndarray]:
    """One synthetic room -> ``coord (N, 3)`` float32 m, ``color (N, 3)`` uint8, ``normal (N, 3)``,
    ``segment20 (N,)`` int16 (indices into :data:`PRIMITIVE_SCENE_CLASSES`)."""
    L = rng.uniform(2.5, 4.0, 2)
    parts: list[tuple[np.ndarray, np.ndarray, int]] = []  # (points, normals, class)

    def add(p: np.ndarray, n: np.ndarray, c: int) -> None:
        parts.append((p, np.broadcast_to(n, p.shape).astype(np.float64), c))

    # objects: footprint circles (x, y, r) kept apart and away from the walls
    objects: list[tuple[str, np.ndarray, float, dict]] = []
    for _ in range(int(rng.integers(2, 6))):
        kind = ("box", "cylinder", "sphere")[int(rng.integers(3))]
        for _try in range(20):
            if kind == "box":
                size = rng.uniform(0.3, 0.9, 2)
                prm = {"size": size, "h": rng.uniform(0.3, 1.0), "angle": rng.uniform(0, np.pi)}
                r = float(np.linalg.norm(size) / 2)
            elif kind == "cylinder":
                prm = {"r": rng.uniform(0.15, 0.4), "h": rng.uniform(0.4, 1.2)}
                r = prm["r"]
            else:
                prm = {"r": rng.uniform(0.15, 0.4)}
                r = prm["r"]
            c = rng.uniform(r + 0.1, L - r - 0.1) if (L > 2 * r + 0.2).all() else None
            if c is not None and all(np.linalg.norm(c - o[1]) > r + o[2] + 0.05 for o in objects):
                objects.append((kind, c, r, prm))
                break
    # floor minus object footprints
    floor = _rect(rng, np.zeros(3), np.array([L[0], 0, 0]), np.array([0, L[1], 0]), density)
    keep = np.ones(len(floor), bool)
    for kind, c, r, _prm in objects:
        if kind != "sphere":
            keep &= np.linalg.norm(floor[:, :2] - c, axis=1) > (r if kind == "cylinder" else r * 0.7)
    add(floor[keep], np.array([0, 0, 1.0]), 0)
    # walls: 3 or 4 of the 4 sides
    h = rng.uniform(0.8, 1.4)
    sides = [(np.zeros(3), np.array([L[0], 0, 0]), np.array([0, 1.0, 0])),
             (np.array([0, L[1], 0]), np.array([L[0], 0, 0]), np.array([0, -1.0, 0])),
             (np.zeros(3), np.array([0, L[1], 0]), np.array([1.0, 0, 0])),
             (np.array([L[0], 0, 0]), np.array([0, L[1], 0]), np.array([-1.0, 0, 0]))]
    drop = int(rng.integers(4)) if rng.random() < 0.5 else -1
    for i, (o, u, n) in enumerate(sides):
        if i != drop:
            add(_rect(rng, o, u, np.array([0, 0, h]), density), n, 1)
    for kind, c, _r, prm in objects:
        if kind == "box":
            a, (sx, sy), hh = prm["angle"], prm["size"], prm["h"]
            ex, ey = np.array([np.cos(a), np.sin(a), 0]), np.array([-np.sin(a), np.cos(a), 0])
            base = np.array([c[0], c[1], 0]) - ex * sx / 2 - ey * sy / 2
            z = np.array([0, 0, hh])
            add(_rect(rng, base + z, ex * sx, ey * sy, density), np.array([0, 0, 1.0]), 2)
            add(_rect(rng, base, ex * sx, z, density), -ey, 2)
            add(_rect(rng, base + ey * sy, ex * sx, z, density), ey, 2)
            add(_rect(rng, base, ey * sy, z, density), -ex, 2)
            add(_rect(rng, base + ex * sx, ey * sy, z, density), ex, 2)
        elif kind == "cylinder":
            rr, hh = prm["r"], prm["h"]
            n = rng.poisson(2 * np.pi * rr * hh * density)
            phi, z = rng.uniform(0, 2 * np.pi, n), rng.uniform(0, hh, n)
            nrm = np.stack([np.cos(phi), np.sin(phi), np.zeros(n)], 1)
            parts.append((np.stack([c[0] + rr * nrm[:, 0], c[1] + rr * nrm[:, 1], z], 1), nrm, 3))
            n = rng.poisson(np.pi * rr * rr * density)
            phi, rad = rng.uniform(0, 2 * np.pi, n), rr * np.sqrt(rng.random(n))
            add(np.stack([c[0] + rad * np.cos(phi), c[1] + rad * np.sin(phi), np.full(n, hh)], 1),
                np.array([0, 0, 1.0]), 3)
        else:
            rr = prm["r"]
            n = rng.poisson(4 * np.pi * rr * rr * density)
            d = rng.standard_normal((n, 3))
            d /= np.linalg.norm(d, axis=1, keepdims=True)
            parts.append((np.array([c[0], c[1], rr]) + rr * d, d, 4))
    coord = np.concatenate([p for p, _, _ in parts]).astype(np.float32)
    normal = np.concatenate([n for _, n, _ in parts]).astype(np.float32)
    seg = np.concatenate([np.full(len(p), k, np.int16) for p, _, k in parts])
    # one random colour per surface part plus per-point noise: no class information
    base = np.concatenate([np.broadcast_to(rng.integers(40, 216, 3), (len(p), 3)) for p, _, _ in parts])
    color = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
    return {"coord": coord, "color": color, "normal": normal, "segment20": seg}


def write_scene_set(root: str, sizes: dict[str, int], gen_seed: int, density: float) -> None:
    """Write ``root/{split}/scene{i:05d}/*.npy`` into a temporary sibling directory, then rename it to
    ``root`` (atomic). Nothing happens when ``root`` exists."""
    if os.path.isdir(root):
        return
    with publish_dir(root, ".tmp-primitives-scene-") as tmp:
        for s_idx, (split, n) in enumerate(sorted(sizes.items())):
            for i in range(n):
                rng = np.random.default_rng([gen_seed, s_idx, i])
                room = make_room(rng, density)
                d = os.path.join(tmp, split, f"scene{i:05d}")
                os.makedirs(d)
                for k, arr in room.items():
                    np.save(os.path.join(d, f"{k}.npy"), arr)
        with open(os.path.join(tmp, "generator.json"), "w") as f:
            json.dump({"version": GENERATOR_VERSION, "sizes": sizes, "gen_seed": gen_seed, "density": density,
                       "classes": list(PRIMITIVE_SCENE_CLASSES)}, f)


def cache_dir() -> str:
    return os.path.join(os.path.expanduser(os.environ.get("PEBENCH_CACHE", "~/.cache/pebench")), "primitives-scene")


@register_datamodule("primitives-scene")
class PrimitivesSceneDataModule(ScanNetDataModule):
    """Synthetic rooms (see the module docstring), read through :class:`ScanNetDataModule`."""

    needs_data_root: ClassVar[bool] = False
    expected_layout: ClassVar[str] = "embedded (written under $PEBENCH_CACHE or ~/.cache/pebench)"
    default_resolution: ClassVar[int | str] = 4096
    default_grid_size: ClassVar[float] = 0.1
    default_patch_size: ClassVar[int] = 16
    class_names: tuple[str, ...] = PRIMITIVE_SCENE_CLASSES

    option_help: ClassVar[dict[str, str]] = {
        "train_size": "training rooms generated (written once to the cache)",
        "val_size": "validation rooms generated",
        "gen_seed": "seed of the room generator (another seed: another set on disk)",
        "density": "points per square metre drawn on the surfaces before grid sampling",
        "normals": "append the unit normal (3) to the colour features (off: geometry must come from patches)",
    }

    def __init__(self, train_size: int = 512, val_size: int = 64, gen_seed: int = 0, density: float = 60.0,
                 normals: bool = False, **kwargs: Any) -> None:
        kwargs.pop("data_root", None)
        super().__init__(normals=normals, **kwargs)
        self.n_train = int_option(self.name, "train_size", train_size)
        self.n_val = int_option(self.name, "val_size", val_size)
        self.gen_seed = int_option(self.name, "gen_seed", gen_seed, minimum=0)
        self.density = float_option(self.name, "density", density, minimum=1.0)
        key = hashlib.sha1(json.dumps([GENERATOR_VERSION, self.n_train, self.n_val, self.gen_seed,
                                       self.density]).encode()).hexdigest()[:12]
        self.data_root = os.path.join(cache_dir(), key)
        self.layout = "preprocessed"

    def prepare_data(self) -> None:
        write_scene_set(self.data_root, {"train": self.n_train, "val": self.n_val}, self.gen_seed, self.density)

    def _items(self, split: str) -> list[tuple[str, Any]]:
        self.prepare_data()  # idempotent; the reading code below is the scannet datamodule's
        return super()._items(split)
