"""A tiny nuScenes-lidarseg database in the official on-disk format, for the ``nuscenes`` tests.

Written exactly as the nuScenes v1.0 schema and nuScenes-lidarseg lay it out, so the real
``nuscenes-devkit`` loads it (``NuScenes(version, dataroot)``) and its split lists, point-cloud
readers and lidarseg evaluation run on it unchanged:

* ``<root>/<version>/*.json``: the 13 tables (category, attribute, visibility, instance, sensor,
  calibrated_sensor, ego_pose, log, scene, sample, sample_data, sample_annotation, map) and
  ``lidarseg.json``; ``category.json`` is the lidarseg one (each record has the ``index`` of its
  fine class, 0..31, in the official order);
* ``<root>/samples/LIDAR_TOP/*.pcd.bin`` (keyframes) and ``<root>/sweeps/LIDAR_TOP/*.pcd.bin``
  (intermediate sweeps): float32 rows ``x, y, z, intensity, ring index``, metres in the lidar frame;
* ``<root>/lidarseg/<version>/<lidar sample_data token>_lidarseg.bin``: one uint8 fine label per
  keyframe point, in the point file's order (a ``lidarseg.json`` record's token is its sample_data
  token, as in the release: the devkit looks labels up by it);
* ``<root>/maps/<token>.png``: the map mask the ``map`` table names (the devkit checks it exists).

Scene names come from the devkit's own ``mini_train`` / ``mini_val`` lists, so
``create_splits_scenes`` selects them; the two ``mini_val`` scenes are both present because the
devkit's evaluator walks every scene of its eval split.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: the 32 nuScenes-lidarseg fine classes in the order of their ``index`` in category.json
FINE_CLASSES = (
    "noise", "animal", "human.pedestrian.adult", "human.pedestrian.child",
    "human.pedestrian.construction_worker", "human.pedestrian.personal_mobility",
    "human.pedestrian.police_officer", "human.pedestrian.stroller", "human.pedestrian.wheelchair",
    "movable_object.barrier", "movable_object.debris", "movable_object.pushable_pullable",
    "movable_object.trafficcone", "static_object.bicycle_rack", "vehicle.bicycle", "vehicle.bus.bendy",
    "vehicle.bus.rigid", "vehicle.car", "vehicle.construction", "vehicle.emergency.ambulance",
    "vehicle.emergency.police", "vehicle.motorcycle", "vehicle.trailer", "vehicle.truck",
    "flat.driveable_surface", "flat.other", "flat.sidewalk", "flat.terrain", "static.manmade",
    "static.other", "static.vegetation", "vehicle.ego",
)
TABLES = ("category", "attribute", "visibility", "instance", "sensor", "calibrated_sensor", "ego_pose", "log",
          "scene", "sample", "sample_data", "sample_annotation", "map")
#: scene name -> keyframes; scene-0061 is in mini_train, scene-0103 and scene-0916 are mini_val
MINI_SCENES = {"scene-0061": 2, "scene-0103": 2, "scene-0916": 1}
#: LIDAR_TOP's extrinsics of a real nuScenes car (translation m, quaternion w, x, y, z)
LIDAR_TRANSLATION = [0.943713, 0.0, 1.84023]
LIDAR_ROTATION = [0.7077955119163518, -0.006492242056004365, 0.010646214713995808, -0.7063073142877817]
#: the ego car's heading (quaternion w, x, y, z: about 2.3 degrees of yaw), the same at every pose
EGO_ROTATION = [0.9998, 0.0, 0.0, 0.02]


@dataclass
class NuScenesFixture:
    """What the tests need to check the loader against the files (not read back through the devkit)."""

    root: Path
    version: str
    #: keyframe lidar sample_data token -> (points (n, 5) float32, fine labels (n,) uint8, scene name)
    keyframes: dict[str, tuple[np.ndarray, np.ndarray, str]] = field(default_factory=dict)
    #: keyframe lidar sample_data token -> number of points in its ``sweeps_per_keyframe`` earlier sweeps
    sweep_points: dict[str, int] = field(default_factory=dict)

    def point_file(self, sd_token: str) -> Path:
        return self.root / "samples" / "LIDAR_TOP" / f"{sd_token}.pcd.bin"

    def label_file(self, sd_token: str) -> Path:
        return self.root / "lidarseg" / self.version / f"{sd_token}_lidarseg.bin"


def _points(rng: np.random.Generator, n: int, ground: bool = False) -> np.ndarray:
    """(n, 5) float32 rows x, y, z, intensity, ring; no point within 1.5 m of the sensor in x and y.
    ``ground``: half the points on the road plane (z = -1.84 m in the LIDAR_TOP frame, 2 cm noise)."""
    r = rng.uniform(1.5, 30.0, n)
    phi = rng.uniform(-np.pi, np.pi, n)
    if ground:
        z, on = rng.uniform(-1.4, 2.0, n), rng.random(n) < 0.5
        z[on] = -LIDAR_TRANSLATION[2] + rng.normal(0.0, 0.02, int(on.sum()))
    else:
        z = rng.uniform(-2.0, 2.0, n)
    pts = np.stack([r * np.cos(phi), r * np.sin(phi), z,
                    rng.integers(0, 256, n).astype(np.float64), rng.integers(0, 32, n).astype(np.float64)], axis=1)
    return pts.astype(np.float32)


def geometric_labels(pts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Fine labels that follow from where a point is (a learnable scan): returns below z = -1.5 m are
    road (``|y| < 6`` m) or sidewalk, the others cars (``r < 15`` m) or buildings; 5 % noise (ignored)."""
    ground = pts[:, 2] < -1.5
    near = np.hypot(pts[:, 0], pts[:, 1]) < 15.0
    names = np.where(ground, np.where(np.abs(pts[:, 1]) < 6.0, "flat.driveable_surface", "flat.sidewalk"),
                     np.where(near, "vehicle.car", "static.manmade"))
    labels = np.array([FINE_CLASSES.index(n) for n in names], dtype=np.uint8)
    labels[rng.random(len(pts)) < 0.05] = FINE_CLASSES.index("noise")
    return labels


