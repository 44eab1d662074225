"""Rewrite the machine paths in committed result files as paths relative to their study folder.

``bench run`` recorded where a run was written on the machine that made it: ``run_dir`` in
``results.json`` and ``out`` (and ``data_root`` when set) in the run configuration, i.e. in
``config.yaml`` and in ``results.json``'s ``config``. Once the run folder is committed under
``results/<study>/`` those paths name a machine nobody else has. This script rewrites exactly
those values, and nothing else, for every ``results.json`` / ``config.yaml`` pair below ``--results``:

* ``run_dir`` becomes the run folder relative to the study folder (``<dataset>/<pe>/<model>/seed<S>``,
  what ``bench run`` records now: the run folder relative to ``--out``; a run that recorded it so
  keeps it);
* ``out`` becomes ``.``: the study folder is the output root the runs were made with;
* ``data_root``, when it is a path below ``out``, becomes that path relative to it; any other
  absolute ``data_root`` is reported and the file left alone (no committed run sets one).

The study folder of a run is its folder minus the ``run_dir``-relative-to-``out`` suffix, so the
committed layout must end with what ``bench run`` recorded (checked; a mismatch is reported).
The values are replaced in the file text (a JSON string for a JSON string, a YAML scalar line for a
YAML scalar line), so every number and every other byte stays as it was; the script checks that
the parsed files differ in those keys only. Running it again changes nothing.

Usage: ``python -m benchmarks.strip_machine_paths [--results results] [--check]``
(``--check``: change nothing, exit 1 when a file would change).
"""
from __future__ import annotations

import argparse
import json
import posixpath
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

#: configuration keys holding a path on the machine that ran
PATH_KEYS = ("out", "data_root")


def _relative(path: str, base: str) -> str | None:
    """``path`` relative to ``base`` (POSIX), or None when it is not below it."""
    p, b = PurePosixPath(posixpath.normpath(path)), PurePosixPath(posixpath.normpath(base))
    try:
        rel = p.relative_to(b)
    except ValueError:
        return None
    return rel.as_posix() or "."


def new_values(results: dict[str, Any], run_folder: Path) -> tuple[dict[str, str], str | None]:
    """``({key: new value}, problem)`` for one run: the keys (``run_dir``, ``out``, ``data_root``) to
    rewrite; ``problem`` is a sentence when the run cannot be rewritten safely."""
    cfg = results.get("config") if isinstance(results.get("config"), dict) else {}
    out, run_dir = cfg.get("out"), results.get("run_dir")
    if not isinstance(out, str) or not isinstance(run_dir, str):
        return {}, "no string 'out' in config or 'run_dir'"
    if out == "." and not PurePosixPath(run_dir).is_absolute():
        return {}, None  # already rewritten
    recorded_relative = not PurePosixPath(run_dir).is_absolute()  # what bench run records now
    rel = posixpath.normpath(run_dir) if recorded_relative else _relative(run_dir, out)
    if rel is None or rel == "." or rel.startswith(".."):
        return {}, f"run_dir {run_dir!r} is not below out {out!r}"
    if not run_folder.as_posix().endswith("/" + rel) and run_folder.as_posix() != rel:
        return {}, f"the committed folder does not end with {rel!r} (run_dir relative to out)"
    changes = {"out": "."} if recorded_relative else {"run_dir": rel, "out": "."}
    data_root = cfg.get("data_root")
    if isinstance(data_root, str):
        inside = _relative(data_root, out)
        if inside is None:
            return {}, f"data_root {data_root!r} is not below out {out!r}"
        changes["data_root"] = inside
    return changes, None


def _replace_once(text: str, old: str, new: str, where: str) -> str:
    if text.count(old) != 1:
        raise ValueError(f"{where}: expected {old!r} exactly once, found it {text.count(old)} times")
    return text.replace(old, new)


def rewrite_json(text: str, results: dict[str, Any], changes: dict[str, str], where: str) -> str:
    """``results.json`` text with ``run_dir`` and the config's path keys replaced (JSON string literals)."""
    cfg = results["config"]
    for key, value in changes.items():
        old = results["run_dir"] if key == "run_dir" else cfg[key]
        text = _replace_once(text, f'"{key}": {json.dumps(old)}', f'"{key}": {json.dumps(value)}', where)
    return text


def rewrite_yaml(text: str, config: dict[str, Any], changes: dict[str, str], where: str) -> str:
    """``config.yaml`` text with the path keys' scalar lines replaced."""
    for key in PATH_KEYS:
        if key not in changes:
            continue
        old_line = f"\n{key}: {config[key]}\n"
        new_line = f"\n{key}: {yaml.safe_dump(changes[key], default_flow_style=True).splitlines()[0]}\n"
        text = _replace_once(text, old_line, new_line, where)
    return text


def _without(d: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in keys}


def _same(before: dict[str, Any], after: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
    """Raise unless ``before`` and ``after`` differ in ``keys`` only (the rewrite touched nothing else)."""
    if _without(before, keys) != _without(after, keys):
        raise ValueError(f"{where}: the rewrite changed more than {', '.join(keys)}")


def process(results_root: Path, write: bool) -> tuple[list[Path], list[str]]:
    """(files that change, problems) for every run below ``results_root``; writes when ``write``."""
    changed: list[Path] = []
    problems: list[str] = []
    for path in sorted(results_root.glob("**/results.json")):
        folder = path.parent
        text = path.read_text(encoding="utf-8")
        results = json.loads(text)
        changes, problem = new_values(results, folder)
        if problem:
            problems.append(f"{path}: {problem}")
            continue
        if not changes:
            continue
        new_text = rewrite_json(text, results, changes, str(path))
        new_results = json.loads(new_text)
        _same(results, new_results, ("run_dir", "config"), str(path))
        _same(results["config"], new_results["config"], PATH_KEYS, str(path))
        updates = [(path, new_text)]
        cfg_path = folder / "config.yaml"
        if cfg_path.is_file():
            cfg_text = cfg_path.read_text(encoding="utf-8")
            config = yaml.safe_load(cfg_text)
            new_cfg_text = rewrite_yaml(cfg_text, config, changes, str(cfg_path))
            new_config = yaml.safe_load(new_cfg_text)
            _same(config, new_config, PATH_KEYS, str(cfg_path))
            if any(new_config[k] != changes[k] for k in PATH_KEYS if k in changes):
                raise ValueError(f"{cfg_path}: the rewritten values do not read back as written")
            updates.append((cfg_path, new_cfg_text))
        for file, new in updates:
            changed.append(file)
            if write:
                file.write_text(new, encoding="utf-8")
    return changed, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--results", default="results", help="folder of committed studies (default: results)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a file would change")
    args = parser.parse_args(argv)
    root = Path(args.results)
    if not root.is_dir():
        parser.error(f"results folder {args.results!r} does not exist")
    changed, problems = process(root, write=not args.check)
    for line in problems:
        print(f"skipped {line}", file=sys.stderr)
    verb = "would change" if args.check else "rewrote"
    print(f"{verb} {len(changed)} file(s)")
    return 1 if (args.check and changed) or problems else 0


if __name__ == "__main__":
    sys.exit(main())
