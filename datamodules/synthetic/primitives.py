"""``primitives``: embedded synthetic point-cloud classification (ModelNet-like).

Eight 3-D primitives: sphere, cube (surface), cylinder (with caps), cone (with base), torus,
square pyramid (with base), plane with a round hole, helix (a thin coil). Points are sampled
on the surface (area-weighted across faces), then a random anisotropic scale (each axis in
``[0.7, 1.3]``), a uniformly random rotation and Gaussian jitter (sigma 0.01) are applied, and
the cloud is centred and normalised to the unit sphere. The label is the primitive, i.e.
geometry: the arrangement of local surface patches (which a PE over group centres exposes to
attention) tells a cube from a pyramid or a cylinder.

The scene (primitive, scale, rotation) is resolution-independent; resolution ``"M"`` or
``"MxG"`` (points x groups) only changes how many points are drawn from the same surface.
Inputs are ``(M, 3)`` float32; ``num_groups_for(resolution)`` gives the tokenizer's group count.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from pebench.core.errors import ConfigError

from ..base import float_option, int_option, parse_resolution
from ..registry import register_datamodule
from .render import SyntheticDataset, SyntheticSplitsDataModule, check_size

__all__ = ["PrimitivesDataModule", "PRIMITIVES", "primitives_scene", "render_primitive", "sample_surface"]

PRIMITIVES = ("sphere", "cube", "cylinder", "cone", "torus", "pyramid", "plane-with-hole", "helix")


def _pick(rng: np.random.Generator, m: int, weights: list[float]) -> np.ndarray:
    return rng.choice(len(weights), size=m, p=np.asarray(weights) / np.sum(weights))


def _triangles(rng: np.random.Generator, tris: np.ndarray, m: int) -> np.ndarray:
    """Area-weighted uniform samples on triangles ``(F, 3, 3)``."""
    area = 0.5 * np.linalg.norm(np.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0]), axis=-1)
    f = _pick(rng, m, list(area))
    r1, r2 = np.sqrt(rng.random(m))[:, None], rng.random(m)[:, None]
    a, b, c = tris[f, 0], tris[f, 1], tris[f, 2]
    return (1 - r1) * a + r1 * (1 - r2) * b + r1 * r2 * c


def sample_surface(kind: str, m: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` points ``(m, 3)`` on the canonical primitive ``kind`` (roughly within ``[-1, 1]^3``)."""
    if kind == "sphere":
        p = rng.standard_normal((m, 3))
        return p / np.linalg.norm(p, axis=-1, keepdims=True)
    if kind == "cube":
        face = rng.integers(6, size=m)
        p = rng.uniform(-1, 1, (m, 3))
        p[np.arange(m), face % 3] = np.where(face < 3, -1.0, 1.0)
        return p
    phi = rng.uniform(0, 2 * np.pi, m)
    if kind == "cylinder":  # side area 4 pi, caps 2 pi
        part = _pick(rng, m, [4.0, 1.0, 1.0])
        rad = np.where(part == 0, 1.0, np.sqrt(rng.random(m)))
        z = np.where(part == 0, rng.uniform(-1, 1, m), np.where(part == 1, -1.0, 1.0))
        return np.stack([rad * np.cos(phi), rad * np.sin(phi), z], -1)
    if kind == "cone":  # apex at z = 1, base radius 1 at z = -1: lateral pi * sqrt(5), base pi
        lateral = _pick(rng, m, [np.sqrt(5.0), 1.0]) == 0
        rad = np.sqrt(rng.random(m))
        z = np.where(lateral, 1 - 2 * rad, -1.0)
        return np.stack([rad * np.cos(phi), rad * np.sin(phi), z], -1)
    if kind == "torus":  # R = 1, r = 0.35; tube angle by rejection for uniform area
        v = rng.uniform(0, 2 * np.pi, 4 * m)
        v = v[rng.random(4 * m) < (1 + 0.35 * np.cos(v)) / 1.35][:m]
        v = np.concatenate([v, rng.uniform(0, 2 * np.pi, m - len(v))])  # (practically never needed)
        rr = 1 + 0.35 * np.cos(v)
        return np.stack([rr * np.cos(phi), rr * np.sin(phi), 0.35 * np.sin(v)], -1)
    if kind == "pyramid":
        b = np.array([[-1, -1, -1], [1, -1, -1], [1, 1, -1], [-1, 1, -1]], dtype=np.float64)
        apex = np.array([0.0, 0.0, 1.0])
        tris = [np.stack([b[i], b[(i + 1) % 4], apex]) for i in range(4)] + [b[[0, 1, 2]], b[[0, 2, 3]]]
        return _triangles(rng, np.stack(tris), m)
    if kind == "plane-with-hole":
        p = rng.uniform(-1, 1, (2 * m, 2))
        p = p[np.linalg.norm(p, axis=-1) > 0.5][:m]
        while len(p) < m:  # (practically never needed)
            q = rng.uniform(-1, 1, (m, 2))
            p = np.concatenate([p, q[np.linalg.norm(q, axis=-1) > 0.5]])[:m]
        return np.concatenate([p, np.zeros((m, 1))], -1)
    if kind == "helix":  # 2.5 turns, radius 0.8, tube radius 0.08
        s = rng.random(m)
        a = 2 * np.pi * 2.5 * s
        centre = np.stack([0.8 * np.cos(a), 0.8 * np.sin(a), 2 * s - 1], -1)
        return centre + 0.08 * rng.standard_normal((m, 3)) / np.sqrt(3)
    raise ConfigError(f"unknown primitive {kind!r}; available: {', '.join(PRIMITIVES)}")


