"""Regenerate the end-to-end example of docs/analyze.md (``python examples/analyze_timm.py``).

Builds a small timm ViT (``vit_tiny_patch16_224`` at 32 px with 8 px patches and 4 blocks, random
weights from ``torch.manual_seed(1)``; the RPI null band's twin is initialised from the run's seed
0), saves it as safetensors the way the hub delivers timm weights, runs ``bench analyze`` on the embedded ``shapes`` dataset in a temporary directory and
writes the command, its printed summary and the run's ``model_source`` between the
``<!-- example:start -->`` / ``<!-- example:end -->`` markers of docs/analyze.md. The summary's
wall-time row is left out (it differs from run to run); everything else is printed as it comes.
Nothing is downloaded.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

import timm
import torch
from safetensors.torch import save_file

from pebench.cli import main

DOC = Path(__file__).resolve().parent.parent / "docs" / "analyze.md"
START, END = "<!-- example:start -->", "<!-- example:end -->"
MODEL_OPTIONS = {"img_size": 32, "patch_size": 8, "depth": 4}
COMMAND = ["bench", "analyze", "--model", "timm:vit_tiny_patch16_224", "--checkpoint", "vit_tiny_p8_32.safetensors",
           "--dataset", "shapes", "--out", "runs", "--seed", "0",
           *[a for k, v in MODEL_OPTIONS.items() for a in ("--model-option", f"{k}={v}")],
           "--data-option", "train_size=512", "--data-option", "val_size=128", "--probe-samples", "512",
           "--analysis-option", "probe_size=64", "--analysis-option", "rpi_permutations=4",
           "--analysis-option", "alpha_samples=64", "--analysis-option", "extrapolation_samples=64"]


def run_example(workdir: Path) -> str:
    """The markdown of the example (command, summary, model_source), run inside ``workdir``."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    torch.manual_seed(1)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, **MODEL_OPTIONS)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(workdir / COMMAND[5]))
    here = Path.cwd()
    os.chdir(workdir)
    try:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main(COMMAND[1:])
        if rc != 0:
            raise SystemExit(f"bench analyze exited with {rc}")
        (res_path,) = Path("runs").glob("*/*/*/seed0/results.json")  # the one run directory, as bench named it
        run_dir = res_path.parent
        source = json.loads((run_dir / "results.json").read_text())["model_source"]
        files = sorted(p.name for p in run_dir.iterdir())
    finally:
        os.chdir(here)
    summary = "\n".join(line for line in buf.getvalue().splitlines() if "wall time" not in line)
    lines = [START, "", "```console", "$ " + " \\\n    ".join(_pairs(COMMAND)), summary, "```", "",
             f"The run directory `{run_dir}/` holds {', '.join(f'`{f}`' for f in files)}; "
             "`results.json` records where the weights came from and how the adapter read them:", "",
             "```json", json.dumps({"model_source": source}, indent=2), "```", "", END]
    return "\n".join(lines)


def _pairs(argv: list[str]) -> list[str]:
    """Shell words grouped as ``--flag value`` pairs (one per continuation line)."""
    out: list[str] = []
    for word in argv:
        if out and not word.startswith("--") and out[-1].startswith("--") and " " not in out[-1]:
            out[-1] += " " + shlex.quote(word)
        else:
            out.append(shlex.quote(word))
    return [" ".join(out[:2])] + out[2:]


def update_doc(block: str, doc: Path = DOC) -> None:
    text = doc.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{doc.name}: the {START} / {END} markers are missing")
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    doc.write_text(head + block + tail, encoding="utf-8")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        update_doc(run_example(Path(tmp)))
    print(f"updated {DOC.name}", file=sys.stderr)
