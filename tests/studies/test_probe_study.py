"""The probe study (bench/studies/files/probes.yaml) and the engine features it uses: PEs run on some datasets only,
flags per dataset, claim templates over PE groups, capacity ("cannot represent"), the learned rule relative to each
probe's exact no-PE bound, post-selected seeds, a paired claim against a stated shift, and a user's own PE reported
against the study's runs.

Synthetic result folders are shaped like `bench run`'s; every verdict's number is checked against scipy.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from pebench.cli import main
from pebench.encodings.registry import get_pe_class
from pebench.studies.cells import collect
from pebench.studies.claims import evaluate
from pebench.studies.plan import sweep_argvs, with_pes
from pebench.studies.spec import load_study, parse_study

REPO = Path(__file__).resolve().parents[2]

#: grid PEs that declare a group's property but are deliberately outside it, and why
OUTSIDE = {
    ("relative", "cpe"): "its convolution sees the canvas' zero padding (an absolute cue): measured only on the canvas",
    ("relative", "alibi"): "distance-only (the distance-only group)",
    ("relative", "pape-ri"): "distance-only (the distance-only group)",
    ("relative", "fire"): "distance-only (the distance-only group)",
    ("set-relative", "alibi"): "distance-only: cannot represent the set probes' labels",
    ("set-relative", "pape-ri"): "distance-only: cannot represent the set probes' labels",
    ("set-relative", "fire"): "distance-only: cannot represent the set probes' labels",
    ("set-relative", "rpb"): "needs a grid: not run on the set probes",
    ("set-relative", "rope-dinov3"): "needs a grid: not run on the set probes",
}
for _group in ("relative", "set-relative", "distance-only", "decay"):  # none declares every symmetry trivially
    OUTSIDE[(_group, "none")] = "position-blind: run only on probe-anchoring, whose label it cannot represent"


def test_probe_groups_are_the_pes_declarations():
    study = load_study("probes")
    for group in study.groups:
        if group.declaration is None:
            continue
        for pe in group.pes:  # every member declares the property
            assert getattr(get_pe_class(pe), group.declaration) is True, (group.name, pe)
        for pe in study.pes:  # every grid PE that declares it is a member, or outside for a stated reason
            if getattr(get_pe_class(pe.split("+")[0]), group.declaration) is True and pe not in group.pes \
                    and "+" not in pe:
                assert (group.name, pe) in OUTSIDE, (group.name, pe)
    absolute = next(g for g in study.groups if g.name == "absolute")
    assert all(get_pe_class(pe).relative is False and get_pe_class(pe).rotation_invariant is False
               for pe in absolute.pes)


def test_probe_capacity_declarations_are_what_the_checker_finds():
    """Every grid cell the file lists as "cannot represent" is one the float64 check finds, and no other."""
    from pebench.analysis.probe_capacity import cannot_represent

    study = load_study("probes")
    for dataset in study.datasets:
        for pe in study.pes:
            if study.planned(dataset, pe):
                assert study.cannot(dataset, pe) == cannot_represent(dataset, pe), (dataset, pe)


def test_probe_sweeps_reproduce_the_committed_recipe_per_dataset():
    study = load_study("probes")
    argvs = sweep_argvs(study, study.arms[0], "out")
    planned = {(d, pe) for a in argvs for d in a[a.index("--datasets") + 1].split(",")
               for pe in a[a.index("--pes") + 1].split(",")}
    assert planned == {(d, pe) for d in study.datasets for pe in study.pes if study.planned(d, pe)}
    assert len(planned) * len(study.seeds) == study.runs_planned
    for a in argvs:
        datasets, pes = a[a.index("--datasets") + 1].split(","), a[a.index("--pes") + 1].split(",")
        analyses = a[len(a) - 1 - a[::-1].index("--analyses") + 1]  # the last --analyses wins
        if "probe-anchoring" in datasets:
            assert analyses == ("geometry,robustness,alpha" if set(pes) <= {"ape", "sincos", "sincos+rpt"}
                                else "geometry,robustness")
        elif "probe-extrapolation" in datasets:
            assert analyses == "extrapolation" and "extrapolation_samples=256" in a
        else:
            assert analyses == "none"
    # the committed runs were made with these flags: their configurations say so
    for dataset, pe, want in (("probe-anchoring", "sincos+rpt", "geometry,robustness,alpha"),
                              ("probe-anchoring", "none", "geometry,robustness"),
                              ("probe-extrapolation", "ape", "extrapolation"),
                              ("probe-set-translation", "ape", "none")):
        cfg = (REPO / "results" / "embedded" / dataset / pe / "vit-probe" / "seed0" / "config.yaml").read_text()
        assert f"analyses: {want}\n" in cfg, (dataset, pe)


# ------------------------------------------------------------------------------------------ synthetic probe study
PROBE_STUDY = """
study: toy-probes
version: 1
title: t
question: q
results: {results}
report: R.md
grid:
  datasets: [probe-a, probe-b]
  pes: [ape, rope-axial, {{pe: none, datasets: [probe-b]}}]
  seeds: [0, 1, 2, 3, 4]
