"""nuScenes-lidarseg: per-point semantic segmentation of LIDAR_TOP keyframes, read through nuscenes-devkit.

Layout: the official nuScenes v1.0 release with the nuScenes-lidarseg expansion extracted into the
same root (Caesar et al., "nuScenes: A multimodal dataset for autonomous driving", CVPR 2020;
Fong et al., "Panoptic nuScenes", RA-L 2022, for lidarseg)::

    <root>/<version>/{category,attribute,visibility,instance,sensor,calibrated_sensor,ego_pose,
                      log,scene,sample,sample_data,sample_annotation,map,lidarseg}.json
    <root>/samples/LIDAR_TOP/*.pcd.bin       keyframes: float32 rows x, y, z, intensity, ring index
    <root>/sweeps/LIDAR_TOP/*.pcd.bin        the 20 Hz sweeps between keyframes (only for sweeps > 1)
    <root>/lidarseg/<version>/<sd token>_lidarseg.bin   uint8, one fine-class index per keyframe point
    <root>/maps/*.png                        the map masks the ``map`` table names

``version`` is ``v1.0-mini`` or ``v1.0-trainval`` (``auto``: trainval when present, else mini).
The database is opened with the devkit (``NuScenes(version, dataroot, verbose=False)``); the splits
are the devkit's (``create_splits_scenes``: ``mini_train``/``mini_val`` and ``train``/``val``);
v1.0-test has no public lidarseg labels and is refused.

Labels: the devkit's ``LidarsegClassMapper`` maps the 32 fine classes to the 16 lidarseg-challenge
classes (its coarse indices 1..16, 0 = ``ignore``); pebench shifts them to contiguous 0..15 with
``ignore`` -> ``ignore_index = -1`` (:data:`CLASS_NAMES` is the coarse order). The mapper's own
``convert_label`` applies the dict element by element (``np.vectorize``) and recounts every class;
here its mapping is turned once into a 256-entry lookup table and applied by indexing, with the
same result (a test checks the two agree).

Per scan (the shared scene pipeline of :mod:`.scene_common`, Pointcept's nuScenes settings):
optional crop to ``max_range`` metres (horizontal distance to the sensor), training augmentation
(``SceneAugment`` about the sensor: rotation about z, small tilts, scaling, flips, jitter), grid
sampling (``grid_size`` = 0.05 m voxels; a random point per voxel in training, the first one in
evaluation), then at most ``M`` points (the resolution; ``crop_points``). The sample, in the
LIDAR_TOP sensor frame in metres (``coord_unit = "m"``; the ego-vehicle frame differs from it by
the fixed calibrated_sensor transform):

* ``coord`` ``(M, 3)`` float32 ``x, y, z``;
* ``feat`` ``(M, F)`` float32: intensity / 255 (``F = 1``); with ``sweeps = S > 1`` a second
  channel, the time lag in seconds between the keyframe and the sweep a point comes from
  (0 for keyframe points, ~0.05 s per sweep at 20 Hz; ``F = 2``);
* ``target`` ``(M,)`` int64 in 0..15 or -1.

Multi-sweep input (``sweeps = S``): ``LidarPointCloud.from_file_multisweep(nusc, sample, "LIDAR_TOP",
"LIDAR_TOP", nsweeps=S)`` aggregates the keyframe and its S - 1 predecessors in the keyframe's
lidar frame, dropping each sweep's returns within ``min_distance = 1 m`` of the sensor (the ego
car). The keyframe itself is read again unfiltered and its points come first, in file order,
so its labels stay aligned; the earlier sweeps' points follow with target -1 (no labels exist
for them), so they are input context and never scored.

Evaluation: the task's mIoU counts the keyframe points it is given. By default those are the
grid-sampled points (Pointcept's validation protocol; its test-time voting over all points is not
done). With ``grid_size = 0``, ``max_range = 0`` and a resolution above the scan size (a keyframe
has at most 34,720 points) it is every keyframe point of the validation split, in file order, so
the number is the devkit's official ``LidarSegEval`` mIoU on the same predictions
(:func:`write_lidarseg_predictions` writes them in the challenge format, and
:func:`devkit_lidarseg_eval` runs the devkit's evaluator; a test checks the two agree).

Corrupt scans (a truncated ``.pcd.bin``, a label file whose length does not match the points, an
unknown fine label) are skipped and counted (``corrupt.py``); point files the tables name but
that do not exist are dropped before training and counted as ``missing``.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from pebench.core.errors import ConfigError

from ..base import BenchDataModule, DataRootError, DataSource, bool_option, float_option, int_option
from ..corrupt import SkippingDataset
from ..registry import register_datamodule
from .scene_common import IGNORE_INDEX, SceneAugment, crop_points, grid_sample, scene_collate

__all__ = ["NuScenesDataModule", "NuScenesLidarSeg", "CLASS_NAMES", "SPLITS", "open_nuscenes", "label_lut",
           "split_sample_tokens", "write_lidarseg_predictions", "devkit_lidarseg_eval", "require_devkit", "EXTRA"]

log = logging.getLogger(__name__)

TABLES = ("category", "attribute", "visibility", "instance", "sensor", "calibrated_sensor", "ego_pose", "log",
          "scene", "sample", "sample_data", "sample_annotation", "map", "lidarseg")
LAYOUT = ("<root>/<version>/{" + ",".join(TABLES) + "}.json, <root>/samples/LIDAR_TOP/*.pcd.bin, "
          "<root>/sweeps/LIDAR_TOP/*.pcd.bin (sweeps > 1), <root>/lidarseg/<version>/*_lidarseg.bin, "
          "<root>/maps/*.png (nuScenes v1.0 + nuScenes-lidarseg, versions v1.0-mini / v1.0-trainval)")
#: version -> (training split, validation split) in ``nuscenes.utils.splits.create_splits_scenes``
SPLITS = {"v1.0-mini": ("mini_train", "mini_val"), "v1.0-trainval": ("train", "val")}
#: the lidarseg challenge's 16 classes in the devkit's coarse order (its indices 1..16); checked
#: against ``LidarsegClassMapper`` whenever a database is opened
CLASS_NAMES = ("barrier", "bicycle", "bus", "car", "construction_vehicle", "motorcycle", "pedestrian",
               "traffic_cone", "trailer", "truck", "driveable_surface", "other_flat", "sidewalk", "terrain",
               "manmade", "vegetation")
LIDAR = "LIDAR_TOP"
#: sweeps' returns closer than this (m, in x and y) to the sensor are the ego car (devkit's default)
SWEEP_MIN_DISTANCE = 1.0
#: marks a fine label that the database's category table does not define (-> the scan is corrupt)
_UNKNOWN = -2


#: the pebench extra (pyproject.toml) that installs nuscenes-devkit: it requires numpy<2, so it is not a dependency
EXTRA = "nuscenes"


def require_devkit() -> None:
    """Raise one :class:`ConfigError` line naming the ``nuscenes`` extra when nuscenes-devkit cannot be imported
    (exit code 2 in the CLI, before a run directory or anything else is made)."""
    try:
        import nuscenes  # noqa: F401  # deferred: optional dependency (the nuscenes extra; ~1.5 s)
    except ImportError as e:
        install = f"pip install -e '.[{EXTRA}]'"
        if e.name == "nuscenes":
            raise ConfigError(f"dataset 'nuscenes' needs nuscenes-devkit, which is not installed: {install}") from None
        raise ConfigError(f"dataset 'nuscenes' needs nuscenes-devkit, which is installed but cannot be imported "
                          f"({type(e).__name__}: {' '.join(str(e).split())}); reinstall it: {install}") from None


def _resolve_version(root: str, version: str) -> str:
    if version != "auto":
        return version
    for v in ("v1.0-trainval", "v1.0-mini"):
        if os.path.isdir(os.path.join(root, v)):
            return v
    found = sorted(e.name for e in os.scandir(root) if e.is_dir() and e.name.startswith("v1.0")) \
        if os.path.isdir(root) else []
    raise DataRootError(f"nuscenes: no v1.0-trainval or v1.0-mini table folder in {root!r} (found: "
                        f"{', '.join(found) or 'none'}); expected layout: {LAYOUT}")


def open_nuscenes(root: str, version: str) -> Any:
    """The devkit's ``NuScenes`` for ``root`` / ``version`` after checking the tables exist.

    The devkit reports a missing folder, table, label file or map with ``assert`` / ``KeyError`` /
    a traceback from ``json``; each becomes one :class:`DataRootError` line naming the path.
    """
    if version == "v1.0-test":
        raise DataRootError("nuscenes: v1.0-test has no public lidarseg labels; use v1.0-mini or v1.0-trainval")
    if version not in SPLITS:
        raise DataRootError(f"nuscenes: unknown version {version!r}; available: {', '.join(SPLITS)}, auto")
    tables = os.path.join(root, version)
    if not os.path.isdir(tables):
        raise DataRootError(f"nuscenes: table folder {tables!r} not found (version {version}); expected layout: "
                            f"{LAYOUT}")
    for name in TABLES:
        path = os.path.join(tables, f"{name}.json")
        if not os.path.isfile(path):
            what = " (the nuScenes-lidarseg expansion is not extracted)" if name == "lidarseg" else ""
            raise DataRootError(f"nuscenes: table {path!r} not found{what}; expected layout: {LAYOUT}")
    labels = os.path.join(root, "lidarseg", version)
    if not os.path.isdir(labels):
        raise DataRootError(f"nuscenes: label folder {labels!r} not found; expected layout: {LAYOUT}")
    require_devkit()
    from nuscenes import NuScenes  # deferred: start-up time (nuscenes-devkit, ~1.5 s)

    try:
        return NuScenes(version=version, dataroot=root, verbose=False)
    except (AssertionError, KeyError, ValueError, OSError, TypeError, IndexError) as e:  # json errors are ValueErrors
        msg = " ".join(str(e).split()) or type(e).__name__
        raise DataRootError(f"nuscenes: the devkit cannot load {tables!r}: {type(e).__name__}: {msg}; "
                            f"expected layout: {LAYOUT}") from None


def label_lut(nusc: Any) -> np.ndarray:
    """``(256,)`` int64: fine lidarseg index -> pebench class 0..15, ``-1`` for the devkit's ``ignore``,
    ``-2`` for an index the category table does not define. Built from ``LidarsegClassMapper``."""
    from nuscenes.eval.lidarseg.utils import LidarsegClassMapper  # deferred: start-up time (nuscenes-devkit, ~1.5 s)

    mapper = LidarsegClassMapper(nusc)
    coarse = mapper.coarse_name_2_coarse_idx_mapping  # name -> 0..16, 0 = ignore
    names = tuple(n for n, _ in sorted(coarse.items(), key=lambda kv: kv[1]) if coarse[n] != 0)
    if names != CLASS_NAMES or mapper.ignore_class["index"] != 0:
        raise RuntimeError(f"nuscenes-devkit's lidarseg classes changed: {names}")
    lut = np.full(256, _UNKNOWN, dtype=np.int64)
    for fine, c in mapper.fine_idx_2_coarse_idx_mapping.items():
        lut[int(fine)] = int(c) - 1  # ignore (0) -> -1
    return lut


def split_sample_tokens(nusc: Any, split: str) -> tuple[list[str], list[str]]:
    """Keyframe sample tokens of the devkit split ``split`` in scene-list then time order, and the
    split's scene names that the database lacks. (The devkit's ``get_samples_in_eval_set`` walks the
    same chains but needs every scene of the split present; a partial database is allowed here.)"""
    from nuscenes.utils.splits import create_splits_scenes  # deferred: start-up time (nuscenes-devkit, ~1.5 s)

    wanted = create_splits_scenes(verbose=False)[split]
    by_name = {s["name"]: s for s in nusc.scene}
    tokens, absent = [], []
    for name in wanted:
        scene = by_name.get(name)
        if scene is None:
            absent.append(name)
            continue
        token = scene["first_sample_token"]
        while token:
            tokens.append(token)
            token = nusc.get("sample", token)["next"]
    return tokens, absent


@dataclass(frozen=True)
class Scan:
    """One labelled keyframe: its sample / lidar sample_data tokens and files."""

    sample_token: str
    sd_token: str
    points: str
    labels: str


class NuScenesLidarSeg(SkippingDataset):
    """Keyframe scans -> ``(coord (M, 3), feat (M, F), target (M,))`` float32 / float32 / int64 arrays,
    or ``None`` when corrupt (``scene_collate`` pads the batch and counts them).

    ``nusc`` (the devkit database) is needed only for ``sweeps > 1``; worker processes share it
    through ``fork``.
    """

    def __init__(self, scans: list[Scan], lut: np.ndarray, train: bool, sweeps: int = 1, grid_size: float = 0.05,
                 max_points: int = 0, max_range: float = 0.0, augment: bool = False, nusc: Any = None) -> None:
        super().__init__(None)
        self.collate_fn = scene_collate
        self.scans, self.lut, self.train = scans, lut, train
        self.sweeps, self.grid_size, self.max_points, self.max_range = sweeps, grid_size, max_points, max_range
        # rotation and scaling about the sensor (the lidar frame's origin), not the scan's bounding box
        self.augment = SceneAugment("origin") if (augment and train) else None
        self.nusc = nusc if sweeps > 1 else None

    def __len__(self) -> int:
        return len(self.scans)

    def describe(self, index: int) -> str:
        return self.scans[index].points

    def read(self, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Scan ``index``, no cropping, sampling or augmentation -> ``points (4, M)`` float32 (x, y, z,
        intensity), ``time_lag (M,)`` float32 seconds, ``target (M,)`` int64; keyframe points first."""
        from nuscenes.utils.data_classes import LidarPointCloud  # deferred: start-up time (nuscenes-devkit, ~1.5 s)
        from nuscenes.utils.data_io import load_bin_file  # deferred: start-up time (nuscenes-devkit, ~1.5 s)

        scan = self.scans[index]
        try:
            key = LidarPointCloud.from_file(scan.points)       # (4, n): x, y, z, intensity
            fine = load_bin_file(scan.labels)                 # (n,) uint8
        except AssertionError as e:  # the devkit asserts on empty / absent files: a damaged scan, not a bug
            raise ValueError(str(e)) from None
        n = key.nbr_points()
        if len(fine) != n:
            raise ValueError(f"{scan.labels}: {len(fine)} labels for {n} points in {scan.points}")
        target = self.lut[fine]                               # (n,) int64
        if (target == _UNKNOWN).any():
            raise ValueError(f"{scan.labels}: fine label {int(fine[target == _UNKNOWN][0])} not in category.json")
        points, lag = key.points, np.zeros(n, dtype=np.float32)
        if self.sweeps > 1:
            sample = self.nusc.get("sample", scan.sample_token)
            swept, times = LidarPointCloud.from_file_multisweep(self.nusc, sample, LIDAR, LIDAR, nsweeps=self.sweeps,
                                                                min_distance=SWEEP_MIN_DISTANCE)
            # its first block is the keyframe after remove_close: replace it by the unfiltered keyframe
            near = LidarPointCloud(key.points.copy())
            near.remove_close(SWEEP_MIN_DISTANCE)
            k = near.nbr_points()
            points = np.concatenate([key.points, swept.points[:, k:]], axis=1)               # (4, M)
            lag = np.concatenate([lag, times[0, k:].astype(np.float32)])                     # (M,)
            target = np.concatenate([target, np.full(points.shape[1] - n, IGNORE_INDEX, dtype=np.int64)])
        if not np.isfinite(points).all():
            raise ValueError(f"{scan.points}: non-finite point values")
        return points.astype(np.float32), lag, target

    def load(self, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        points, lag, target = self.read(index)
        if self.max_range > 0:
            inside = np.flatnonzero(np.hypot(points[0], points[1]) <= self.max_range)
            points, lag, target = points[:, inside], lag[inside], target[inside]
        coord = np.ascontiguousarray(points[:3].T)                                          # (M, 3) metres
        rng = None
        if self.train:  # drawn from torch's global RNG, which bench run seeds (as in scannet)
            rng = np.random.default_rng(int(torch.randint(0, 2 ** 62, ()).item()))
        if self.augment is not None:
            coord, _ = self.augment(coord, None, rng)
        # evaluation keeps the first point of each voxel: keyframe points come first, so labelled ones win
        keep = grid_sample(coord, self.grid_size, train=self.train, rng=rng)
        keep = keep[crop_points(coord[keep], self.max_points, rng)]
        feat = [points[3, keep] / 255.0] + ([lag[keep]] if self.sweeps > 1 else [])
        return coord[keep], np.stack(feat, axis=1).astype(np.float32), target[keep]   # (M, 3), (M, F), (M,)


def write_lidarseg_predictions(predictions: dict[str, np.ndarray], results_folder: str, eval_set: str) -> str:
    """Write predictions in the lidarseg challenge format the devkit's ``LidarSegEval`` reads:
    ``<results_folder>/lidarseg/<eval_set>/<lidar sd token>_lidarseg.bin``, uint8, one label per
    keyframe point in file order, coarse indices 1..16 (pebench class + 1). -> the folder written."""
    folder = os.path.join(results_folder, "lidarseg", eval_set)
    os.makedirs(folder, exist_ok=True)
    for sd_token, pred in predictions.items():
        pred = np.asarray(pred)
        if pred.ndim != 1 or pred.size == 0 or pred.min() < 0 or pred.max() >= len(CLASS_NAMES):
            raise ValueError(f"predictions for {sd_token} must be a non-empty 1-D array of classes 0..15")
        (pred + 1).astype(np.uint8).tofile(os.path.join(folder, f"{sd_token}_lidarseg.bin"))
    return folder


def devkit_lidarseg_eval(nusc: Any, results_folder: str, eval_set: str) -> dict[str, Any]:
    """The devkit's official evaluation (``LidarSegEval``) of the files :func:`write_lidarseg_predictions`
    wrote -> ``{"miou", "freq_weighted_iou", "iou_per_class"}``. It needs every scene of ``eval_set``
    in the database and a prediction file for each of their keyframes."""
    from nuscenes.eval.lidarseg.evaluate import LidarSegEval  # deferred: start-up time (nuscenes-devkit, ~1.5 s)

    return LidarSegEval(nusc, results_folder, eval_set=eval_set, verbose=False).evaluate()


@register_datamodule("nuscenes")
class NuScenesDataModule(BenchDataModule):
    """nuScenes-lidarseg, 16 classes, the devkit's splits (see the module docstring).

    Options (``--data-option``): ``version`` (``auto``, ``v1.0-mini``, ``v1.0-trainval``), ``sweeps``
    (the keyframe and ``sweeps - 1`` earlier sweeps; 1 = keyframe only), ``grid_size`` (voxel side of
    grid sampling, metres; 0 = every point), ``max_range`` (horizontal crop radius, metres; 0 = none),
    ``augment``. The resolution is the most points per scan after grid sampling.
    """

    source = DataSource(
        publisher="Motional (Caesar et al. 2020, nuScenes; Fong et al. 2022, Panoptic nuScenes / lidarseg)",
        url="https://www.nuscenes.org/nuscenes",
        licence=("CC BY-NC-SA 4.0 (nuScenes Terms of Use; free for non-commercial use, a commercial licence on "
                 "request)"),
        size=("1,000 scenes of 20 s (850 annotated: trainval), v1.0-mini 10 scenes; nuScenes-lidarseg: 1.1 billion "
              "lidar points labelled with 32 classes"),
        writer=("none: register, download the v1.0 metadata, the LIDAR_TOP samples and sweeps and nuScenes-lidarseg, "
                "untar them into the root (the nuscenes-devkit's ``NuScenes(version, dataroot)`` reads it)"),
    )
    modality: ClassVar[str] = "points"
    needs_data_root: ClassVar[bool] = True
    expected_layout: ClassVar[str] = LAYOUT
    default_task: ClassVar[str] = "segmentation"
    label_kind: ClassVar[str] = "point-labels"
    #: resolution = at most this many points per scan after grid sampling (as scannet; a keyframe has
    #: at most 34,720 points, so the cap binds only with several sweeps)
    default_resolution: ClassVar[int | str] = 102400
    coord_unit: ClassVar[str] = "m"
    ignore_index: ClassVar[int] = IGNORE_INDEX
    class_names: ClassVar[tuple[str, ...]] = CLASS_NAMES
    #: default voxel side of grid sampling, metres (Pointcept's nuScenes semantic-segmentation configs)
    default_grid_size: ClassVar[float] = 0.05
    has_test_split: ClassVar[bool] = False
    #: points per patch unless --task-option patch_size says otherwise: ~1.1k tokens for a full
    #: 34,720-point keyframe (scannet's 64 would leave ~540 patches a few metres wide at range)
    default_patch_size: ClassVar[int] = 32
    option_help: ClassVar[dict[str, str]] = {
        "version": "table folder: v1.0-mini or v1.0-trainval (auto: trainval when present, else mini)",
        "sweeps": "keyframe + sweeps-1 earlier 20 Hz sweeps (unlabelled context; adds a time-lag feature)",
        "grid_size": "voxel side of grid sampling in metres (default 0.05; 0 = every point)",
        "max_range": "keep points within this horizontal distance of the sensor, metres (0 = all)",
        "augment": "Pointcept's geometric augmentation of training scans, about the sensor",
    }

    def __init__(self, version: str = "auto", sweeps: int = 1, grid_size: float | None = None,
                 max_range: float = 0.0, augment: bool = True, **kwargs: Any) -> None:
        require_devkit()  # first: a missing library is reported before anything about the data root
        super().__init__(**kwargs)
        self.data_root = os.path.expanduser(str(self.data_root))
        self.sweeps = int_option(self.name, "sweeps", sweeps, minimum=1)
        self.grid_size = float_option(self.name, "grid_size",
                                      self.default_grid_size if grid_size is None else grid_size)
        self.max_range = float_option(self.name, "max_range", max_range)
        self.augment = bool_option(self.name, "augment", augment)
        if len(self.resolution) != 1:
            raise ValueError(f"{self.name}: resolution is one number (points per scan), got {self.resolution}")
        if not os.path.isdir(self.data_root):
            raise DataRootError(f"nuscenes: data root {self.data_root!r} not found; expected layout: {LAYOUT}")
        self.version = _resolve_version(self.data_root, str(version))
        self.nusc = open_nuscenes(self.data_root, self.version)
        self.lut = label_lut(self.nusc)
        self._scans: dict[str, list[Scan]] = {}

    @property
    def num_classes(self) -> int:
        return len(CLASS_NAMES)

    @property
    def feat_dim(self) -> int:
        """Per-point input features besides xyz: intensity, plus the time lag with ``sweeps > 1``."""
        return 1 if self.sweeps == 1 else 2

    @property
    def in_chans(self) -> int:
        return self.feat_dim

    def input_shape(self, resolution: tuple[int, ...] | None = None) -> tuple[int, ...]:
        return ((resolution or self.resolution)[0], 3)

    def tokenizer_options(self) -> dict[str, Any]:
        """What the scene tokenizer needs from the data: voxel side (m) for serialization, default
        points per patch."""
        return {"grid_size": self.grid_size, "patch_size": self.default_patch_size}

    def scans(self, split: str) -> list[Scan]:
        """The labelled keyframes of the devkit split ``split`` whose point file exists."""
        if split not in self._scans:
            tokens, absent = split_sample_tokens(self.nusc, split)
            if not tokens:
                raise DataRootError(f"nuscenes: none of the {len(absent)} scenes of the devkit split {split!r} is "
                                    f"in {os.path.join(self.data_root, self.version)!r}; expected layout: {LAYOUT}")
            if absent:
                log.info("nuscenes: %d of the %s split's scenes are not in %s (first: %s)", len(absent), split,
                         self.version, absent[0])
            items = []
            for token in tokens:
                try:  # every keyframe of the release has a LIDAR_TOP scan and a lidarseg record (same token)
                    sd_token = self.nusc.get("sample", token)["data"][LIDAR]
                    labels = os.path.join(self.data_root, self.nusc.get("lidarseg", sd_token)["filename"])
                except KeyError:
                    raise DataRootError(f"nuscenes: keyframe sample {token} has no {LIDAR} scan with a lidarseg.json "
                                        f"record in {os.path.join(self.data_root, self.version)!r}; expected layout: "
                                        f"{LAYOUT}") from None
                scan = Scan(token, sd_token, self.nusc.get_sample_data_path(sd_token), labels)
                items.append((scan.points, scan))
            kept = self.drop_missing(items, split, os.path.join(self.data_root, self.version, "sample_data.json"))
            self._scans[split] = [s for _, s in kept]
        return self._scans[split]

    def _dataset(self, train: bool, resolution: tuple[int, ...] | None = None) -> NuScenesLidarSeg:
        split = SPLITS[self.version][0 if train else 1]
        return NuScenesLidarSeg(self.scans(split), self.lut, train, sweeps=self.sweeps, grid_size=self.grid_size,
                                max_points=(resolution or self.resolution)[0], max_range=self.max_range,
                                augment=self.augment, nusc=self.nusc)

    def train_dataset(self) -> NuScenesLidarSeg:
        return self._dataset(True)

    def val_dataset(self, resolution: tuple[int, ...] | None = None) -> NuScenesLidarSeg:
        return self._dataset(False, resolution)

