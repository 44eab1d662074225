"""One-off: add the keys ``bench run`` now records for the leaderboard to older ``results.json`` files.

    python benchmarks/backfill_result_keys.py results [more roots ...] [--check]

``pe_label`` (the PE and its non-default options, ``pebench.encodings.variant_label``) and
``dataset_info`` (``{"no_pe_bound": ...}``: a probe's exact no-PE ceiling, ``pebench.runner.run.dataset_info``)
let ``pebench.leaderboard`` render a table without importing torch, the PEs or the datamodules. Files
written before they were recorded get exactly the values a run made now would record, computed from
their own ``pe``, ``config.pe_options`` and ``dataset``. Only those two keys are added, and only where
missing: every other byte of a file stays as it was (a file that the writer's format would not
reproduce byte for byte is refused, not rewritten). ``--check`` writes nothing and exits 1 when a
file would change.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pebench.core.io import atomic_write_text
from pebench.datamodules import get_datamodule_class
from pebench.encodings import variant_label
from pebench.runner.run import dataset_info, load_registries


def _dump(obj: Any) -> str:
    """The text ``atomic_write_json`` writes (``bench run``'s format)."""
    return json.dumps(obj, indent=2, sort_keys=True, allow_nan=True) + "\n"


def added_keys(results: dict[str, Any]) -> dict[str, Any]:
    """The keys missing from ``results`` with the values ``bench run`` records for them now."""
    added: dict[str, Any] = {}
    if "pe_label" not in results:
        cfg = results.get("config") if isinstance(results.get("config"), dict) else {}
        added["pe_label"] = variant_label(results["pe"], cfg.get("pe_options") or {})
    if "dataset_info" not in results:
        added["dataset_info"] = dataset_info(get_datamodule_class(results["dataset"]))
    return added


def backfill(path: Path, check: bool) -> bool:
    """Add the missing keys to one file (unless ``check``); -> whether it lacked any."""
    text = path.read_text(encoding="utf-8")
    results = json.loads(text)
    if _dump(results) != text:
        raise SystemExit(f"{path}: not in bench run's JSON format; refusing to rewrite it")
    added = added_keys(results)
    if added and not check:
        atomic_write_text(path, _dump({**results, **added}))
    return bool(added)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", type=Path, help="directories searched for results.json")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file lacks a key")
    args = parser.parse_args(argv)
    load_registries()
    files = sorted(p for root in args.roots for p in root.glob("**/results.json"))
    changed = [p for p in files if backfill(p, args.check)]
    verb = "lack" if args.check else "added keys to"
    print(f"{len(changed)} of {len(files)} results.json files {verb} pe_label / dataset_info")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
