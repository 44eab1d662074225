"""``bench leaderboard --check DIR``: validate a results folder made elsewhere before it is merged.

Each problem is one line ``<file>: <what is wrong>`` (the file relative to ``DIR``); the folder is
accepted when there are none. Checked, for every ``results.json`` below ``DIR``:

* schema: what :func:`.collect.collect_results` reports (not JSON, a required key missing or of
  the wrong type, an analysis section of the wrong shape, the primary metric missing);
* status: every run is ``complete``;
* provenance: the runs of one cell (dataset, model, PE variant) were made by one commit
  (``git_sha``, recorded) with one configuration (``fingerprint``), so the cell is one row;
* seeds: every cell of a dataset has the same seeds (the paired differences need them; counted
  once every file is complete, as a broken file is a missing seed too), each once: two runs of one
  cell with the same seed are duplicates, whatever their configuration;
* paths: no absolute path (``/...``, ``~...``, ``C:\\...``) in any value of ``results.json`` or of the
  ``config.yaml`` beside it (which must exist): committed files name no machine. ``config.yaml`` is read with
  :func:`pebench.core.io.load_yaml_untrusted` (size, nesting and aliases bounded);
* names the leaderboard shows: every extrapolation ``resolution`` is a size as pebench writes it
  (:data:`RESOLUTION`: ``64``, or ``AxB`` such as ``8x64`` and segmentation's ``2x1``; positive integers) and
  every robustness shift is one pebench has (:data:`SHIFT_NAMES`). The page escapes whatever a file holds,
  but a folder to be merged holds nothing that pebench would not have written.

Nothing here imports torch.
"""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator, Mapping

from pebench.core.io import MAX_YAML_BYTES, UnreadableYAML, load_yaml_untrusted
from pebench.core.schema import SCHEMA_VERSION

from .collect import RunRecord, collect_results

__all__ = ["check_results", "absolute_paths", "is_resolution", "RESOLUTION", "SHIFT_NAMES"]

_ABSOLUTE = re.compile(r"^(/|~|[A-Za-z]:[\\/]|\\\\)")
#: an extrapolation ``resolution`` as pebench writes it (``pebench.analysis.extrapolation.resolution_key`` of a size
#: that ``parse_resolution`` accepted): a side ``S``, or ``AxB`` (``HxW``, video and events ``TxS``, points
#: ``MxG``, segmentation ``FxK``); ASCII digits, each part positive
RESOLUTION = re.compile(r"(?P<a>[0-9]+)(?:x(?P<b>[0-9]+))?", re.ASCII)
#: the robustness shifts pebench has: ``pebench.analysis.robustness.SHIFTS`` (image, video, events, points),
#: the raw-stream shifts of spiking tokens (``pebench.datamodules.events.event_transforms.STREAM_SHIFTS``) and
#: the scene shifts of segmentation (``pebench.tasks.segmentation.shift.SCENE_SHIFTS``); written here because
#: those modules import torch (tests/leaderboard/test_hostile_results.py checks that the lists agree)
SHIFT_NAMES: tuple[str, ...] = ("blur", "dropout", "jitter", "jpeg", "noise", "point_dropout", "time_jitter")