recipe: [--model, vit-probe, --analyses, none]
flags:
  - {{datasets: [probe-b], flags: [--analyses, geometry]}}
table: {{metrics: [val/acc1, test/acc1], percent: true}}
plateau: {{metric: val/acc1, band: 0.01}}
learned: {{metric: val/acc1, share: 0.8, above_bound: 0.5}}
capacity:
  cannot_represent: {{probe-b: {{none: position-blind}}}}
groups:
  relative: {{pes: [rope-axial], declaration: relative}}
  absolute: {{pes: [ape]}}
claims:
  - {{id: "keeps-{{pe}}", each: relative, test: equivalence, dataset: probe-a, metric: test/acc1, b_metric: val/acc1,
     a: {{pe: "{{pe}}"}}, b: {{pe: "{{pe}}"}}, margin: 0.05, learned_seeds: true, sentence: "{{pe}} keeps it"}}
  - {{id: "loses-{{pe}}", each: absolute, test: paired, dataset: probe-a, metric: test/acc1, b_metric: val/acc1,
     a: {{pe: "{{pe}}"}}, b: {{pe: "{{pe}}"}}, "null": -0.05, direction: less, learned_seeds: true,
     sentence: "{{pe}} loses it"}}
  - {{id: beats, test: paired, dataset: probe-a, metric: test/acc1, a: {{pe: rope-axial}}, b: {{pe: ape}},
     direction: greater, learned_seeds: true, sentence: rope-axial beats ape}}
  - {{id: blind, test: paired, dataset: probe-b, metric: test/acc1, a: {{pe: ape}}, b: {{pe: none}},
     direction: greater, sentence: ape beats none}}
  - {{id: above, test: mean, dataset: probe-b, metric: test/acc1, a: {{pe: ape}}, "null": 0.5, direction: greater,
     sentence: ape above half}}
