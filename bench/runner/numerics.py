"""CPU numerics that a run's numbers depend on, and how ``--deterministic`` pins them.

Why this exists. Two runs of the same config, same code and same package versions, on two
machines of the same *kind*, can differ by one float32 ulp after a few steps, and a ViT trained
for a few hundred steps turns that ulp into different SSDC / robustness / extrapolation numbers.
The cause measured here: PyTorch picks its vectorised CPU kernels (softmax, layer norm,
reductions, elementwise maths) at start-up from the host's instruction set — ``AVX2`` on one
host, ``AVX512`` on another — and 8-lane vs 16-lane accumulation rounds differently. On the
committed ``shapes/rope-axial/seed0`` run, the training loss at step 19 was 2.046705961227417 on
the machine that produced it and 2.046705722808838 on an AVX-512 host; starting the same command
with ``ATEN_CPU_CAPABILITY=avx2`` on the AVX-512 host gives 2.046705961227417 again (and one or two
torch threads give the same value, so the thread count was not the cause).

What ``--deterministic`` does on an x86-64 CPU, before torch is imported:

* ``ATEN_CPU_CAPABILITY=avx2``: PyTorch's own CPU kernels use the AVX2 code path on every host
  that has AVX2 (all x86-64 server CPUs of the last decade);
* ``MKL_CBWR=AVX2,STRICT``: Intel MKL's conditional numerical reproducibility mode, the same
  GEMM code path whatever the host supports;
* ``ONEDNN_MAX_CPU_ISA=AVX2``: oneDNN (convolutions, e.g. the patch embedding) capped likewise.

A value the user set in the environment is kept for MKL/oneDNN but overridden for
``ATEN_CPU_CAPABILITY`` (the measured cause); what was in effect is recorded in
``results.json["numerics"]``. The price is speed: the AVX2 paths are slower than AVX-512 ones.
GPUs are not covered (CUDA kernels differ per device model); other CPU architectures get no pins.
When torch was imported before the pins could be set (pebench used as a library inside a
process that already imported torch), the pins cannot apply, the environment is left as it was
(the variables would otherwise leak into that process's later children and into torch.compile's
code generation), and the record says so. DDP ranks started by Lightning re-run the command
line, so each pins itself.

Denormals. Every run (``bench run``, ``--deterministic`` or not) sets the CPU's flush-to-zero /
denormals-are-zero modes (``torch.set_flush_denormal(True)``, x86 SSE3) in :func:`flush_denormals`.
Why: PaPE's published initialisation gives attention logits of about -50 to -200 at a few patches
of distance, so softmax weights and their gradients fall below float32's smallest normal number
(1.2e-38), where x86 arithmetic takes a slow microcode path. Measured on the 2-core machine, one
thread, vit-probe on a 10 x 10 grid, batch 64, a training step: PaPE 311 ms with denormals, 162 ms
flushed; RoPE-axial 135 ms / 116 ms. What changes numerically is only values below 1.2e-38, which
become 0. Recorded as ``results.json["numerics"]["flush_denormal"]``.
"""
from __future__ import annotations

import os
import platform
import sys
from typing import Any

__all__ = ["PINNED_ENV", "pin_cpu_numerics", "flush_denormals", "denormals_flushed", "numerics_record"]

#: environment variables set by ``--deterministic`` on x86-64, read by torch/MKL/oneDNN at start-up
PINNED_ENV: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_CBWR": "AVX2,STRICT",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
}
_OVERRIDE = ("ATEN_CPU_CAPABILITY",)

_state: dict[str, Any] = {"requested": False, "applied": False, "reason": None, "flush_denormal": False}


def _x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "x86-64")


def pin_cpu_numerics() -> bool:
    """Set :data:`PINNED_ENV` for this process and its children; True when it can take effect.

    Must run before the first ``import torch`` of the process (the ``bench`` CLI calls it right
    after parsing the arguments).
    """
    _state["requested"] = True
    if _state["applied"]:  # pinned already, before torch was imported (a sweep worker's pre-import)
        return True
    if not _x86():
        _state.update(applied=False, reason=f"no CPU pins for {platform.machine()} (x86-64 only)")
        return False
    if "torch" in sys.modules:  # too late for this process; leave the environment alone
        _state.update(applied=False, reason="torch was imported before the pins could be set")
        return False
    for key, value in PINNED_ENV.items():
        if key in _OVERRIDE or key not in os.environ:
            os.environ[key] = value
    _state.update(applied=True, reason=None)
    return True


def flush_denormals() -> bool:
    """Flush denormal floats to zero on the calling thread and on the threads it creates afterwards
    (see the module docstring); returns whether the CPU supports it. A thread keeps the floating-point
    mode it was created with, so OpenMP's worker pool, which torch creates at its first parallel
    operation, flushes only when this runs before that operation (`bench run` calls it before any; a pool
    made earlier kept denormals on its workers, 4x slower on a denormal product with 2 threads). numpy's
    float limits are computed first, because numpy warns when it first computes them with flushing
    on."""
    import numpy as np  # deferred: start-up time (numpy; the CLI imports this module)
    import torch  # deferred: start-up time (torch; pin_cpu_numerics must run before it is imported)

    for t in (np.float16, np.float32, np.float64):
        np.finfo(t)  # cached by numpy: computed now, before flush-to-zero, without a warning
    _state["flush_denormal"] = bool(torch.set_flush_denormal(True))
    return _state["flush_denormal"]


def denormals_flushed() -> bool:
    """Whether torch flushes denormal floats to zero now, on every thread that takes a chunk of a
    parallel product (2^21 float32 denormals times 1: all zero only if each flushes): measured rather
    than assumed (:func:`flush_denormals` reaches only threads made after it). The denormals are made
    from their bits (71,362: about 1e-40), since a flushing thread would turn ``torch.full(..., 1e-40)``
    into zeros itself."""
    import torch  # deferred: start-up time (pin_cpu_numerics must run before torch is imported)

    tiny = torch.full((1 << 21,), 71362, dtype=torch.int32).view(torch.float32)
    return int((tiny * 1.0).count_nonzero()) == 0


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def numerics_record() -> dict[str, Any]:
    """What the numbers of this process depend on: host CPU, the kernel path torch runs, threads,
    the pins in effect. Stored as ``results.json["numerics"]``."""
    import torch  # deferred: start-up time (torch; pin_cpu_numerics must run before it is imported)

    rec: dict[str, Any] = {
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_threads": torch.get_num_threads(),
        "flush_denormal": _state["flush_denormal"],
        "deterministic_pins": {
            "requested": _state["requested"],
            "applied": _state["applied"],
            "reason": _state["reason"],
            "env": {k: os.environ.get(k) for k in PINNED_ENV},
        },
    }
    if torch.cuda.is_available():
        rec["cuda_device"] = torch.cuda.get_device_name(0)
    return rec
