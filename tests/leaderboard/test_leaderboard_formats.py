"""`bench leaderboard --format csv|json|html`: one record per cell with the numbers the markdown rounds,
deterministic bytes; a folder without a complete run is an error; a missing reference is said, not hidden."""
from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from pebench.cli import main
from pebench.leaderboard import collect_results, render_leaderboard
from pebench.leaderboard.formats import FORMATS, render_format
from pebench.leaderboard.stats import paired_summary, t_mean_ci

SEEDS = (0, 1, 2)


def _acc(pe: str, seed: int) -> float:
    return {"none": 0.5, "ape": 0.6, "sincos": 0.7}[pe] + 0.013 * seed + 0.001 * seed ** 2


def _result(dataset: str, pe: str, seed: int) -> dict:
    acc = _acc(pe, seed)
    return {
        "dataset": dataset, "pe": pe, "model": "vit-nano", "seed": seed, "task": "classification",
        "status": "complete", "primary_metric": "val/acc1", "metrics": {"val/acc1": acc, "val/loss": 1.0 - acc},
        "geometry": {"layers": [0, 1], "ssdc": [0.5, 0.1 + 0.01 * seed], "ssdc_rpi": [0.2, 0.3],
                     "eed_percent": [40.0, 20.0 + seed]},
        "robustness": {"jpeg": {"acc": acc * 0.8, "fs": 0.2}, "blur": {"acc": None, "fs": None}},
        "extrapolation": [{"resolution": "32", "acc1": acc, "n_tokens": 16},
                          {"resolution": "48", "acc1": acc - 0.1, "n_tokens": 36}],
        "config": {"out": "."}, "git_sha": "abc", "fingerprint": f"fp-{pe}",
    }


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    for dataset, pes in (("a", ("none", "ape")), ("b", ("ape", "sincos"))):  # b has no `none` row
        for pe in pes:
            for s in SEEDS:
                run = root / dataset / pe / "vit-nano" / f"seed{s}"
                run.mkdir(parents=True)
                (run / "results.json").write_text(json.dumps(_result(dataset, pe, s)), encoding="utf-8")
                (run / "config.yaml").write_text("out: .\n", encoding="utf-8")
    return root


def _render(results: Path, fmt: str, out: Path) -> str:
    runs, problems = collect_results(results)
    return render_format(fmt, runs, problems, results, out, results_label="runs")


def test_json_cells_hold_the_raw_numbers(results: Path, tmp_path: Path) -> None:
    doc = json.loads(_render(results, "json", tmp_path / "LB.json"))
    assert doc["generated_by"] == "bench leaderboard --results runs --format json" and doc["complete_runs"] == 12
    cells = {(c["dataset"], c["variant"]): c for c in doc["cells"]}
    assert list(cells) == [("a", "none"), ("a", "ape"), ("b", "ape"), ("b", "sincos")]
    ape = cells[("a", "ape")]
    accs = np.array([_acc("ape", s) for s in SEEDS])
    assert ape["n"] == 3 and ape["seeds"] == [0, 1, 2] and ape["values"] == accs.tolist()
    assert ape["mean"] == pytest.approx(accs.mean(), abs=1e-15) and ape["std"] == pytest.approx(accs.std(ddof=1))
    assert ape["ci95"] == list(t_mean_ci(accs.tolist()))
    diffs = (accs - np.array([_acc("none", s) for s in SEEDS])).tolist()
    mean, lo, hi, _, _, _ = paired_summary(diffs)
    assert ape["delta"]["mean"] == pytest.approx(mean) and [ape["delta"]["lo"], ape["delta"]["hi"]] == [lo, hi]
    assert cells[("a", "none")]["is_reference"] and cells[("a", "none")]["delta_note"] == "reference"
    assert cells[("b", "ape")]["delta"] is None and cells[("b", "ape")]["delta_note"] == "no none row"
    assert ape["extrapolation"] == {"32": pytest.approx(accs.mean()), "48": pytest.approx(accs.mean() - 0.1)}
    assert ape["eed_min_percent"] == pytest.approx(21.0) and ape["ssdc_last_layer"] == pytest.approx(0.11)
    assert ape["fs"] == {"jpeg": pytest.approx(0.2), "blur": None} and ape["fs_undefined"] == ["blur"]
    assert ape["layers"]["eed_percent"] == {"layers": [0, 1], "mean": [40.0, 21.0], "n": 3}
    eed = ape["columns"]["eed_min_percent"]
    assert eed["values"] == [20.0, 21.0, 22.0] and eed["n"] == 3 and eed["mean"] == ape["eed_min_percent"]
    assert eed["ci95"] == list(t_mean_ci([20.0, 21.0, 22.0]))
    assert ape["columns"]["fs_blur"] == {"values": [None, None, None], "n": 0, "mean": None, "ci95": None}
    assert ape["runs"] == [f"a/ape/vit-nano/seed{s}/results.json" for s in SEEDS]


