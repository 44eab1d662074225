"""Atomic file writes: a temp file in the same directory, fsync, then ``os.replace``.

A kill at any moment leaves either the old file or the new one, never a truncated one.

File modes: ``tempfile.mkstemp`` creates its file with mode 0600 whatever the umask, and
``os.replace`` keeps that mode, so every result would be private to its owner. The temp file is
therefore given the mode a plain ``open(path, "w")`` would have created, ``0666 & ~umask``
(0644 under the usual umask 022), before it is moved into place: colleagues on a shared cluster
can read results, configs, checkpoints, plots and the leaderboard exactly when the umask says so.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import yaml

from pebench.core.errors import UserError

__all__ = ["default_file_mode", "atomic_write_bytes", "atomic_write_text", "atomic_write_json", "atomic_write_yaml",
           "read_json", "parse_json", "UnreadableJSON", "local_file", "load_yaml_untrusted", "UnreadableYAML",
          "MAX_YAML_BYTES", "MAX_YAML_NODES", "MAX_JSON_BYTES", "MAX_JSON_DEPTH", "remove_stale_temp_files"]

#: the largest JSON file pebench reads (a results.json of every analysis is well under 1 MB)
MAX_JSON_BYTES = 64 * 1024 * 1024
#: the deepest nesting pebench reads: what it writes is at most ~6 levels deep; deeper input is hostile
#: (``[[[...]]]`` makes the json module, and every recursive walk after it, raise RecursionError)
MAX_JSON_DEPTH = 64


def _current_umask() -> int:
    """The process umask, read without changing it where ``/proc`` allows (no race with threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # no other portable way to read it: set and restore at once
    os.umask(mask)
    return mask


def default_file_mode() -> int:
    """Mode of a newly created regular file under the current umask: ``0o666 & ~umask``."""
    return 0o666 & ~_current_umask()


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, with the mode the umask gives new files."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, default_file_mode())  # mkstemp made it 0600
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, allow_nan=True) + "\n")


def atomic_write_yaml(path: str | os.PathLike[str], obj: Any) -> None:
    atomic_write_text(path, yaml.safe_dump(obj, sort_keys=False))


