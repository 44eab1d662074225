"""Leaderboard: collection of synthetic results.json files and deterministic markdown rendering."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pebench.leaderboard import collect_results, pe_sort_key, render_leaderboard, write_leaderboard

DATASETS = ["synth-b", "synth-a"]  # deliberately unsorted
PES = ["rope-axial", "ape"]  # deliberately not in canonical order
SEEDS = [0, 1, 2]


def _acc(dataset: str, pe: str, seed: int) -> float:
    d = DATASETS.index(dataset) if dataset in DATASETS else 0
    e = PES.index(pe) if pe in PES else 2
    return 0.5 + 0.1 * d + 0.05 * e + 0.013 * seed + 0.001 * seed**2


def _result(dataset: str, pe: str, seed: int, **over: object) -> dict:
    acc = _acc(dataset, pe, seed)
    r = {
        "dataset": dataset, "pe": pe, "model": "vit-nano", "seed": seed, "task": "classification",
        "status": "complete", "primary_metric": "val/acc1",
        "metrics": {"val/acc1": acc, "val/loss": 1.0 - acc},
        "geometry": {"layers": [0, 1, 2], "ssdc": [0.5, 0.3, 0.1 + 0.01 * seed],
                     "ssdc_rpi": [0.2, 0.4 + 0.01 * seed, 0.1], "eed_percent": [50.0, 20.0 + seed, 30.0]},
        "robustness": {"clean_acc": acc, "n_samples": 512, "jpeg": {"acc": acc * 0.8, "fs": 0.2 + 0.01 * seed}, "blur": {"acc": acc * 0.5, "fs": 0.5}},
        "extrapolation": [{"resolution": "64", "acc1": acc - 0.1, "n_tokens": 64},
                          {"resolution": "32", "acc1": acc, "n_tokens": 16}],
        "config": {}, "versions": {}, "git_sha": "abc", "wall_time_s": 1.0,
    }
    r.update(over)
    return r


def _write(root: Path, rel: str, obj: object) -> None:
    p = root / rel / "results.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    for d in DATASETS:
        for pe in PES:
            for s in SEEDS:
                _write(root, f"{d}/{pe}/vit-nano/seed{s}", _result(d, pe, s))
    # an RPT variant with a single seed: own row, after its base PE
    _write(root, "synth-a/ape-rpt/vit-nano/seed0", _result("synth-a", "ape", 0, rpt=True))
    _write(root, "synth-a/none/vit-nano/seed0", _result("synth-a", "none", 0))
    # malformed: not JSON; wrong type; missing key
    _write(root, "synth-a/sincos/vit-nano/seed0", "{not json")
    wrong = _result("synth-a", "sincos", 1)
    wrong["seed"] = "1"
    _write(root, "synth-a/sincos/vit-nano/seed1", wrong)
    bad = _result("synth-a", "sincos", 2)
    del bad["metrics"]
    _write(root, "synth-a/sincos/vit-nano/seed2", bad)
    # incomplete (e.g. killed during analyses)
    _write(root, "synth-b/alibi/vit-nano/seed0", _result("synth-b", "alibi", 0, status="running"))
    return root


def _rows(text: str, dataset: str) -> list[list[str]]:
    section = text.split(f"## {dataset}\n", 1)[1].split("\n## ", 1)[0]
    table = [l for l in section.splitlines() if l.startswith("|")]
    return [[c.strip() for c in l.strip("|").split(" | ")] for l in table]


def test_collect_reports_malformed_and_incomplete(results: Path) -> None:
    runs, problems = collect_results(results)
    complete = [r for r in runs if r.complete]
    assert len(complete) == len(DATASETS) * len(PES) * len(SEEDS) + 2
    incomplete = [r for r in runs if not r.complete]
    assert [(r.path, r.status) for r in incomplete] == [("synth-b/alibi/vit-nano/seed0/results.json", "running")]
    assert len(problems) == 3
    assert problems[0].startswith("synth-a/sincos/vit-nano/seed0/results.json: not valid JSON")
    assert "'seed' should be an integer, got string" in problems[1]
    assert "missing required key(s) 'metrics'" in problems[2]
    assert {r.label for r in complete if r.dataset == "synth-a"} == {"none", "ape", "ape+rpt", "rope-axial"}


def test_mean_std_against_numpy(results: Path) -> None:
    runs, problems = collect_results(results)
    text = render_leaderboard(runs, problems)
    for d in DATASETS:
        rows = _rows(text, d)
        header = rows[0]
        i_acc, i_loss = header.index("val/acc1 (%)"), header.index("val/loss")
        for pe in PES:
            row = next(r for r in rows[2:] if r[1] == pe)
            assert row[0] == "vit-nano" and row[2] == "3"
            accs = np.array([_acc(d, pe, s) for s in SEEDS])
            assert row[i_acc] == f"{accs.mean() * 100:.1f} ± {accs.std(ddof=1) * 100:.1f}"
            losses = 1.0 - accs
            assert row[i_loss] == f"{losses.mean():.4f} ± {losses.std(ddof=1):.4f}"
            # extrapolation in natural resolution order, geometry, fragility
            assert header.index("acc1@32 (%)") < header.index("acc1@64 (%)")
            assert row[header.index("acc1@64 (%)")] == f"{(accs - 0.1).mean() * 100:.1f}"
            assert row[header.index("EED% (min layer)")] == f"{np.mean([20.0 + s for s in SEEDS]):.1f}"
            assert row[header.index("SSDC_RPI (peak)")] == f"{np.mean([0.4 + 0.01 * s for s in SEEDS]):.3f}"
            assert row[header.index("SSDC (last layer)")] == f"{np.mean([0.1 + 0.01 * s for s in SEEDS]):.3f}"
            assert row[header.index("FS-jpeg")] == f"{np.mean([0.2 + 0.01 * s for s in SEEDS]):.3f}"
            assert row[header.index("FS-blur")] == "0.500"
    # n = 1: no ± part
    rpt = next(r for r in _rows(text, "synth-a")[2:] if r[1] == "ape+rpt")
    assert rpt[2] == "1" and "±" not in rpt[3] and rpt[3] == f"{_acc('synth-a', 'ape', 0) * 100:.1f}"


def test_canonical_order_and_sections(results: Path) -> None:
    runs, problems = collect_results(results)
    text = render_leaderboard(runs, problems)
    assert text.index("## synth-a") < text.index("## synth-b")
    assert [r[1] for r in _rows(text, "synth-a")[2:]] == ["none", "ape", "ape+rpt", "rope-axial"]
    assert [r[1] for r in _rows(text, "synth-b")[2:]] == ["ape", "rope-axial"]
    # the incomplete run is listed, not tabulated
    incomplete = text.split("## Incomplete runs", 1)[1].split("\n## ", 1)[0]
    assert "synth-b/alibi/vit-nano/seed0/results.json" in incomplete and "running" in incomplete
    assert "alibi" not in text.split("## Incomplete runs", 1)[0]
    problems_md = text.split("## Problems", 1)[1]
    assert problems_md.count("\n- ") == 3 and "sincos" not in text.split("## Incomplete runs", 1)[0]
    assert "bench leaderboard --results" in text
    order = sorted(["zeta", "pape-ri", "alpha", "none", "lookhere", "pape"], key=pe_sort_key)
    assert order == ["none", "lookhere", "pape", "pape-ri", "alpha", "zeta"]


def test_byte_identical_regeneration(results: Path, tmp_path: Path) -> None:
    out1, out2 = tmp_path / "a" / "LEADERBOARD.md", tmp_path / "b" / "LEADERBOARD.md"
    text = write_leaderboard(results, out1)
    # touching file order/mtimes must not matter
    (results / "synth-a/ape/vit-nano/seed0/results.json").touch()
    write_leaderboard(results, out2)
    assert out1.read_bytes() == out2.read_bytes() == text.encode("utf-8")
    assert not list(out1.parent.glob(".*.tmp"))


def test_models_grouped_and_optional_sections(tmp_path: Path) -> None:
    root = tmp_path / "r"
    _write(root, "d/ape/vit-tiny/seed0", _result("d", "ape", 0, model="vit-tiny", geometry="oops"))
    _write(root, "d/ape/vit-nano/seed0", _result("d", "ape", 0, extrapolation=None, robustness=None))
    _write(root, "d/none/vit-nano/seed0", _result("d", "none", 0, metrics={"val/acc1": float("nan")}))
    runs, problems = collect_results(root)
    assert len(runs) == 3 and len(problems) == 1 and "ignored 'geometry'" in problems[0]
    rows = _rows(render_leaderboard(runs, problems), "d")
    assert [(r[0], r[1]) for r in rows[2:]] == [("vit-nano", "none"), ("vit-nano", "ape"), ("vit-tiny", "ape")]
    header = rows[0]
    assert rows[2][header.index("val/acc1 (%)")] == "nan"
    assert rows[3][header.index("FS-jpeg")] == "—"
    assert rows[4][header.index("EED% (min layer)")] == "—"


def test_missing_root_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        collect_results(tmp_path / "nope")
    runs, problems = collect_results(tmp_path)
    assert "No complete runs found." in render_leaderboard(runs, problems)


def test_runs_of_different_configurations_or_commits_are_never_averaged(tmp_path: Path) -> None:
    """4-epoch and 1-epoch runs in one (dataset, PE) cell: two rows, not `56.3 ± 61.7` over n = 3."""
    root = tmp_path / "runs"
    cfg = {"dataset": "mix", "pe": "ape", "model": "vit-nano", "epochs": 4, "lr": 0.002, "out": "a"}
    for seed, acc in ((0, 0.90), (1, 0.92)):
        _write(root, f"a/mix/ape/vit-nano/seed{seed}", _result("mix", "ape", seed, metrics={"val/acc1": acc},
                                                               config={**cfg, "seed": seed}))
    # same seed 0, another configuration (and output root): not a duplicate, its own row
    _write(root, "b/mix/ape/vit-nano/seed0", _result("mix", "ape", 0, metrics={"val/acc1": 0.20},
                                                     config={**cfg, "seed": 0, "epochs": 1, "out": "b"}))
    runs, problems = collect_results(root)
    assert not [p for p in problems if "duplicate" in p]
    rows = {r[1]: r for r in _rows(render_leaderboard(runs, problems), "mix")[2:]}
    assert set(rows) == {"ape (epochs=4)", "ape (epochs=1)"}
    assert rows["ape (epochs=4)"][2] == "2" and rows["ape (epochs=4)"][3] == "91.0 ± 1.4"
    assert rows["ape (epochs=1)"][2] == "1" and rows["ape (epochs=1)"][3] == "20.0"
    # the same configuration made by two commits: one row per commit
    root2 = tmp_path / "runs2"
    for seed, sha in ((0, "1111111aaa"), (1, "2222222bbb"), (2, "2222222bbb")):
        _write(root2, f"mix/ape/vit-nano/seed{seed}", _result("mix", "ape", seed, git_sha=sha,
                                                              config={**cfg, "seed": seed}))
    runs, problems = collect_results(root2)
    rows = {r[1]: r for r in _rows(render_leaderboard(runs, problems), "mix")[2:]}
    assert {k: v[2] for k, v in rows.items()} == {"ape @1111111": "1", "ape @2222222": "2"}


def test_row_label_names_non_default_pe_options(tmp_path: Path) -> None:
    """The label starts with the ``pe_label`` bench run recorded; an older file without one names every
    option it has (which are defaults only the PE classes know, and the leaderboard imports none)."""
    from pebench.encodings import variant_label

    root = tmp_path / "runs"
    opts = {"init": "pebench"}
    _write(root, "x/seed0", _result("mix", "pape", 0, config={"pe": "pape", "pe_options": opts, "rpt": True},
                                    pe_label=variant_label("pape", opts)))
    _write(root, "y/seed0", _result("mix", "ape", 0, config={"pe_options": {"b": 2, "a": 1}}))
    _write(root, "z/seed0", _result("mix", "sincos", 0, config={"pe_options": {}}))
    runs, _ = collect_results(root)
    assert [r.label for r in runs] == [variant_label("pape", opts) + "+rpt", "ape[a=1,b=2]", "sincos"]


def test_files_without_a_fingerprint_take_missing_keys_from_the_defaults_given(tmp_path: Path) -> None:
    """An older file's configuration lacks keys added since; `bench leaderboard` counts them as
    RunConfig's defaults (as integrity does), so its seeds share a row with runs that record them."""
    from pebench.cli import main
    from pebench.runner.config import RunConfig, config_to_dict

    defaults = config_to_dict(RunConfig())
    root = tmp_path / "runs"
    _write(root, "mix/ape/seed0", _result("mix", "ape", 0, config={"epochs": 4}))
    _write(root, "mix/ape/seed1", _result("mix", "ape", 1, config={"epochs": 4, "lr": defaults["lr"]}))
    runs, problems = collect_results(root, config_defaults=defaults)
    assert [r[1:3] for r in _rows(render_leaderboard(runs, problems, config_defaults=defaults), "mix")[2:]] == [
        ["ape", "2"]]
    runs, problems = collect_results(root)  # without defaults: a missing key differs from any value
    assert {r[1] for r in _rows(render_leaderboard(runs, problems), "mix")[2:]} == {
        "ape (lr=null)", f"ape (lr={defaults['lr']})"}
    assert main(["leaderboard", "--results", str(root), "--out", str(tmp_path / "LB.md")]) == 0
    assert [r[1:3] for r in _rows((tmp_path / "LB.md").read_text(encoding="utf-8"), "mix")[2:]] == [["ape", "2"]]
