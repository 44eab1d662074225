"""The study engine's per-checkpoint metric forms (`checkpoint:`, `dip:`, `delta:`), claims whose sides read two
datasets, claims that test learning itself, and a study file's `notes` (what the DINO study file needs).

Every number is checked against numpy or scipy on synthetic result folders in `bench run`'s layout."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from pebench.core.errors import ConfigError
from pebench.studies.cells import Run, collect
from pebench.studies.claims import evaluate
from pebench.studies.report import render_report
from pebench.studies.spec import parse_study

#: EED % per layer at initialisation and after training, per (dataset, seed)
EED = {
    ("objects", 0): ([7.0, 6.9, 6.8, 7.0], [7.2, 6.1, 6.4, 7.3]),
    ("objects", 1): ([7.1, 7.0, 6.9, 7.1], [7.0, 6.6, 6.0, 7.1]),
    ("objects", 2): ([6.9, 6.8, 6.9, 7.0], [7.3, 6.7, 6.5, 7.0]),
    ("textures", 0): ([7.0, 7.1, 7.2, 7.3], [7.0, 7.4, 7.5, 7.6]),
    ("textures", 1): ([7.0, 7.0, 7.1, 7.3], [7.1, 7.3, 7.4, 7.5]),
    ("textures", 2): ([6.9, 7.1, 7.1, 7.2], [6.9, 6.8, 7.4, 7.6]),
}
#: k-NN top-1 at initialisation and after training per (dataset, seed): objects never gains, textures always does
KNN = {("objects", 0): (0.12, 0.11), ("objects", 1): (0.10, 0.12), ("objects", 2): (0.11, 0.11),
       ("textures", 0): (0.50, 0.56), ("textures", 1): (0.48, 0.53), ("textures", 2): (0.52, 0.55)}


def _dip(v: list[float]) -> float:
    return min(v[0], v[-1]) - min(v[1:-1])


def _runs(root: Path) -> None:
    for (ds, seed), (init, last) in EED.items():
        d = root / ds / "pape" / "vit-nano" / f"seed{seed}"
        d.mkdir(parents=True)
        k0, k1 = KNN[(ds, seed)]
        (d / "results.json").write_text(json.dumps({
            "status": "complete", "metrics": {"test/knn_top1_init": k0, "test/knn_top1": k1},
            "eed_checkpoints": [{"epoch": 0, "eed_percent": init, "ssdc": 0.2},
                                {"epoch": 1, "eed_percent": last, "ssdc": 0.3}]}))


def _study(root: Path, claims: str, extra: str = "",
           grid: str = "datasets: [objects, textures], pes: [pape], seeds: [0, 1, 2]") -> object:
    return parse_study(f"""