class UnreadableJSON(ValueError):
    """A file that is not JSON pebench reads: too large, too deeply nested, not UTF-8 or not JSON. The message
    is one line naming what was expected (callers turn it into a user error or a listed problem)."""


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def _depth_exceeds(text: str, limit: int) -> bool:
    """Whether the brackets of ``text`` (outside strings) nest deeper than ``limit``: a linear scan with no
    recursion, so it is safe on any input."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for m in _JSON_BRACKET.finditer(_JSON_STRING.sub("", text)):
        depth += 1 if m.group() in "[{" else -1
        if depth > limit:
            return True
    return False


def parse_json(text: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` for untrusted text: nesting deeper than ``max_depth`` is refused before parsing, and any
    failure is :class:`UnreadableJSON` with one line (never RecursionError or a traceback)."""
    if _depth_exceeds(text, max_depth):
        raise UnreadableJSON(f"nested deeper than {max_depth} levels (pebench writes at most a few)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UnreadableJSON(f"not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except (RecursionError, ValueError) as e:  # e.g. an integer of over 4,300 digits
        raise UnreadableJSON(f"not valid JSON ({type(e).__name__}: {' '.join(str(e).split())[:200]})") from None


def read_json(path: str | os.PathLike[str], *, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """Read a JSON file pebench did not necessarily write: at most ``max_bytes``, UTF-8, nesting bounded
    (:func:`parse_json`). Raises :class:`UnreadableJSON` (one line) for a file that is none of these, and
    ``OSError`` for one that cannot be opened."""
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UnreadableJSON(f"larger than {max_bytes // (1024 * 1024)} MiB (a results file is far smaller)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UnreadableJSON(f"not UTF-8 text (byte {e.start})") from None
    return parse_json(text)


def remove_stale_temp_files(folder: str | os.PathLike[str]) -> list[str]:
    """Remove the temp files a killed :func:`atomic_write_bytes` left in ``folder`` (``.<name>.*.tmp``, never a
    file another name matches); returns the names removed. Call it only while holding the folder's lock: a
    live writer's temp file must not be removed under it."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if entry.name.startswith(".") and entry.name.endswith(".tmp") and entry.is_file(follow_symlinks=False):
            try:
                os.unlink(entry.path)
                removed.append(entry.name)
            except OSError:
                pass
    return sorted(removed)


@contextlib.contextmanager
def publish_dir(root: str | os.PathLike[str], prefix: str) -> Iterator[str]:
    """Build a directory atomically: yields a fresh temporary sibling of ``root`` to fill; when the block
    ends normally it is renamed to ``root`` (if another process published ``root`` first, that copy is
    kept and ours removed); on any exception it is removed. Nothing half-written is ever at ``root``."""
    parent = os.path.dirname(os.path.abspath(root))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=prefix, dir=parent)
    try:
        yield tmp
        try:
            os.rename(tmp, root)
        except OSError:
            if not os.path.isdir(root):
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another process wrote the same data first
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def local_file(path: str | os.PathLike[str], what: str = "checkpoint") -> Path:
    """``path`` as a local regular file, or a one-line :class:`~pebench.core.errors.UserError` (phase
    ``checkpoint``): pebench never fetches a URL (``http://``, ``s3://``, ...) or reads a directory, a device or
    a FIFO as a model file. Nothing is opened here."""
    text = os.fspath(path)
    if _SCHEME.match(text):
        raise UserError(f"{what} {text!r} is a URL; pebench reads local files only and never downloads "
                        f"(download it yourself, check it, then pass its path)", phase="checkpoint")
    p = Path(text)
    if not p.exists():
        raise UserError(f"{what} {text!r} does not exist (expected a local file)", phase="checkpoint")
    if not p.is_file():
        raise UserError(f"{what} {text!r} is not a regular file (expected a local file)", phase="checkpoint")
    return p


#: the largest YAML text pebench parses (a run's config.yaml is a few kB)
MAX_YAML_BYTES = 1024 * 1024
#: the most nodes a YAML document may stand for once its aliases are expanded (a config has a few hundred)
MAX_YAML_NODES = 100_000


class UnreadableYAML(ValueError):
    """YAML pebench refuses to read: too large, too deeply nested, aliases that expand past
    :data:`MAX_YAML_NODES` (a "billion laughs" bomb) or a recursive alias, or not YAML at all. One line."""


def _expanded_size(root: yaml.Node, limit: int, max_depth: int) -> int:
    """Nodes ``root`` stands for with every alias expanded, computed without expanding (each node's size is
    memoised) and without recursion; a node that contains itself, nesting deeper than ``max_depth`` or a
    size past ``limit`` raises :class:`UnreadableYAML`."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        kids: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            kids = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            kids = [n for pair in node.value for n in pair]
        if children_done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(k)] for k in kids)
            if sizes[key] > limit:
                raise UnreadableYAML(f"its aliases expand to more than {limit:,} nodes (a config holds a few hundred)")
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise UnreadableYAML("an alias refers to a node that contains it (recursive YAML)")
        on_path.add(key)
        if len(on_path) > max_depth:
            raise UnreadableYAML(f"nested deeper than {max_depth} levels")
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in sizes)
    return sizes[id(root)]


def load_yaml_untrusted(text: str, *, max_bytes: int = MAX_YAML_BYTES, max_nodes: int = MAX_YAML_NODES,
                        max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``yaml.safe_load`` for text pebench did not write: no Python tags (the safe loader), at most
    ``max_bytes``, nesting and alias expansion bounded before anything is built. Failures are
    :class:`UnreadableYAML` with one line, never RecursionError or a hang."""
    if len(text) > max_bytes:
        raise UnreadableYAML(f"larger than {max_bytes // 1024} kB (a config file is far smaller)")
    try:
        loader = yaml.SafeLoader(text)  # its reader refuses control characters here already
    except yaml.YAMLError as e:
        raise UnreadableYAML(f"not valid YAML: {' '.join(str(e).split())[:200]}") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, max_nodes, max_depth)
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        raise UnreadableYAML(f"not valid YAML: {' '.join(str(e).split())[:200]}") from None
    except RecursionError:
        raise UnreadableYAML(f"nested deeper than {max_depth} levels") from None
    finally:
        loader.dispose()
