"""`bench list analyses` prints the analysis registry: every registered analysis with its results.json key and
whether `--analyses all` runs it, and with `--options` every option from the analyses' own declarations."""
from __future__ import annotations

from pebench.analysis.registry import describe_analyses, list_analyses
from pebench.cli import main


def _rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("|")]


def test_list_analyses_prints_the_registry(capsys):
    assert main(["list", "analyses"]) == 0
    rows = _rows(capsys.readouterr().out)
    body = [r for r in rows if r[0] != "name"]
    assert [r[0] for r in body] == list_analyses()
    by_name = {r[0]: r for r in body}
    assert by_name["alpha"][1] == "alpha_sweep" and by_name["geometry"][2] == "yes"
    assert by_name["coord-robustness"][1] == "coord_robustness" and by_name["attention"][2] == "when named"


def test_list_analyses_options_lists_every_declared_option(capsys):
    assert main(["list", "analyses", "--options"]) == 0
    out = capsys.readouterr().out
    rows = [r for r in _rows(out.split("analysis options", 1)[1]) if r[0] != "analysis"]
    expected = [(a["name"], o["key"]) for a in describe_analyses() for o in a["options"]]
    assert [(r[0], r[1]) for r in rows] == expected
    assert ["geometry", "rpi_permutations", "int", "8"] == next(r[:4] for r in rows if r[1] == "rpi_permutations")
