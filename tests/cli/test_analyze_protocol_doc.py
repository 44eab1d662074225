"""docs/analyze.md's precision of `bench analyze --protocol quick` is what the committed rpi-draw study gives:
the median per-pass spread of SSDC under RPI over the 12 layers, and the standard errors of the K = 8 and K = 2
shared-permutation means."""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from pebench.cli.analyze import PROTOCOLS

REPO = Path(__file__).resolve().parents[2]


def test_quick_protocol_precision_in_the_doc_is_the_rpi_draw_study():
    study = json.loads((REPO / "results" / "rpi-draw" / "study.json").read_text(encoding="utf-8"))
    doc = (REPO / "docs" / "analyze.md").read_text(encoding="utf-8")
    k_default = study["protocol"]["permutations"]
    k_quick = PROTOCOLS["quick"]["analysis_options"]["rpi_permutations"]
    assert k_default == 8 and k_quick == 2
    assert f"√({k_default} / {k_quick}) = {math.sqrt(k_default / k_quick):g} times" in doc
    for model, words in (("pretrained", "median of {med:.4f} over the 12 layers, so the standard error is {se8:.4f} "
                                        "under the default and\n{se2:.4f} under `quick`"),
                         ("twin", "twin: {med:.4f}, {se8:.4f} and {se2:.4f})")):
        sd = study["models"][model]["shared"]["sd"]
        med = statistics.median(sd)
        text = words.format(med=med, se8=med / math.sqrt(k_default), se2=med / math.sqrt(k_quick))
        assert text in doc, text
    gap = [a - b for a, b in zip(study["models"]["pretrained"]["shared"]["mean"], study["models"]["twin"]["shared"]["mean"])]
    assert f"({min(gap):.2f} to {max(gap):.2f} over the layers)" in doc
