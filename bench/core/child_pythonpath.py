"""Keep the repository's ``encodings/`` folder out of the Python children that torch starts.

The source folder ``encodings/`` (installed as ``pebench.encodings``) shadows the standard library's
``encodings`` in any interpreter whose ``PYTHONPATH`` holds the repository root, and such an interpreter
dies at start-up ("init_fs_encoding"). pebench never puts the root on ``PYTHONPATH``, but torch's inductor
does it for us: the Python children it starts (the CPU vector-ISA probe in ``torch._inductor.cpu_vec_isa``,
the compile-worker pool) get ``PYTHONPATH`` = torch's folder + this process's ``sys.path``
(``torch._inductor.utils.python_subprocess_env``). With the root on ``sys.path`` (``python -m`` from the
root, pytest's ``pythonpath``), the ISA probe's child dies, inductor concludes the CPU has no vector ISA,
and kernels that need one (FlexAttention's CPU GEMM template: "trans_b requires AVX512 or AVX2 vec ISA")
fail to compile. torch reads ``TORCH_CUSTOM_PYTHONPATH`` instead of that list when it is set;
:func:`shield_torch_children` sets it to the same list without the shadowing entries.
"""
from __future__ import annotations

import encodings as _stdlib_encodings  # the standard library's: loaded at interpreter start-up, before sys.path
import importlib.util
import os
import sys
from pathlib import Path

__all__ = ["TORCH_PYTHONPATH_VAR", "shadowing_entries", "shield_torch_children"]

#: the variable torch's ``python_subprocess_env`` uses, when set, as its children's ``PYTHONPATH``
TORCH_PYTHONPATH_VAR = "TORCH_CUSTOM_PYTHONPATH"


def shadowing_entries(path: list[str] | None = None) -> list[str]:
    """The entries of ``path`` (default ``sys.path``) holding an ``encodings/`` folder that is not the standard
    library's ('' is the working directory)."""
    stdlib_dir = Path(_stdlib_encodings.__file__).resolve().parent.parent
    found = []
    for entry in sys.path if path is None else path:
        folder = Path(entry or os.getcwd())
        if (folder / "encodings").is_dir() and folder.resolve() != stdlib_dir:
            found.append(entry)
    return found


def shield_torch_children() -> str | None:
    """Set ``TORCH_CUSTOM_PYTHONPATH`` to what torch would use, less :func:`shadowing_entries`, when
    ``sys.path`` holds such an entry and the user has not set the variable; return the value set (else None).
    Call it before anything compiles (torch reads the variable each time it starts a child)."""
    if TORCH_PYTHONPATH_VAR in os.environ:
        return None
    bad = set(shadowing_entries())
    spec = importlib.util.find_spec("torch")
    if not bad or spec is None or spec.origin is None:
        return None
    torch_root = str(Path(spec.origin).resolve().parent.parent)
    value = os.pathsep.join([torch_root, *(p for p in sys.path if p not in bad)])
    os.environ[TORCH_PYTHONPATH_VAR] = value
    return value