def test_csv_has_one_row_per_cell_with_the_json_numbers(results: Path, tmp_path: Path) -> None:
    rows = list(csv.DictReader(io.StringIO(_render(results, "csv", tmp_path / "LB.csv"))))
    doc = json.loads(_render(results, "json", tmp_path / "LB.json"))
    assert len(rows) == len(doc["cells"]) == 4
    for row, cell in zip(rows, doc["cells"]):
        assert (row["dataset"], row["variant"], int(row["n"])) == (cell["dataset"], cell["variant"], cell["n"])
        assert float(row["mean"]) == cell["mean"] and [float(row["ci95_lo"]), float(row["ci95_hi"])] == cell["ci95"]
        assert [float(v) for v in row["values"].split(";")] == cell["values"]
        assert float(row["acc1@48"]) == cell["extrapolation"]["48"] and row["fs_blur"] == ""
        assert (float(row["delta_mean"]) if row["delta_mean"] else None) == (cell["delta"] or {}).get("mean")
    assert rows[2]["delta_note"] == "no none row"


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_is_deterministic(results: Path, tmp_path: Path, fmt: str) -> None:
    first = _render(results, fmt, tmp_path / f"LB.{fmt}")
    (results / "a/ape/vit-nano/seed0/results.json").touch()
    assert _render(results, fmt, tmp_path / f"LB.{fmt}") == first


def test_the_markdown_keeps_delta_columns_without_the_reference(results: Path) -> None:
    runs, problems = collect_results(results)
    text = render_leaderboard(runs, problems)
    table_b = text.split("## b\n", 1)[1]
    header = table_b.split("\n| Model", 1)[1].split("\n", 1)[0]
    assert "Δval/acc1 vs none" in header
    assert table_b.count("| no none row |") == 2


def test_html_page_is_self_contained_and_links_the_runs(results: Path, tmp_path: Path) -> None:
    page = _render(results, "html", tmp_path / "site" / "LB.html")
    assert page.startswith("<!DOCTYPE html>") and "<script>" in page and page.count("<svg") == 6  # 3 per dataset
    for ref in ("http://", "https://", "<link", "src="):
        assert ref not in page.replace('xmlns="http://www.w3.org/2000/svg"', ""), ref
    assert 'href="../runs/a/ape/vit-nano/seed0/results.json"' in page
    assert 'href="../runs/a/ape/vit-nano/seed0/config.yaml"' in page
    assert '<span class="badge">reference</span>' in page and "no none row" in page


@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_writes_each_format(results: Path, tmp_path: Path, fmt: str, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["leaderboard", "--results", str(results), "--format", fmt]) == 0
    assert (tmp_path / f"LEADERBOARD.{fmt}").is_file()
    assert (tmp_path / "LEADERBOARD_curves.png").exists() is False  # no metrics.csv: no curves


def test_a_folder_without_a_complete_run_is_an_error(tmp_path: Path, capsys) -> None:
    run = tmp_path / "runs" / "a" / "ape" / "vit-nano" / "seed0"
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps({**_result("a", "ape", 0), "status": "running"}), encoding="utf-8")
    out = tmp_path / "LB.md"
    assert main(["leaderboard", "--results", str(tmp_path / "runs"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no complete run" in err[0] and "1 incomplete" in err[0]
    assert not out.exists()


def test_non_finite_values_are_null_in_json_and_empty_in_csv(results: Path, tmp_path: Path) -> None:
    path = results / "a/ape/vit-nano/seed0/results.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["metrics"]["val/acc1"] = float("nan")
    path.write_text(json.dumps(data), encoding="utf-8")
    cell = json.loads(_render(results, "json", tmp_path / "LB.json"))["cells"][1]
    assert cell["values"][0] is None and cell["mean"] is None
    row = list(csv.DictReader(io.StringIO(_render(results, "csv", tmp_path / "LB.csv"))))[1]
    assert row["values"].startswith(";") and row["mean"] == ""
    assert not math.isnan(cell["values"][1])


def test_csv_text_fields_cannot_start_a_spreadsheet_formula(results: Path, tmp_path: Path) -> None:
    """A dataset, tag or fingerprint read from a results.json that would start a formula (=, +, -, @, tab, CR) is
    written with a leading apostrophe, so a spreadsheet shows it as text; numbers, negative ones included, stay
    numbers."""
    for s in SEEDS:  # one cell whose fingerprint and git_sha are formulas
        p = results / "a" / "ape" / "vit-nano" / f"seed{s}" / "results.json"
        r = json.loads(p.read_text(encoding="utf-8"))
        r["fingerprint"] = '=HYPERLINK("http://x","y")'
        r["git_sha"] = "@SUM(A1)"
        p.write_text(json.dumps(r), encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(_render(results, "csv", tmp_path / "LB.csv"))))
    ape = next(r for r in rows if r["dataset"] == "a" and r["variant"] == "ape")
    assert ape["fingerprint"] == "'=HYPERLINK(\"http://x\",\"y\")" and ape["git_sha"] == "'@SUM(A1)"
    none = next(r for r in rows if r["dataset"] == "a" and r["variant"] == "none")
    assert not none["fingerprint"].startswith("'") and float(ape["delta_mean"]) == pytest.approx(0.1, abs=1e-9)
    assert all(not v.startswith(("=", "+", "@")) for r in rows for v in r.values() if v)
