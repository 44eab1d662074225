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
  ``config.yaml`` beside it (which must exist): committed files name no machine.

Nothing here imports torch.
"""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator, Mapping

import yaml

from pebench.core.schema import SCHEMA_VERSION

from .collect import RunRecord, collect_results

__all__ = ["check_results", "absolute_paths"]

_ABSOLUTE = re.compile(r"^(/|~|[A-Za-z]:[\\/]|\\\\)")


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


def _paths(root: Path, runs: list[RunRecord]) -> list[str]:
    problems = []
    for r in runs:
        problems += [f"{r.path}: absolute path in {key}: {value}" for key, value in absolute_paths(r.raw)]
        folder = r.path.rsplit("/", 1)[0] if "/" in r.path else "."
        config = f"{folder}/config.yaml" if folder != "." else "config.yaml"
        try:
            data = yaml.safe_load((root / config).read_text(encoding="utf-8"))
        except FileNotFoundError:
            problems.append(f"{config}: missing (every run folder holds its config.yaml)")
            continue
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            problems.append(f"{config}: unreadable ({type(e).__name__})")
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
    problems += _provenance(cells) + _seeds(cells, count_missing=not problems) + _paths(root, runs)
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