"""

#: (val, test) per PE and seed on probe-a (no-PE bound 0.25: learned at val >= 0.625)
PROBE_A = {"ape": [(0.90, 0.30), (0.92, 0.35), (0.60, 0.28), (0.95, 0.33), (0.91, 0.31)],  # seed 2 did not learn
           "rope-axial": [(0.96, 0.95), (0.97, 0.97), (0.95, 0.93), (0.98, 0.96), (0.96, 0.97)]}


def _probe_run(root: Path, dataset: str, pe: str, seed: int, val: float, test: float, bound: float,
               reached: bool = True, sha: str = "c" * 40) -> None:
    d = root / dataset / pe / "vit-probe" / f"seed{seed}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "results.json").write_text(json.dumps({
        "status": "complete", "dataset": dataset, "pe": pe, "seed": seed, "git_sha": sha, "wall_time_s": 10.0,
        "numerics": {"cpu_model": "CPU A" if seed < 3 else "CPU B"}, "metrics": {"test/acc1": test, "val/acc1": val},
        "dataset_info": {"no_pe_bound": bound},
        "stopped_at_target": {"reached": reached, "gave_up": False, "global_step": 100, "target": 0.95}}))
    rows = ["epoch,step,train/loss_step,val/acc1"] + [f"0,{s - 1},0.5,\n0,{s - 1},,{v}" for s, v in
                                                       ((25, bound), (50, (bound + val) / 2), (100, val))]
    (d / "metrics.csv").write_text("\n".join(rows) + "\n")


@pytest.fixture()
def probes(tmp_path):
    results = tmp_path / "runs"
    for pe, rows in PROBE_A.items():
        for seed, (val, test) in enumerate(rows):
            _probe_run(results, "probe-a", pe, seed, val, test, 0.25)
    for seed in range(5):
        _probe_run(results, "probe-b", "ape", seed, 0.97, 0.9 + 0.01 * seed, 0.5)
        _probe_run(results, "probe-b", "rope-axial", seed, 0.96, 0.95, 0.5)
        _probe_run(results, "probe-b", "none", seed, 0.5, 0.5, 0.5, reached=False)
    path = tmp_path / "toy-probes.yaml"
    path.write_text(PROBE_STUDY.format(results=results.as_posix()))
    return load_study(str(path)), results, path


def test_templates_expand_per_group_member_and_the_grid_is_per_dataset(probes):
    study, _, _ = probes
    assert [c.id for c in study.claims] == ["keeps-rope-axial", "loses-ape", "beats", "blind", "above"]
    assert study.runs_planned == (2 + 2 + 1) * 5
    argvs = sweep_argvs(study, study.arms[0], "out")
    assert [(a[a.index("--datasets") + 1], a[a.index("--pes") + 1], a[-1]) for a in argvs] == [
        ("probe-a", "ape,rope-axial", "none"), ("probe-b", "ape,rope-axial,none", "geometry")]


def test_probe_verdicts_post_selection_shift_and_capacity(probes):
    study, results, _ = probes
    cells, problems = collect(study, results)
    assert problems == [] and ("default", "probe-a", "none") not in cells  # none does not run on probe-a
    v = {x.claim.id: x for x in evaluate(study, cells)}
    # ape: seed 2 did not learn (val 0.60 < 0.625); 4 of 5 = 80 %: the cell learned, its claims read seeds 0,1,3,4
    learned = [0, 1, 3, 4]
    d = [PROBE_A["ape"][s][1] - PROBE_A["ape"][s][0] for s in learned]
    ref = stats.ttest_1samp(d, -0.05)
    assert v["loses-ape"].seeds == tuple(learned) and v["loses-ape"].result.p == pytest.approx(ref.pvalue, rel=1e-12)
    assert v["loses-ape"].word == "held"  # far below -5 points
    assert any("post-selection" in n for n in v["loses-ape"].notes)
    pair = stats.ttest_rel([PROBE_A["rope-axial"][s][1] for s in learned], [PROBE_A["ape"][s][1] for s in learned])
    assert v["beats"].result.p == pytest.approx(pair.pvalue, rel=1e-12) and v["beats"].seeds == tuple(learned)
    keeps = [PROBE_A["rope-axial"][s][1] - PROBE_A["rope-axial"][s][0] for s in range(5)]
    lower = stats.ttest_1samp(keeps, -0.05, alternative="greater").pvalue
    upper = stats.ttest_1samp(keeps, 0.05, alternative="less").pvalue
    assert v["keeps-rope-axial"].result.p == pytest.approx(max(lower, upper), rel=1e-9)
    # none cannot represent probe-b (declared): not testable, out of the family, the symmetry named
    assert v["blind"].word == "not testable" and v["blind"].p_holm is None
    assert any("none cannot represent the label (position-blind)" in n for n in v["blind"].notes)
    above = stats.ttest_1samp([0.9 + 0.01 * s for s in range(5)], 0.5)
    assert v["above"].word == "held" and v["above"].result.p == pytest.approx(above.pvalue, rel=1e-12)
    tested = [x for x in v.values() if x.p_holm is not None]
    assert len(tested) == 4  # keeps, loses, beats, above


def test_probe_report_has_the_learned_table_and_cpus_per_seed(probes, tmp_path):
    _, results, path = probes
    out = tmp_path / "R.md"
    assert main(["study", "report", str(path), "--out", str(out)]) == 0
    text = out.read_text()
    assert "## What each cell learned" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| ape |") and "learned" not in ln and "/5" in ln)
    assert "**4/5** (" in row  # 4 of 5 seeds learned probe-a (bold: 80 %)
    none_row = next(ln for ln in text.splitlines() if ln.startswith("| none |") and "/5" in ln)
    assert "cannot represent (position-blind) (0/5)" in none_row and none_row.endswith("| 0 of 0 |")
    assert "CPU A (seeds 0–2); CPU B (seeds 3–4)" in text
    assert "(5 reached the target)" in text  # runs that stopped at their target count as converged


def test_a_users_own_pe_is_reported_against_the_study_runs(probes, tmp_path, capsys):
    """`bench study report STUDY --pe MY-PE --results MINE`: the new PE joins the groups it declares, gets their
    claims (its own Holm family), and is compared with the study's runs; a PE outside the grid needs --results."""
    study, results, path = probes
    mine = tmp_path / "mine"
    rng = np.random.default_rng(0)
    for seed in range(5):
        val = 0.95 + 0.01 * rng.random()
        _probe_run(mine, "probe-a", "rope-mixed", seed, val, val - 0.01, 0.25, sha="d" * 40)
        _probe_run(mine, "probe-b", "rope-mixed", seed, 0.96, 0.96, 0.5, sha="d" * 40)
    assert main(["study", "run", str(path), "--pe", "rope-mixed"]) == 2
    assert "pass --results DIR" in capsys.readouterr().err
    out = tmp_path / "mine.md"
    assert main(["study", "report", str(path), "--pe", "rope-mixed", "--results", str(mine), "--out", str(out)]) == 0
    text = out.read_text()
    assert "rope-mixed keeps it: **" in text and "ape loses it" not in text  # only the new PE's claims
    assert "`ccccccc`" in text and "`ddddddd`" in text  # both commits named: baselines from another commit
    assert "**Your PE against the study's runs:** rope-mixed ran at commit(s) `ddddddd`" in text
    assert "They differ: a difference between your PE and a baseline includes the code and CPU differences" in text
    ext = with_pes(study, {"rope-mixed": ["relative"]}, only_new=True)
    assert [c.id for c in ext.claims] == ["keeps-rope-mixed"] and ext.families == ("main",)


