"""The study engine (pebench.studies, `bench study`): study files, cells, verdicts, reports.

Synthetic result folders (results.json + metrics.csv as `bench run` writes them) check every number the engine
prints against scipy; the committed studies converted to study files regenerate byte for byte through
`bench study check`.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from pebench.cli import main
from pebench.core.errors import ConfigError
from pebench.leaderboard.stats import holm_adjust
from pebench.studies.cells import collect, plateau_gain
from pebench.studies.claims import evaluate
from pebench.studies.spec import list_studies, load_study, parse_study

REPO = Path(__file__).resolve().parents[2]

STUDY = """
study: toy
version: 1
title: Toy study
question: Does pe-a beat none?
results: {results}
report: REPORT.md
grid: {{datasets: [shapes], pes: [none, ape, sincos], seeds: [0, 1, 2, 3]}}
recipe: [--model, vit-nano, --epochs, "2"]
table: {{metrics: [val/acc1, test/acc1], percent: true}}
plateau: {{metric: val/acc1, band: 0.01}}
claims:
  - {{id: ape, sentence: ape beats none, test: paired, metric: test/acc1, dataset: shapes,
      a: {{pe: ape}}, b: {{pe: none}}, direction: greater}}
  - {{id: sincos, sentence: sincos beats none, test: paired, metric: test/acc1, dataset: shapes,
      a: {{pe: sincos}}, b: {{pe: none}}, direction: greater}}
  - {{id: same, sentence: sincos equals ape, test: equivalence, metric: test/acc1, dataset: shapes,
      a: {{pe: sincos}}, b: {{pe: ape}}, margin: 0.05, family: equivalence}}
  - {{id: bound, sentence: none at most chance on rotation, test: not-informative,
      reason: "its symmetry guarantees it"}}