def absolute_paths(value: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """``(key path, value)`` of every string in a JSON/YAML value that is an absolute path."""
    if isinstance(value, str):
        if _ABSOLUTE.match(value):
            yield where or "(top level)", value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from absolute_paths(v, f"{where}.{k}" if where else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from absolute_paths(v, f"{where}[{i}]")


def _cell(r: RunRecord) -> str:
    return f"{r.dataset}/{r.model}/{r.label}"


def _provenance(cells: dict[str, list[RunRecord]]) -> list[str]:
    problems = []
    for name, members in cells.items():
        for attr, what in (("git_sha", "commit"), ("fingerprint", "configuration")):
            first = members[0]
            if attr == "git_sha":
                problems += [f"{r.path}: no git_sha recorded (the commit that made it is unknown)"
                             for r in members if r.git_sha is None]
            for r in members[1:]:
                a, b = getattr(first, attr), getattr(r, attr)
                if a is not None and b is not None and a != b:
                    problems.append(f"{r.path}: another {what} ({attr} {b[:12]}) than {first.path} ({a[:12]}) in "
                                    f"cell {name}")
    return problems


def _seeds(cells: dict[str, list[RunRecord]], count_missing: bool) -> list[str]:
    problems = []
    by_dataset: dict[str, set[int]] = defaultdict(set)
    for members in cells.values():
        by_dataset[members[0].dataset].update(r.seed for r in members)  # type: ignore[arg-type,misc]
    for name, members in cells.items():
        seen: dict[int, str] = {}
        for r in members:
            if r.seed in seen:
                problems.append(f"{r.path}: duplicate run: seed {r.seed} of cell {name} is also {seen[r.seed]}")
            seen.setdefault(r.seed, r.path)  # type: ignore[arg-type]
        missing = sorted(by_dataset[members[0].dataset] - set(seen))  # type: ignore[arg-type]
        if missing and count_missing:
            problems.append(f"{members[0].path}: cell {name} lacks seed(s) {', '.join(map(str, missing))} that other "
                            f"cells of {members[0].dataset} have ({len(seen)} seed(s): "
                            f"{', '.join(map(str, sorted(seen)))})")
    return problems


def _shown(values: list[Any]) -> str:
    """Up to three values as ``repr`` (one line, long ones cut), and how many more."""
    cut = [(text if len(text) <= 40 else text[:39] + "…") for text in map(repr, values[:3])]
    return ", ".join(cut) + (f" (+{len(values) - 3} more)" if len(values) > 3 else "")


def is_resolution(value: Any) -> bool:
    """Whether ``value`` is an extrapolation resolution as pebench writes it (:data:`RESOLUTION`)."""
    m = RESOLUTION.fullmatch(value) if isinstance(value, str) else None
    return m is not None and all(p is None or p.strip("0") for p in (m["a"], m["b"]))


def _sections(runs: list[RunRecord]) -> list[str]:
    """Extrapolation resolutions and robustness shift names that pebench does not write (the leaderboard's
    column names are made of them)."""
    problems = []
    for r in runs:
        rows = r.raw.get("extrapolation")
        if isinstance(rows, list):
            bad = [row["resolution"] for row in rows
                   if isinstance(row, dict) and "resolution" in row and not is_resolution(row["resolution"])]
            if bad:
                problems.append(f"{r.path}: extrapolation resolution {_shown(bad)} is not one pebench writes "
                                f"(expected a string of a size, '64', or 'AxB' such as '8x64'; positive integers)")
        shifts = r.raw.get("robustness")
        if isinstance(shifts, dict):
            bad = [kind for kind, entry in shifts.items() if isinstance(entry, dict) and kind not in SHIFT_NAMES]
            if bad:
                problems.append(f"{r.path}: robustness shift {_shown(bad)} is not one pebench has "
                                f"(expected one of {', '.join(SHIFT_NAMES)})")
    return problems


def _read_config(path: Path) -> Any:
    """A ``config.yaml`` of anyone's: at most :data:`~pebench.core.io.MAX_YAML_BYTES` read, UTF-8, then
    :func:`~pebench.core.io.load_yaml_untrusted` (raises ``OSError``, ``UnicodeDecodeError``, ``UnreadableYAML``)."""
    with open(path, "rb") as f:
        data = f.read(MAX_YAML_BYTES + 1)
    return load_yaml_untrusted(data.decode("utf-8"))


def _paths(root: Path, runs: list[RunRecord]) -> list[str]:
    problems = []
    for r in runs:
        problems += [f"{r.path}: absolute path in {key}: {value}" for key, value in absolute_paths(r.raw)]
        folder = r.path.rsplit("/", 1)[0] if "/" in r.path else "."
        config = f"{folder}/config.yaml" if folder != "." else "config.yaml"
        try:
            data = _read_config(root / config)
        except FileNotFoundError:
            problems.append(f"{config}: missing (every run folder holds its config.yaml)")
            continue
        except (OSError, UnicodeDecodeError) as e:
            problems.append(f"{config}: unreadable ({type(e).__name__})")
            continue
        except UnreadableYAML as e:
            problems.append(f"{config}: unreadable ({e})")
            continue
        problems += [f"{config}: absolute path in {key}: {value}" for key, value in absolute_paths(data)]
    return problems


def check_results(root: str | Path, config_defaults: Mapping[str, Any] | None = None) -> tuple[list[str], str]:
    """``(problems, summary)`` for the results folder ``root``: one line per problem, sorted by file;
    ``summary`` is one line for an accepted folder. Raises ``FileNotFoundError`` when ``root`` is not a
    directory."""
    root = Path(root)
    runs, problems = collect_results(root, config_defaults)
    problems = list(problems)
    if not runs and not problems:
        return ["results.json: no results.json found below the folder"], ""
    problems += [f"{r.path}: status {r.status!r}, not complete" for r in runs if not r.complete]
    complete = [r for r in runs if r.complete]
    cells: dict[str, list[RunRecord]] = defaultdict(list)
    for r in sorted(complete, key=lambda r: (r.seed, r.path)):
        cells[_cell(r)].append(r)
    # a broken or incomplete file is a missing seed too: seeds are counted once every file is complete
    problems += _provenance(cells) + _seeds(cells, count_missing=not problems) + _paths(root, runs) + _sections(runs)
    problems.sort(key=lambda line: line.split(": ", 1)[0])
    summary = ""
    if cells:  # a folder of broken files has no cell (and no seeds) to summarise
        seeds = sorted({len(m) for m in cells.values()})
        span = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"
        versions = sorted({r.schema_version for r in runs})
        older = sum(r.schema_version < SCHEMA_VERSION for r in runs)
        read = f"schema version {SCHEMA_VERSION}" + (
            f" ({older} file(s) of version {', '.join(map(str, versions[:-1] if versions[-1] == SCHEMA_VERSION else versions))} "
            f"read through pebench.core.schema's migrations)" if older else "")
        summary = (f"{len(complete)} complete run(s) in {len(cells)} cell(s) of "
                   f"{len({r.dataset for r in complete})} dataset(s), {span} seed(s) per cell; {read}")
    return problems, summary