def test_bad_grid_entries_and_templates_are_one_line(probes):
    from pebench.core.errors import ConfigError

    _, _, path = probes
    text = path.read_text()
    for old, new, expect in (
            ("{pe: none, datasets: [probe-b]}", "{pe: none, datasets: [probe-z]}", "should be some of grid.datasets"),
            ("each: relative,", "each: nope,", "each names group 'nope'"),
            ("relative: {pes: [rope-axial], declaration: relative}",
             "relative: {pes: [rope-axial], declaration: shiny}", "declaration should be one of"),
            ("cannot_represent: {probe-b: {none: position-blind}}", "cannot_represent: {probe-b: {lie: x}}",
             "a grid PE -> a symmetry name"),
            ("a: {pe: ape}, b: {pe: none}", "a: {pe: none}, b: {pe: ape}", None)):
        if expect is None:  # none on probe-a: the grid does not run it there
            bad = text.replace("dataset: probe-b, metric: test/acc1, a: {pe: ape}, b: {pe: none}",
                               "dataset: probe-a, metric: test/acc1, a: {pe: ape}, b: {pe: none}")
            with pytest.raises(ConfigError, match="where the grid does not run it"):
                parse_study(bad, "t.yaml")
            continue
        with pytest.raises(ConfigError, match=expect):
            parse_study(text.replace(old, new, 1), "t.yaml")


def test_alpha_rho_is_spearman_over_the_alpha_grid():
    from pebench.studies.cells import Run

    rng = np.random.default_rng(3)
    alphas = [1.0, 0.8, 0.7, 0.6, 0.5, 0.4, 0.2, 0.0]
    for _ in range(20):
        vals = rng.integers(0, 4, size=len(alphas)).astype(float)  # ties on purpose
        rows = tuple({"alpha": a, "fs": float(v), "ssdc_rpi": [0.0, float(v) * 2]} for a, v in zip(alphas, vals))
        run = Run(arm="a", dataset="d", pe="p", seed=0, path="x", status="complete", metrics={}, extrapolation={},
                  commit=None, cpu=None, wall_time_s=None, alpha_rows=rows)
        if np.ptp(vals) == 0:
            assert run.value("alpha-rho:fs") is None  # a constant side: no correlation
            continue
        want = stats.spearmanr(alphas, vals).statistic
        assert run.value("alpha-rho:fs") == pytest.approx(want, abs=1e-12)
        assert run.value("alpha-rho:ssdc_rpi:last") == pytest.approx(want, abs=1e-12)
    assert run.value("alpha-rho:nothing") is None


