"""flush_denormals reaches torch's CPU worker threads when it runs before their pool exists, and only
then (the contract its docstring states). Each case runs in a fresh interpreter: the pool is made once
per process, at torch's first parallel operation."""
import subprocess
import sys

import pytest

# a 2-thread elementwise product over denormal inputs (1e-40 < float32's smallest normal 1.2e-38):
# with flushing on in every thread that computes a chunk, every product is 0
_CASE = """
import torch
from pebench.runner.numerics import flush_denormals
torch.set_num_threads(2)
if {warm_pool_first}:
    x = torch.full((1 << 21,), 1e-40)  # a parallel fill: creates the worker pool before flushing
if not flush_denormals():
    print("unsupported")
else:
    if not {warm_pool_first}:
        x = torch.full((1 << 21,), 1e-40)  # the pool is created here, after flushing (as in bench)
    print(int((x * 1.0).count_nonzero()))
"""


def _nonzero(warm_pool_first: bool) -> str:
    out = subprocess.run([sys.executable, "-c", _CASE.format(warm_pool_first=warm_pool_first)],
                         capture_output=True, text=True, check=True, timeout=120)
    return out.stdout.strip()


def test_flushing_before_the_pool_exists_reaches_every_worker():
    got = _nonzero(False)
    if got == "unsupported":
        pytest.skip("this CPU cannot flush denormals")
    assert got == "0"


def test_a_pool_made_before_flushing_keeps_denormals_on_its_workers():
    """Why the CLI flushes first: the calling thread flushes, a worker made earlier does not."""
    got = _nonzero(True)
    if got == "unsupported":
        pytest.skip("this CPU cannot flush denormals")
    if int(got) == 0:
        pytest.skip("the product ran on the calling thread alone (no second worker took a chunk)")
    assert 0 < int(got) < (1 << 21)