def _rotation(rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((3, 3)))
    q = q * np.sign(np.diag(r))  # Haar-uniform orthogonal
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def primitives_scene(rng: np.random.Generator) -> dict[str, Any]:
    label = int(rng.integers(len(PRIMITIVES)))
    return {"label": label, "kind": PRIMITIVES[label], "scale": rng.uniform(0.7, 1.3, 3), "rotation": _rotation(rng)}


def render_primitive(scene: dict[str, Any], resolution: tuple[int, ...], rng: np.random.Generator,
                     jitter: float = 0.01) -> np.ndarray:
    """Scene -> ``(M, 3)`` float32 cloud, centred, inside the unit sphere; ``resolution[0] = M``."""
    m = resolution[0]
    p = (sample_surface(scene["kind"], m, rng) * scene["scale"]) @ scene["rotation"].T
    p = p + jitter * rng.standard_normal(p.shape)
    p = p - p.mean(0)
    return (p / np.linalg.norm(p, axis=-1).max()).astype(np.float32)


@register_datamodule("primitives")
class PrimitivesDataModule(SyntheticSplitsDataModule):
    """Eight 3-D primitives as point clouds; see the module docstring."""

    modality = "points"
    in_chans = 3  # coordinates
    needs_data_root = False
    default_resolution = 1024
    patch_size = 1
    tubelet = 1
    num_groups = 64

    def __init__(self, train_size: int = 4096, val_size: int = 512, jitter: float = 0.01, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.train_size = int_option(self.name, "train_size", train_size)
        self.val_size = int_option(self.name, "val_size", val_size)
        self.jitter = float_option(self.name, "jitter", jitter)
        self.resolution = self._res(self.resolution)

    @property
    def num_classes(self) -> int:
        return len(PRIMITIVES)

    def _res(self, resolution: Any) -> tuple[int, ...]:
        if resolution is None:
            return self.resolution
        res = resolution if isinstance(resolution, tuple) else parse_resolution(resolution)
        check_size("points (x groups)", res)
        if len(res) == 2 and res[1] > res[0]:
            raise ConfigError(f"cannot form {res[1]} groups from {res[0]} points")
        return tuple(res)

    def num_groups_for(self, resolution: Any = None) -> int:
        """Groups (tokens) at ``resolution``: its ``G`` if given as ``"MxG"``, else ``num_groups``."""
        res = self._res(resolution)
        return res[1] if len(res) == 2 else min(self.num_groups, res[0])

    def input_shape(self, resolution: Any = None) -> tuple[int, ...]:
        return (self._res(resolution)[0], 3)

    def _dataset(self, split: str, size: int, resolution: Any) -> SyntheticDataset:
        res = self._res(resolution)
        # the render generator is seeded with the point count only, so "MxG" and "M" give the same cloud
        ds = SyntheticDataset(primitives_scene, partial(render_primitive, jitter=self.jitter),
                              size, self.seed, split, res[:1])
        ds.num_groups = self.num_groups_for(res)  # type: ignore[attr-defined]
        return ds