def nuscenes_db(root: Path, version: str = "v1.0-mini", scenes: dict[str, int] | None = None,
                points: tuple[int, int] = (48, 80), sweeps_per_keyframe: int = 2, seed: int = 0,
                labels: str = "random") -> NuScenesFixture:
    """Write the database under ``root`` and return what was written. Every keyframe has ``points``
    (low, high) points and ``sweeps_per_keyframe`` earlier sweeps of the same size; the ego car drives
    along +x. ``labels="random"``: uniformly drawn fine labels (ignored classes included);
    ``"geometric"``: half the points on the ground plane and :func:`geometric_labels`."""
    if labels not in ("random", "geometric"):
        raise ValueError(f"labels must be 'random' or 'geometric', got {labels!r}")
    rng = np.random.default_rng(seed)
    scenes = dict(MINI_SCENES if scenes is None else scenes)
    out = NuScenesFixture(Path(root), version)
    tok = lambda: rng.bytes(16).hex()  # noqa: E731 (nuScenes tokens are 32 hex digits)
    t: dict[str, list[dict]] = {name: [] for name in TABLES}
    lidarseg: list[dict] = []

    t["category"] = [{"token": tok(), "name": n, "description": n, "index": i} for i, n in enumerate(FINE_CLASSES)]
    t["attribute"] = [{"token": tok(), "name": "vehicle.parked", "description": "parked vehicle"}]
    t["visibility"] = [{"token": str(i + 1), "level": lvl, "description": lvl}
                       for i, lvl in enumerate(("v0-40", "v40-60", "v60-80", "v80-100"))]
    sensor = {"token": tok(), "channel": "LIDAR_TOP", "modality": "lidar"}
    t["sensor"] = [sensor]
    calib = {"token": tok(), "sensor_token": sensor["token"], "translation": LIDAR_TRANSLATION,
             "rotation": LIDAR_ROTATION, "camera_intrinsic": []}
    t["calibrated_sensor"] = [calib]
    car = next(c for c in t["category"] if c["name"] == "vehicle.car")
    instance = {"token": tok(), "category_token": car["token"], "nbr_annotations": 1}

    time_us = 1_532_402_927_647_951
    for scene_name, n_samples in scenes.items():
        log = {"token": tok(), "logfile": f"n015-2018-07-24-11-22-45+0800-{scene_name}", "vehicle": "n015",
               "date_captured": "2018-07-24", "location": "singapore-onenorth"}
        t["log"].append(log)
        scene = {"token": tok(), "name": scene_name, "description": "fixture", "log_token": log["token"],
                 "nbr_samples": n_samples}
        samples = [{"token": tok(), "timestamp": 0, "scene_token": scene["token"], "prev": "", "next": ""}
                   for _ in range(n_samples)]
        for a, b in zip(samples, samples[1:]):
            a["next"], b["prev"] = b["token"], a["token"]
        scene["first_sample_token"], scene["last_sample_token"] = samples[0]["token"], samples[-1]["token"]
        t["scene"].append(scene)
        prev_sd: dict | None = None
        x_ego = 0.0
        for sample in samples:
            # sweeps_per_keyframe sweeps 50 ms apart, then the keyframe; one chain of sample_data per scene
            chain = [False] * sweeps_per_keyframe + [True]
            for is_key in chain:
                time_us += 50_000
                x_ego += 0.5
                pose = {"token": tok(), "timestamp": time_us, "translation": [400.0 + x_ego, 1100.0, 0.0],
                        "rotation": EGO_ROTATION}
                t["ego_pose"].append(pose)
                sd_token = tok()
                folder = "samples" if is_key else "sweeps"
                filename = f"{folder}/LIDAR_TOP/{sd_token}.pcd.bin"
                pts = _points(rng, int(rng.integers(points[0], points[1] + 1)), ground=labels == "geometric")
                path = out.root / filename
                path.parent.mkdir(parents=True, exist_ok=True)
                pts.tofile(path)
                sd = {"token": sd_token, "sample_token": sample["token"], "ego_pose_token": pose["token"],
                      "calibrated_sensor_token": calib["token"], "timestamp": time_us, "fileformat": "pcd",
                      "is_key_frame": is_key, "height": 0, "width": 0, "filename": filename,
                      "prev": prev_sd["token"] if prev_sd else "", "next": ""}
                if prev_sd is not None:
                    prev_sd["next"] = sd_token
                t["sample_data"].append(sd)
                prev_sd = sd
                if not is_key:
                    continue
                sample["timestamp"] = time_us
                fine = (rng.integers(0, len(FINE_CLASSES), len(pts)).astype(np.uint8) if labels == "random"
                        else geometric_labels(pts, rng))
                label_name = f"lidarseg/{version}/{sd_token}_lidarseg.bin"
                (out.root / label_name).parent.mkdir(parents=True, exist_ok=True)
                fine.tofile(out.root / label_name)
                lidarseg.append({"token": sd_token, "sample_data_token": sd_token, "filename": label_name})
                out.keyframes[sd_token] = (pts, fine, scene_name)
        t["sample"].extend(samples)
    # the sweeps of each keyframe back to the previous keyframe (or the start of the scene)
    by_token = {sd["token"]: sd for sd in t["sample_data"]}
    for sd_token in out.keyframes:
        n, sd = 0, by_token[sd_token]
        while sd["prev"] and not by_token[sd["prev"]]["is_key_frame"]:
            sd = by_token[sd["prev"]]
            n += len(np.fromfile(out.root / sd["filename"], dtype=np.float32)) // 5
        out.sweep_points[sd_token] = n

    first = t["sample"][0]
    ann = {"token": tok(), "sample_token": first["token"], "instance_token": instance["token"],
           "visibility_token": "4", "attribute_tokens": [t["attribute"][0]["token"]],
           "translation": [410.0, 1104.0, 1.0], "size": [1.9, 4.6, 1.7], "rotation": [1.0, 0.0, 0.0, 0.0],
           "prev": "", "next": "", "num_lidar_pts": 3, "num_radar_pts": 0}
    t["sample_annotation"] = [ann]
    instance["first_annotation_token"] = instance["last_annotation_token"] = ann["token"]
    t["instance"] = [instance]
    map_token = tok()
    t["map"] = [{"token": map_token, "log_tokens": [lg["token"] for lg in t["log"]], "category": "semantic_prior",
                 "filename": f"maps/{map_token}.png"}]
    _write_map_png(out.root / "maps" / f"{map_token}.png")

    tables = out.root / version
    tables.mkdir(parents=True, exist_ok=True)
    for name, records in {**t, "lidarseg": lidarseg}.items():
        (tables / f"{name}.json").write_text(json.dumps(records, indent=0))
    return out


def _write_map_png(path: Path) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.zeros((8, 8), dtype=np.uint8)).save(path)


def truncate(path: Path, keep_bytes: int) -> Path:
    """Cut a file to its first ``keep_bytes`` bytes (a damaged download)."""
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[:keep_bytes])
    return Path(path)