def test_control_cells_one_sample_equivalence_and_rho_claims(tmp_path):
    """b as a control (none: judged by neither the learned rule nor capacity), a one-sample TOST, and the mean of
    per-seed rho with its interval clipped to [-1, 1] and zero variance as no test."""
    results = tmp_path / "runs"
    rho_rows = {0: [1.0, 0.9, 0.5, 0.1], 1: [1.0, 0.8, 0.6, 0.2], 2: [0.9, 0.95, 0.4, 0.0], 3: [1.0, 0.7, 0.3, 0.1]}
    for seed in range(4):
        for pe, val, ssdc in (("ape", 0.97, 0.3 + 0.01 * seed), ("none", 0.5, 0.01 * (seed % 2))):
            _probe_run(results, "probe-b", pe, seed, val, val, 0.5)
            path = results / "probe-b" / pe / "vit-probe" / f"seed{seed}" / "results.json"
            res = json.loads(path.read_text())
            res["geometry"] = {"ssdc": [0.0, ssdc]}
            res["alpha_sweep"] = [{"alpha": a, "ssdc_rpi": [0.0, v], "acc": 0.9}
                                  for a, v in zip((1.0, 0.7, 0.4, 0.0), rho_rows[seed])]
            path.write_text(json.dumps(res))
    study = parse_study(f"""
study: ctl
version: 1
title: t
question: q
results: {results.as_posix()}
report: R.md
grid: {{datasets: [probe-b], pes: [none, ape], seeds: [0, 1, 2, 3]}}
recipe: [--model, vit-probe]
learned: {{metric: val/acc1, share: 0.8, above_bound: 0.5}}
capacity: {{cannot_represent: {{probe-b: {{none: position-blind}}}}}}
claims:
  - {{id: structure, test: paired, dataset: probe-b, metric: "geometry:ssdc:last", a: {{pe: ape}}, b: {{pe: none}},
     control: true, direction: greater, learned_seeds: true, sentence: s}}
  - {{id: null-none, test: equivalence, dataset: probe-b, metric: "geometry:ssdc:last", a: {{pe: none}}, "null": 0.0,
     margin: 0.1, learned_above: 0.0, sentence: s}}
  - {{id: rho, test: mean, dataset: probe-b, metric: "alpha-rho:ssdc_rpi:last", a: {{pe: ape}}, "null": 0.0,
     direction: greater, sentence: s}}
  - {{id: acc-rho, test: mean, dataset: probe-b, metric: "alpha-rho:acc", a: {{pe: ape}}, "null": 0.0,
     direction: greater, sentence: s}}
""", "ctl.yaml")
    cells, _ = collect(study, results)
    v = {x.claim.id: x for x in evaluate(study, cells)}
    ape = [0.3 + 0.01 * s for s in range(4)]
    none = [0.01 * (s % 2) for s in range(4)]
    assert v["structure"].result.p == pytest.approx(stats.ttest_rel(ape, none).pvalue, rel=1e-12)
    lower = stats.ttest_1samp(none, -0.1, alternative="greater").pvalue
    upper = stats.ttest_1samp(none, 0.1, alternative="less").pvalue
    assert v["null-none"].result.p == pytest.approx(max(lower, upper), rel=1e-9) and v["null-none"].word == "equivalent"
    rhos = [stats.spearmanr((1.0, 0.7, 0.4, 0.0), rho_rows[s]).statistic for s in range(4)]
    r = v["rho"].result
    assert r.estimate == pytest.approx(np.mean(rhos)) and r.p == pytest.approx(stats.ttest_1samp(rhos, 0).pvalue)
    assert -1.0 <= r.lo <= r.estimate <= r.hi <= 1.0
    assert v["acc-rho"].word == "not testable" or v["acc-rho"].result.p is None  # accuracy constant: no rho at all


def test_report_links_its_curves_and_writes_them(probes, tmp_path):
    """`bench study report` writes <stem>_curves.png beside the report, and the report links it (the text does not
    depend on the image, so `bench study check` compares text only)."""
    _, _, path = probes
    out = tmp_path / "R.md"
    assert main(["study", "report", str(path), "--out", str(out)]) == 0
    png = tmp_path / "R_curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "](R_curves.png)" in out.read_text()


def test_a_users_pe_that_needs_a_grid_skips_the_token_set_probes():
    """A user's PE joins the groups it declares; one that needs a grid (as rope-dinov3 does) gets no set-probe cells
    and no set-probe claims, and the capacity checker runs on its own cells only."""
    from dataclasses import replace

    from pebench.cli.commands.study import with_own_pes

    study = load_study("probes")
    without = replace(study, pes=tuple(p for p in study.pes if p != "rope-dinov3"),
                      pe_datasets=tuple(x for x in study.pe_datasets if x[0] != "rope-dinov3"),
                      groups=tuple(replace(g, pes=tuple(p for p in g.pes if p != "rope-dinov3")) for g in study.groups))
    ext = with_own_pes(without, ["rope-dinov3"])
    assert [c.id for c in ext.claims] == ["translation-keeps-rope-dinov3", "translation-beats-sincos-rope-dinov3",
                                          "extrapolation-keeps-rope-dinov3", "extrapolation-beats-sincos-rope-dinov3"]
    argvs = sweep_argvs(ext, ext.arms[0], "mine", pes=["rope-dinov3"])
    ran = {d for a in argvs for d in a[a.index("--datasets") + 1].split(",")}
    assert ran == {d for d in study.datasets if not d.startswith("probe-set-")}
    assert all(ext.cannot(d, "rope-dinov3") is None for d in ran)  # relative, but nothing breaks these labels


def test_an_unknown_own_pe_is_one_line_naming_the_valid_ones(tmp_path, capsys):
    assert main(["study", "report", "probes", "--pe", "no-such-pe", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-pe" in err[0] and "rope-axial" in err[0]