scope: [Toy scope sentence.]
"""

#: test accuracy per (pe, seed); sincos - none is +0.10 in every seed (zero variance: no test)
TEST_ACC = {"none": [0.50, 0.52, 0.47, 0.55], "ape": [0.60, 0.58, 0.62, 0.63], "sincos": [0.60, 0.62, 0.57, 0.65]}


def _write_run(root: Path, pe: str, seed: int, test: float, curve: list[tuple[int, float]], status="complete",
               cpu="Test CPU", sha="a" * 40) -> None:
    d = root / "shapes" / pe / "vit-nano" / f"seed{seed}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "results.json").write_text(json.dumps({
        "status": status, "dataset": "shapes", "pe": pe, "seed": seed, "git_sha": sha, "wall_time_s": 60.0,
        "numerics": {"cpu_model": cpu}, "metrics": {"test/acc1": test, "val/acc1": curve[-1][1]}}))
    rows = ["epoch,step,train/loss_step,val/acc1"]
    for step, v in curve:
        rows.append(f"0,{step - 1},0.5,")
        rows.append(f"0,{step - 1},,{v}")
    (d / "metrics.csv").write_text("\n".join(rows) + "\n")


def _small_study(name: str, results: Path, grid: str, body: str) -> "object":
    """A study file with the header every small test study shares, then ``body`` (claims, table, references)."""
    return parse_study(f"study: {name}\nversion: 1\ntitle: t\nquestion: q\nresults: {results.as_posix()}\n"
                       f"report: R.md\ngrid: {{{grid}}}\nrecipe: [--model, vit-nano]\n" + body, f"{name}.yaml")


@pytest.fixture()
def toy(tmp_path):
    results = tmp_path / "runs"
    for pe, accs in TEST_ACC.items():
        for seed, acc in enumerate(accs):
            rising = pe == "none" and seed == 0  # one run still rising over its last fifth
            curve = [(100, 0.3), (200, 0.4), (400, 0.45 if rising else 0.5), (500, 0.5 if rising else 0.505)]
            _write_run(results, pe, seed, acc, curve)
    path = tmp_path / "toy.yaml"
    path.write_text(STUDY.format(results=results.as_posix()))
    return load_study(str(path)), results, path


def test_verdicts_match_scipy_and_holm(toy):
    study, results, _ = toy
    cells, problems = collect(study, results)
    assert problems == []
    verdicts = {v.claim.id: v for v in evaluate(study, cells)}
    ape = verdicts["ape"]
    ref = stats.ttest_rel(TEST_ACC["ape"], TEST_ACC["none"])
    assert ape.result.p == pytest.approx(ref.pvalue, rel=1e-12)
    assert ape.result.estimate == pytest.approx(np.mean(np.subtract(TEST_ACC["ape"], TEST_ACC["none"])))
    # sincos - none is +0.10 in every seed: zero variance is no test, never p = 0, and it leaves the family
    sincos = verdicts["sincos"]
    assert sincos.word == "no test" and sincos.result.p is None and sincos.p_holm is None
    assert "zero variance" in " ".join(sincos.notes)
    # the family of the tested claim is itself alone: Holm of one p is that p
    assert ape.p_holm == pytest.approx(holm_adjust([ref.pvalue])[0])
    assert ape.word == ("held" if ref.pvalue < 0.05 else "inconclusive")
    assert verdicts["bound"].word == "not informative"
    assert verdicts["same"].word in ("equivalent", "not shown equivalent")
    # the cell with a rising seed did not plateau, and the claims reading it say so
    assert any("not plateaued: none" in n for n in ape.notes)


def test_plateau_gain_reads_the_last_fifth():
    assert plateau_gain([(100, 0.3), (400, 0.5), (500, 0.51)]) == pytest.approx(0.01)
    assert plateau_gain([(500, 0.5)]) is None
    assert plateau_gain([(450, 0.4), (500, 0.5)]) is None  # no validation at or before 80 % of the steps


def test_report_is_deterministic_and_names_provenance(toy, tmp_path, capsys):
    study, results, path = toy
    out = tmp_path / "R.md"
    assert main(["study", "report", str(path), "--out", str(out)]) == 0
    text = out.read_text()
    assert main(["study", "report", str(path), "--out", str(tmp_path / "R2.md")]) == 0
    assert (tmp_path / "R2.md").read_text() == text
    assert "Test CPU" in text and "`aaaaaaa`" in text
    assert "**2 of 3 cells plateaued**" in text
    sincos_line = next(ln for ln in text.splitlines() if ln.startswith("- sincos beats none"))
    assert "**no test**" in sincos_line and "p =" not in sincos_line and "zero variance" in sincos_line
    assert "## Scope" in text and "Toy scope sentence." in text
    assert str(tmp_path) not in text.replace(results.as_posix(), "")  # only the results folder named
    # check: the written report regenerates; a changed run makes it differ (exit 1, the line named)
    (results / "REPORT.md").write_text(text)
    capsys.readouterr()
    assert main(["study", "check", str(path)]) == 1  # the report regenerates, but the synthetic runs hold no config
    out = capsys.readouterr()
    assert "regenerates byte for byte" in out.out and "0 of 12 runs were made with the configuration" in out.out
    _write_run(results, "ape", 0, 0.99, [(100, 0.3), (500, 0.5)])
    capsys.readouterr()
    assert main(["study", "check", str(path)]) == 1
    assert "differs from its regeneration" in capsys.readouterr().err


def test_hostile_run_strings_are_inert_in_the_report(toy, tmp_path):
    study, results, path = toy
    _write_run(results, "ape", 0, 0.6, [(100, 0.3), (500, 0.5)], cpu="<script>x</script>|`", sha="b" * 40)
    (results / "shapes" / "none" / "vit-nano" / "seed1" / "results.json").write_text("[" * 100_000)
    out = tmp_path / "R.md"
    assert main(["study", "report", str(path), "--out", str(out)]) == 0
    text = out.read_text()
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "## Problems" in text and "nested deeper" in text


@pytest.mark.parametrize("edit, expect", [
    (("version: 1", "version: 2"), "version 2"),
    (("title: Toy study", "title: Toy study\nbogus: 1"), "unknown key 'bogus'"),
    (("test: paired, metric: test/acc1, dataset: shapes,\n      a: {pe: ape}",
      "test: ttest, metric: test/acc1, dataset: shapes,\n      a: {pe: ape}"), "unknown test 'ttest'"),
    (("a: {pe: ape}", "a: {pe: rope}"), "names PE 'rope', not in grid.pes"),
    (("margin: 0.05", "margin: -1"), "margin should be > 0"),
])
def test_bad_study_files_are_one_line(toy, edit, expect):
    _, _, path = toy
    text = path.read_text().replace(*edit, 1)
    with pytest.raises(ConfigError, match=expect.replace("(", r"\(").replace(")", r"\)")):
        parse_study(text, "toy.yaml")


def test_unknown_study_is_one_line_and_exit_2(capsys):
    assert main(["study", "report", "no-such-study"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown study 'no-such-study'; available:" in err[0]


def test_run_is_one_sweep_per_arm(monkeypatch):
    from pebench.cli.commands import study as study_command

    calls = []
    monkeypatch.setattr(study_command, "run_sweep", lambda argv: calls.append(list(argv)) or 0)
    assert main(["study", "run", "event-tokens", "--results", "out", "--pe", "rope-axial", "--seeds", "5"]) == 0
    assert [c[c.index("--out") + 1] for c in calls] == ["out/frames", "out/spiking"]
    assert all(c[0] == "sweep" and c[c.index("--pes") + 1] == "rope-axial" and c[c.index("--seeds") + 1] == "5"
               for c in calls)
    assert calls[1][-2:] == ["--data-option", "tokens=spiking"]


@pytest.mark.parametrize("name", ["detection", "event-tokens", "shapes", "probes", "anchoring", "fashion-mnist-600-steps",
                                  "fashion-mnist", "dino"])
def test_committed_study_reports_regenerate(name, monkeypatch, capsys):
    """The committed reports of the studies converted to study files are what the engine writes."""
    monkeypatch.chdir(REPO)
    assert name in list_studies()
    assert main(["study", "check", name]) == 0, capsys.readouterr().err


def test_study_list_names_every_shipped_study_and_its_cost(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    assert main(["study", "list"]) == 0
    out = capsys.readouterr().out
    for name in list_studies():
        assert f"{name}: " in out
    assert "min of runs measured" in out
    assert out.count("    asks: ") == len(list_studies())


def test_the_guide_study_file_is_valid_and_runs_through_the_engine(tmp_path):
    """docs/studies.md's example study, read from the page, reports on runs shaped like `bench run`'s."""
    page = (REPO / "docs" / "studies.md").read_text(encoding="utf-8")
    block = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    study = parse_study(block.replace("results: runs/my-study", f"results: {(tmp_path / 'runs').as_posix()}"),
                        "guide")
    assert study.name == "my-study" and study.runs_planned == 30
    rng = np.random.default_rng(0)
    for pe in study.pes:
        for seed in study.seeds:
            _write_run(tmp_path / "runs", pe, seed, float(rng.uniform(0.4, 0.6)), [(100, 0.4), (500, 0.5)])
    cells, problems = collect(study, tmp_path / "runs")
    assert problems == [] and all(len(c.runs) == 10 for c in cells.values())
    words = [v.word for v in evaluate(study, cells)]
    assert words[0] in ("held", "contradicted", "inconclusive") and words[1] in ("equivalent", "not shown equivalent")
    for line in page.splitlines():  # every command the page shows exists
        if line.startswith("bench study "):
            assert line.split()[2] in ("list", "run", "report", "check")


def test_a_cell_that_did_not_learn_makes_its_claims_not_testable(toy):
    study, results, path = toy
    text = path.read_text().replace("plateau: {metric: val/acc1, band: 0.01}",
                                    "plateau: {metric: val/acc1, band: 0.01}\n"
                                    "learned: {metric: test/acc1, above: 0.55, share: 0.8}")
    study = parse_study(text, "toy.yaml")
    cells, _ = collect(study, results)
    verdicts = {v.claim.id: v for v in evaluate(study, cells)}
    for cid in ("ape", "sincos"):  # both read none: 1 of 4 seeds reached 55 %
        assert verdicts[cid].word == "not testable" and verdicts[cid].p_holm is None
        assert any("none did not learn" in n for n in verdicts[cid].notes)
    assert verdicts["same"].word in ("equivalent", "not shown equivalent")  # ape and sincos learned


def test_metric_forms_read_extrapolation_drops_and_geometry(tmp_path):
    from pebench.studies.cells import Run

    run = Run(arm="a", dataset="d", pe="p", seed=0, path="x", status="complete", metrics={"test/acc1": 0.8},
              extrapolation={"24": {"acc1": 0.8}, "48": {"acc1": 0.5}}, commit=None, cpu=None, wall_time_s=None,
              geometry={"ssdc_rpi": (0.1, 0.2, 0.3)})
    assert run.value("test/acc1") == 0.8
    assert run.value("extrapolation:48:acc1") == 0.5
    assert run.value("drop:48:24:acc1") == pytest.approx(-0.3)
    assert run.value("geometry:ssdc_rpi:last") == 0.3 and run.value("geometry:ssdc_rpi:0") == 0.1
    assert run.value("drop:96:24:acc1") is None and run.value("geometry:ssdc:last") is None


def test_pe_flags_split_an_arm_into_one_sweep_per_flag_set():
    from pebench.studies.plan import sweep_argvs

    study = load_study("fashion-mnist")
    argvs = sweep_argvs(study, study.arms[0], "out")
    by_pes = {a[a.index("--pes") + 1]: a for a in argvs}
    assert sorted(p for a in argvs for p in a[a.index("--pes") + 1].split(",")) == sorted(study.pes)
    rope = by_pes["rope-axial"]
    assert rope[-2:] == ["--analyses", "geometry,robustness,extrapolation,extrapolation-rules"]  # the last one wins
    assert "extrapolation-rules" not in " ".join(by_pes[next(k for k in by_pes if k.startswith("none"))])


def test_rule_claims_compare_two_rules_of_one_run(tmp_path):
    """A claim with b_metric pairs two metrics of the same cell (rope-axial's ntk rule against its native rule)."""
    results = tmp_path / "runs"
    for seed, (native, ntk) in enumerate([(0.50, 0.55), (0.52, 0.58), (0.47, 0.50), (0.55, 0.57)]):
        d = results / "shapes" / "rope-axial" / "vit-nano" / f"seed{seed}"
        d.mkdir(parents=True)
        rows = {rule: [{"resolution": "48", "acc1": v}] for rule, v in (("native", native), ("ntk", ntk))}
        (d / "results.json").write_text(json.dumps({"status": "complete", "metrics": {"test/acc1": 0.6},
                                                    "extrapolation_rules": rows}))
    study = _small_study("rules", results, "datasets: [shapes], pes: [rope-axial], seeds: [0, 1, 2, 3]", """
claims:
  - {id: ntk, sentence: ntk beats native, test: paired, metric: "rule:ntk:48:acc1", b_metric: "rule:native:48:acc1",
      dataset: shapes, a: {pe: rope-axial}, b: {pe: rope-axial}, direction: greater}
""")
    cells, _ = collect(study, results)
    (v,) = evaluate(study, cells)
    ref = stats.ttest_rel([0.55, 0.58, 0.50, 0.57], [0.50, 0.52, 0.47, 0.55])
    assert v.result.p == pytest.approx(ref.pvalue, rel=1e-12)


def test_correlation_with_a_reference_study_with_and_without_the_pes_that_did_not_learn(tmp_path):
    """x from another study's runs (a probe), y from this study's; learned_only drops PEs at their probe's bound."""
    own, probes = tmp_path / "own", tmp_path / "probes"
    probe_acc = {"none": 0.50, "ape": 0.90, "sincos": 0.80, "rope": 0.95, "alibi": 0.51}
    real_acc = {"none": 0.70, "ape": 0.84, "sincos": 0.85, "rope": 0.86, "alibi": 0.60}
    for pe in probe_acc:
        for seed in range(3):
            jitter = 0.001 * seed
            d = probes / "probe-x" / pe / "vit-probe" / f"seed{seed}"
            d.mkdir(parents=True)
            (d / "results.json").write_text(json.dumps({"status": "complete", "metrics": {"test/acc1": probe_acc[pe]
                                                        + jitter}, "dataset_info": {"no_pe_bound": 0.5}}))
            _write_run(own, pe, seed, real_acc[pe] + jitter, [(100, 0.5), (500, 0.5)])
    study = _small_study("corr", own, "datasets: [shapes], pes: [none, ape, sincos, rope, alibi], seeds: [0, 1, 2]", f"""
references:
  - {{name: probes, results: {probes.as_posix()}, model: vit-probe, datasets: [probe-x], seeds: [0, 1, 2],
      learned: {{metric: test/acc1, share: 0.8, above_bound: 0.5}}}}
claims:
  - {{id: all, sentence: probe-x predicts shapes, test: correlation, dataset: shapes, x: "probes:probe-x:test/acc1",
      y: test/acc1, direction: greater}}
  - {{id: learned, sentence: probe-x predicts shapes among PEs that learned it, test: correlation, dataset: shapes,
      x: "probes:probe-x:test/acc1", y: test/acc1, direction: greater, learned_only: true}}
""")
    cells, problems = collect(study, own)
    assert problems == []
    verdicts = {v.claim.id: v for v in evaluate(study, cells)}
    means = lambda d, pes: [d[p] + 0.001 for p in pes]  # noqa: E731 - the mean of seeds 0..2 adds 0.001
    everyone = ["none", "ape", "sincos", "rope", "alibi"]
    assert verdicts["all"].result.estimate == pytest.approx(
        stats.spearmanr(means(probe_acc, everyone), means(real_acc, everyone)).statistic)
    assert verdicts["all"].result.n == 5
    learned = ["ape", "sincos", "rope"]  # threshold 0.75: none and alibi sit at the bound
    assert verdicts["learned"].result.n == 3
    assert verdicts["learned"].result.estimate == pytest.approx(
        stats.spearmanr(means(probe_acc, learned), means(real_acc, learned)).statistic)


def test_committed_reports_count_their_reruns(monkeypatch):
    monkeypatch.chdir(REPO)
    for report in ("results/embedded/DETECTION_REPORT.md", "results/event-tokens/REPORT.md"):
        text = (REPO / report).read_text(encoding="utf-8")
        assert "**Reruns:** 4 of these runs were rerun" in text and "**4 of 4 gave identical metrics**" in text


def test_robustness_metrics_and_per_layer_tables(tmp_path):
    results = tmp_path / "runs"
    for seed, (fs, layers) in enumerate([(0.2, [0.1, 0.3]), (0.4, [0.3, 0.5])]):
        d = results / "shapes" / "ape" / "vit-nano" / f"seed{seed}"
        d.mkdir(parents=True)
        (d / "results.json").write_text(json.dumps({
            "status": "complete", "metrics": {"test/acc1": 0.9}, "robustness": {"jpeg": {"fs": fs, "acc": 0.7}},
            "geometry": {"ssdc": layers}}))
    study = _small_study("geo", results, "datasets: [shapes], pes: [ape], seeds: [0, 1]", """
table: {metrics: ["robustness:jpeg:fs"], layers: [ssdc]}
""")
    cells, _ = collect(study, results)
    (cell,) = cells.values()
    assert cell.values("robustness:jpeg:fs") == {0: 0.2, 1: 0.4}
    from pebench.studies.report import render_report

    text = render_report(study, cells, [], [], "runs")
    assert "| ape | 0.20 / 0.40 |" in text


def test_a_users_pe_gets_the_fashion_mnist_claims_of_every_pe():
    """The Fashion-MNIST study's per-PE claims are templates over groups that any PE joins (`declaration: any`):
    a user's own PE gets its comparisons with none and ape and its extrapolation against the scale change."""
    from pebench.studies.plan import with_pes

    study = load_study("fashion-mnist")
    joins = [g.name for g in study.groups if g.declaration == "any"]
    mine = with_pes(study, {"my-pe": joins}, only_new=True)
    assert [c.id for c in mine.claims] == ["my-pe-vs-none", "my-pe-vs-ape", "my-pe-keeps-36", "my-pe-keeps-48"]
    assert {(c.a.pe, c.b.pe) for c in mine.claims} == {("my-pe", "none"), ("my-pe", "ape")}