study: dip
version: 1
title: t
question: q
results: {root.as_posix()}
report: R.md
grid: {{{grid}}}
recipe: [--model, vit-nano]
table: {{metrics: ["dip:checkpoint:last:eed_percent"], layers: ["checkpoint:first:eed_percent"]}}
learned: {{metric: "delta:test/knn_top1:test/knn_top1_init", above: 0.001, share: 1.0}}
claims:
{claims}
{extra}""", "dip.yaml")


def test_checkpoint_dip_and_delta_forms_read_the_run():
    run = Run(arm="a", dataset="d", pe="p", seed=0, path="x", status="complete",
              metrics={"test/knn_top1": 0.5, "test/knn_top1_init": 0.4}, extrapolation={}, commit=None, cpu=None,
              wall_time_s=None, geometry={"eed_percent": (3.0, 1.0, 2.0)},
              checkpoints=({"eed_percent": [1.0, 2.0, 3.0], "ssdc": 0.25}, {"eed_percent": [5.0, 4.5, 4.0, 6.0]}))
    assert run.value("delta:test/knn_top1:test/knn_top1_init") == pytest.approx(0.1)
    assert run.value("delta:test/knn_top1:test/missing") is None
    assert run.value("checkpoint:first:ssdc") == 0.25 and run.value("checkpoint:last:ssdc") is None
    assert run.value("checkpoint:last:eed_percent:last") == 6.0 and run.value("checkpoint:0:eed_percent:1") == 2.0
    assert run.value("checkpoint:7:eed_percent:0") is None and run.value("checkpoint:last:eed_percent") is None
    assert run.value("dip:checkpoint:last:eed_percent") == pytest.approx(_dip([5.0, 4.5, 4.0, 6.0]))  # +1.0
    assert run.value("dip:checkpoint:first:eed_percent") == pytest.approx(-1.0)  # monotone: negative
    assert run.value("dip:geometry:eed_percent") == pytest.approx(1.0) and run.value("dip:eed_percent") == 1.0
    short = Run(arm="a", dataset="d", pe="p", seed=0, path="x", status="complete", metrics={}, extrapolation={},
                commit=None, cpu=None, wall_time_s=None, checkpoints=({"eed_percent": [1.0, 2.0]},))
    assert short.value("dip:checkpoint:last:eed_percent") is None  # a dip needs a layer between


def test_a_claim_across_two_datasets_pairs_seeds_and_matches_scipy(tmp_path):
    _runs(tmp_path)
    study = _study(tmp_path, """
  - {id: flatter, sentence: flatter, test: paired, metric: "dip:checkpoint:last:eed_percent",
     a: {pe: pape, dataset: objects}, b: {pe: pape, dataset: textures}, direction: greater, tests_learning: true}
  - {id: dip, sentence: dip, test: mean, metric: "dip:checkpoint:last:eed_percent", dataset: objects,
     a: {pe: pape}, direction: greater, "null": 0, tests_learning: true}""")
    cells, problems = collect(study, tmp_path)
    assert problems == []
    verdicts = {v.claim.id: v for v in evaluate(study, cells)}
    objects = [_dip(EED[("objects", s)][1]) for s in range(3)]
    textures = [_dip(EED[("textures", s)][1]) for s in range(3)]
    ref = stats.ttest_rel(objects, textures)
    assert verdicts["flatter"].result.p == pytest.approx(ref.pvalue, rel=1e-10)
    assert verdicts["flatter"].result.estimate == pytest.approx(np.mean(np.subtract(objects, textures)))
    assert verdicts["flatter"].seeds == (0, 1, 2)
    assert verdicts["dip"].result.p == pytest.approx(stats.ttest_1samp(objects, 0.0).pvalue, rel=1e-10)
    text = render_report(study, cells, list(verdicts.values()), [], "runs")
    assert "dip:checkpoint:last:eed_percent on `objects` − on `textures`" in text
    first = np.mean([EED[("textures", s)][0] for s in range(3)], axis=0)
    assert "| pape | " + " / ".join(f"{v:.2f}" for v in first) + " |" in text  # the per-layer table at init


def test_the_learned_rule_gates_claims_but_not_the_claims_that_test_learning(tmp_path):
    _runs(tmp_path)
    study = _study(tmp_path, """
  - {id: learned-objects, sentence: l, test: paired, metric: test/knn_top1, b_metric: test/knn_top1_init,
     dataset: objects, a: {pe: pape}, b: {pe: pape}, direction: greater, family: learned, tests_learning: true}
  - {id: flatter, sentence: flatter, test: paired, metric: "dip:checkpoint:last:eed_percent",
     a: {pe: pape, dataset: objects}, b: {pe: pape, dataset: textures}, direction: greater}""")
    cells, _ = collect(study, tmp_path)
    verdicts = {v.claim.id: v for v in evaluate(study, cells)}
    gains = [KNN[("objects", s)][1] - KNN[("objects", s)][0] for s in range(3)]
    assert verdicts["learned-objects"].result.p == pytest.approx(
        stats.ttest_rel([KNN[("objects", s)][1] for s in range(3)],
                        [KNN[("objects", s)][0] for s in range(3)]).pvalue, rel=1e-10)
    assert sum(g >= 0.001 for g in gains) == 1  # objects learned in 1 of 3 seeds: the EED claim is not testable
    flatter = verdicts["flatter"]
    assert flatter.word == "not testable" and flatter.p_holm is None
    assert any("pape on `objects` learned in 1 of 3 seeds" in n for n in flatter.notes)
    assert not any("textures" in n for n in flatter.notes)  # textures learned in 3 of 3


@pytest.mark.parametrize("edit, expect", [
    ("notes: [{title: T}]", "notes should be a list of {title: TEXT, text: MARKDOWN}"),
    ("notes: oops", "notes should be a list"),
])
def test_bad_notes_are_a_config_error(tmp_path, edit, expect):
    with pytest.raises(ConfigError, match=expect.replace("{", r"\{").replace("}", r"\}")):
        _study(tmp_path, "  - {id: x, sentence: s, test: not-informative, reason: r}", edit)


def test_a_side_on_a_dataset_outside_the_grid_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="names dataset 'shapes', not in grid.datasets"):
        _study(tmp_path, """
  - {id: x, sentence: s, test: paired, metric: m, a: {pe: pape, dataset: objects}, b: {pe: pape, dataset: shapes},
     direction: greater}""")
    with pytest.raises(ConfigError, match="needs 'dataset'"):  # one side without a dataset, and no claim dataset
        _study(tmp_path, """
  - {id: x, sentence: s, test: paired, metric: m, a: {pe: pape, dataset: objects}, b: {pe: pape},
     direction: greater}""")


def test_notes_are_printed_after_the_verdicts(tmp_path):
    _runs(tmp_path)
    study = _study(tmp_path, "  - {id: x, sentence: s, test: not-informative, reason: r}",
                   "notes:\n  - title: Recipe search\n    text: |\n      | run | k-NN |\n      |---|---|\n"
                   "      | A | 11.7 |\n")
    cells, _ = collect(study, tmp_path)
    text = render_report(study, cells, evaluate(study, cells), [], "runs")
    assert text.index("## Notes") > text.index("## Verdicts")
    assert "### Recipe search\n\n| run | k-NN |\n|---|---|\n| A | 11.7 |\n" in text


def test_a_template_whose_sides_read_two_datasets_skips_the_pes_that_run_on_one(tmp_path):
    study = _study(tmp_path, """
  - {id: "flatter-{pe}", each: all, sentence: s, test: paired, metric: m, direction: greater,
     a: {pe: "{pe}", dataset: objects}, b: {pe: "{pe}", dataset: textures}}""",
                   "groups: {all: {pes: [pape, none]}}",
                   grid="datasets: [objects, textures], pes: [pape, {pe: none, datasets: [objects]}], seeds: [0, 1]")
    assert [c.id for c in study.claims] == ["flatter-pape"]  # none does not run on textures


def test_layer_ranges_and_grouped_dips_match_numpy():
    rng = np.random.default_rng(3)
    eed = rng.uniform(5.0, 40.0, 12)
    run = Run(arm="a", dataset="d", pe="p", seed=0, path="x", status="complete", metrics={}, extrapolation={},
              commit=None, cpu=None, wall_time_s=None, geometry={"eed_percent": tuple(eed.tolist())})
    assert run.value("geometry:eed_percent:0-3") == pytest.approx(eed[0:4].mean(), rel=1e-15)
    assert run.value("geometry:eed_percent:4-4") == pytest.approx(eed[4]) == run.value("geometry:eed_percent:4")
    for bad in ("3-1", "0-12", "a-b", "-1"):
        assert run.value(f"geometry:eed_percent:{bad}") is None
    # the EED paper's groups (0-1 / 2-4 / 9-11) and thirds
    for groups, (e, m, late) in (("0-1/2-4/9-11", (eed[0:2], eed[2:5], eed[9:12])),
                                 ("0-3/4-7/8-11", (eed[0:4], eed[4:8], eed[8:12]))):
        assert run.value(f"dip:geometry:eed_percent@{groups}") == pytest.approx(
            min(e.mean(), late.mean()) - m.mean(), rel=1e-12)
    assert run.value("dip:geometry:eed_percent@0-1/2-4") is None  # three groups, or no dip
    assert run.value("dip:geometry:eed_percent@0-1/2-4/9-12") is None


def test_check_names_the_runs_made_with_another_configuration(tmp_path, monkeypatch, capsys):
    """`bench study check` also checks that every run recorded the configuration fingerprint the study file gives it:
    two committed DINO runs against the DINO study file (match), then against the same file with another learning
    rate (they no longer match: exit 1, naming them)."""
    import shutil

    from pebench.cli import main

    repo = Path(__file__).resolve().parents[2]
    for seed in (0, 1):
        src = repo / "results" / "dino" / "objects" / "none" / "vit-nano" / f"seed{seed}"
        dst = tmp_path / "runs" / "objects" / "none" / "vit-nano" / f"seed{seed}"
        dst.mkdir(parents=True)
        for name in ("results.json", "metrics.csv"):
            shutil.copy(src / name, dst / name)
    text = (repo / "bench" / "studies" / "files" / "dino.yaml").read_text(encoding="utf-8")
    text = (text.replace("results: results/dino", "results: runs")
            .replace("datasets: [objects, textures]", "datasets: [objects]")
            .replace("pes: [none, ape, sincos, rope-axial, pape]\n  seeds: [0, 1, 2]", "pes: [none]\n  seeds: [0, 1]")
            .replace("all: {pes: [none, ape, sincos, rope-axial, pape]}", "all: {pes: [none]}"))
    text = text[:text.index("  - id: learned-textures-{pe}")] + text[text.index("  - id: dip-objects-{pe}"):]
    text = text[:text.index("  - id: flatter-{pe}")] + text[text.index("reruns:"):]
    monkeypatch.chdir(tmp_path)
    for name, study in (("same.yaml", text), ("other.yaml", text.replace('--lr, "0.004"', '--lr, "0.002"'))):
        (tmp_path / name).write_text(study, encoding="utf-8")
        assert main(["study", "report", name, "--out", "runs/REPORT.md"]) == 0
        rc = main(["study", "check", name])
        out = capsys.readouterr()
        if name == "same.yaml":
            assert rc == 0 and "2 of 2 runs were made with the configuration this study file gives them" in out.out
        else:
            assert rc == 1 and "0 of 2 runs" in out.out
            assert "objects/none/vit-nano/seed0/results.json" in out.err
