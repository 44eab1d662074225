"""A study file: one declarative YAML file per study, validated here into a :class:`Study`.

A study says what it asks and how it is answered, and nothing else (the engine decides every number):

```yaml
study: detection                 # the name `bench study` knows it by (the file's stem)
version: 1                       # the file format (STUDY_FORMAT); the engine refuses others
title: ...                       # the report's heading
question: ...                    # one paragraph: what the study asks
results: results/embedded        # where its runs live (relative to the repository root, or --results)
report: DETECTION_REPORT.md      # the report's file name inside `results`
arms:                            # optional: runs of one grid made with different flags, each in its own folder
  - {name: frames, out: frames, flags: []}
grid: {datasets: [...], pes: [...], seeds: [0, 1, 2]}
recipe: [--model, vit-nano, --epochs, "6"]     # every `bench sweep` / `bench run` flag besides the grid
pe_flags: {ape: [--analyses, "geometry,alpha"]}  # optional: flags added for some PEs (a later flag wins)
workers: 2
table:                           # the per-dataset table: metrics, extrapolation, and per-layer geometry (`layers`)
  metrics: [val/map, test/map]
  extrapolation: map             # optional: the key of results.json's extrapolation rows shown per resolution
  percent: true                  # fractions shown as percent
plateau: {metric: val/map, band: 0.01}   # convergence: gain over the last fifth of training at most `band`
learned: {metric: test/acc1, above: 0.5, share: 0.8}   # optional: a cell learned when 80 % of its seeds reach 0.5
claims:                          # named comparisons, each with its test, family and sentence
  - id: shapes-det-pape-none
    sentence: pape beats none on test mAP
    test: paired                 # paired | equivalence | mean | correlation | not-informative
    metric: test/map
    dataset: shapes-det
    a: {pe: pape}
    b: {pe: none}
    direction: greater           # what the claim predicts (held / contradicted / inconclusive)
    family: main
reruns: results/rerun_check.json # optional: reruns of its runs from their config.yaml (the report counts them)
flags:                           # optional: flags added for some datasets and / or PEs (all matching rules, in order)
  - {datasets: [probe-extrapolation], flags: [--analyses, extrapolation]}
groups:                          # optional: named PE groups a claim ranges over (`each: GROUP`, `{pe}` in its text)
  relative: {pes: [rope-axial, pape], declaration: relative}   # a user's PE joins when it declares `relative`
capacity:                        # optional: cells an exact symmetry of the PE puts out of reach ("cannot represent")
  checker: probe-capacity        # what decides it for a PE the file does not list (pebench.analysis.probe_capacity)
  cannot_represent: {probe-rotation: {alibi: distance-only}}
scope: [...]                     # sentences the verdicts may be read under
changes: [...]                   # "changed from the previous report" (procedure changes, said once)
```

A grid PE may be run on some of the datasets only: ``pes: [ape, {pe: none, datasets: [probe-anchoring]}]``.

Every key is checked (unknown keys, wrong types, unknown test names, claims naming cells outside the grid):
one line naming the file and the key, :class:`~pebench.core.errors.ConfigError` (exit code 2). The files are
read through :func:`pebench.core.io.load_yaml_untrusted` (a study file may come from anyone).
"""
from __future__ import annotations

import importlib.resources
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from pebench.core.errors import ConfigError, UnknownNameError
from pebench.core.io import UnreadableYAML, load_yaml_untrusted

__all__ = ["STUDY_FORMAT", "TESTS", "DIRECTIONS", "DECLARATIONS", "Arm", "CellRef", "Claim", "Study", "Reference",
           "LearnedRule", "FlagRule", "Group", "load_study", "list_studies", "study_path", "parse_study", "parse_claim",
           "substitute_pe", "template_datasets"]

#: the study file format this engine reads (``version:``)
STUDY_FORMAT = 1
#: claim tests: what each compares (:mod:`pebench.studies.claims` evaluates them)
TESTS = {
    "paired": "a against b, paired by seed: t-test of the per-seed differences against 0, or against a stated shift "
              "(null), two-sided",
    "equivalence": "a against b, paired by seed (or a's values against null): TOST of the per-seed differences "
                   "against +-margin",
    "mean": "one cell's values against a null value: one-sample t-test (two-sided)",
    "correlation": "across the grid's PEs: Spearman correlation of two per-PE means, permutation p",
    "not-informative": "a bound the design already guarantees (a symmetry, a chance ceiling): reported, not tested",
}
#: what a paired / mean / correlation claim predicts
DIRECTIONS = ("greater", "less")
#: the PE declarations a group may admit a PE by (class attributes of pebench.encodings.base.PositionalEncoding;
#: ``any``: every PE joins)
DECLARATIONS = ("relative", "rotation_invariant", "distance_decay")

_TOP_KEYS = {"study", "version", "title", "question", "results", "report", "arms", "grid", "recipe", "workers",
             "table", "plateau", "learned", "claims", "scope", "changes", "protocol", "pe_flags", "references",
             "reruns", "flags", "groups", "capacity", "notes"}
_CLAIM_KEYS = {"id", "sentence", "test", "metric", "b_metric", "dataset", "a", "b", "direction", "family", "margin",
               "null", "x", "y", "reason", "arm", "learned_only", "learned_seeds",
               "learned_above", "each", "control", "tests_learning"}


@dataclass(frozen=True)
class Arm:
    """Runs of the grid made with extra flags, in their own folder ``<results>/<out>``."""

    name: str
    out: str
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class CellRef:
    """One cell of the grid a claim names: a PE (variant) in an arm and on a dataset (``None``: the claim's own arm,
    dataset; a paired claim whose sides name two datasets pairs the seeds across them)."""

    pe: str
    arm: str | None = None
    dataset: str | None = None


@dataclass(frozen=True)
class Claim:
    id: str
    sentence: str
    test: str
    family: str
    metric: str | None = None
    dataset: str | None = None
    arm: str | None = None
    a: CellRef | None = None
    b: CellRef | None = None
    direction: str | None = None
    margin: float | None = None
    null: float | None = None
    x: str | None = None          # correlation: metric of the first per-PE mean
    y: str | None = None          # correlation: metric of the second
    reason: str | None = None     # not-informative: what guarantees the bound
    b_metric: str | None = None   # paired / equivalence: b's metric when it differs from a's (e.g. another rule)
    learned_only: bool = False    # correlation: only the PEs whose cells learned on both sides
    learned_seeds: bool = False   # paired / equivalence / mean: only the seeds that learned (post-selection)
    learned_above: float | None = None  # this claim's own "learned" threshold on the study's learned metric: a claim
    #                                     about the part of a label the PE can represent (its cell's "cannot
    #                                     represent" does not block it)
    each: str | None = None       # the group this claim was expanded from (one claim per PE of the group)
    control: bool = False         # b is a control (e.g. none): the learned rule and capacity apply to a only
    tests_learning: bool = False  # the claim tests whether its cells learned: the learned rule does not gate it

    def datasets(self) -> tuple[str, ...]:
        """The datasets the claim reads: its own, or its sides'."""
        own = [self.dataset] if self.dataset is not None else []
        return tuple(dict.fromkeys(own + [c.dataset for c in (self.a, self.b) if c is not None and c.dataset]))


@dataclass(frozen=True)
class FlagRule:
    """Flags added to the runs of some datasets and / or PEs (an empty filter matches every one)."""

    flags: tuple[str, ...]
    datasets: tuple[str, ...] = ()
    pes: tuple[str, ...] = ()

    def matches(self, dataset: str, pe: str) -> bool:
        return (not self.datasets or dataset in self.datasets) and (not self.pes or pe in self.pes)


@dataclass(frozen=True)
class Group:
    """PEs a claim template ranges over; ``declaration``: a user's PE (``--pe``) joins when it declares it true."""

    name: str
    pes: tuple[str, ...]
    declaration: str | None = None


@dataclass(frozen=True)
class Reference:
    """Runs of another study a correlation claim reads (``x: "NAME:DATASET:METRIC"``): read, never run."""

    name: str
    results: str
    model: str | None
    datasets: tuple[str, ...]
    seeds: tuple[int, ...]
    learned: "LearnedRule | None" = None


@dataclass(frozen=True)
class LearnedRule:
    """A cell learned when at least ``share`` of its seeds reached the threshold on ``metric``: ``above``, or, with
    ``above_bound``, the run's exact no-PE bound plus ``above_bound`` of the way from it to 1 (results.json's
    ``dataset_info.no_pe_bound``: a probe's ceiling)."""

    metric: str
    share: float
    above: float | None = None
    above_bound: float | None = None

    def threshold(self, bound: float | None) -> float | None:
        if self.above_bound is not None and bound is not None:
            return bound + self.above_bound * (1.0 - bound)
        return self.above

    def describe(self) -> str:
        what = (f"its no-PE bound plus {self.above_bound:g} of the way to 1" if self.above_bound is not None
                else f"{self.above:g}")
        return f"`{self.metric}` ≥ {what} in at least {self.share:.0%} of its seeds"


@dataclass(frozen=True)
class Study:
    name: str
    title: str
    question: str
    results: str
    report: str
    datasets: tuple[str, ...]
    pes: tuple[str, ...]
    seeds: tuple[int, ...]
    recipe: tuple[str, ...]
    workers: int
    arms: tuple[Arm, ...]
    metrics: tuple[str, ...]
    extrapolation: str | None
    percent: bool
    plateau_metric: str | None
    plateau_band: float | None
    claims: tuple[Claim, ...]
    learned: LearnedRule | None = None    # when a cell counts as having learned (claims on the others: not testable)
    references: tuple[Reference, ...] = ()
    layers: tuple[str, ...] = ()  # per-layer geometry lists shown per PE (means over seeds, layer by layer)
    reruns: str | None = None     # a rerun_check JSON (records of runs rerun from their config.yaml) the report reads
    scope: tuple[str, ...] = ()
    changes: tuple[str, ...] = ()
    protocol: tuple[str, ...] = ()
    pe_flags: tuple[tuple[str, tuple[str, ...]], ...] = ()   # (PE, flags added after the recipe for it)
    source: str = ""              # where the file was read from (for messages)
    families: tuple[str, ...] = field(default=())
    pe_datasets: tuple[tuple[str, tuple[str, ...]], ...] = ()  # PEs run on some datasets only
    flag_rules: tuple[FlagRule, ...] = ()
    groups: tuple[Group, ...] = ()
    templates: tuple[tuple[int, Mapping[str, Any]], ...] = ()  # (index, raw claim with `each`), for with_pes
    cannot_represent: tuple[tuple[str, str, str], ...] = ()    # (dataset, PE, symmetry)
    capacity_checker: str | None = None
    own_pes: tuple[str, ...] = ()  # PEs added to the grid by a user (with_pes): the report compares their provenance
    notes: tuple[tuple[str, str], ...] = ()  # (title, markdown): the file's own text, printed after the verdicts

    def datasets_of(self, pe: str) -> tuple[str, ...]:
        """The datasets ``pe`` runs on (every one unless the grid names some)."""
        return dict(self.pe_datasets).get(pe, self.datasets)

    def planned(self, dataset: str, pe: str) -> bool:
        return pe in self.pes and dataset in self.datasets_of(pe)

    def cannot(self, dataset: str, pe: str) -> str | None:
        """The symmetry that puts the label of ``dataset`` out of reach of ``pe`` (None: it can represent it)."""
        for d, p, sym in self.cannot_represent:
            if d == dataset and p == pe:
                return sym
        return None

    def flags_for(self, dataset: str, pe: str) -> tuple[str, ...]:
        """The flags added to the runs of (``dataset``, ``pe``): ``pe_flags``, then each matching ``flags`` rule."""
        out = list(dict(self.pe_flags).get(pe, ()))
        for rule in self.flag_rules:
            if rule.matches(dataset, pe):
                out += rule.flags
        return tuple(out)

    @property
    def runs_planned(self) -> int:
        return sum(len(self.datasets_of(pe)) for pe in self.pes) * len(self.seeds) * len(self.arms)

    def arm(self, name: str | None) -> Arm:
        if name is None:
            return self.arms[0]
        for a in self.arms:
            if a.name == name:
                return a
        raise KeyError(name)


def _files() -> Any:
    return importlib.resources.files("pebench.studies") / "files"


def list_studies() -> list[str]:
    """The names of the studies shipped with pebench (``pebench/studies/files/<name>.yaml``)."""
    return sorted(p.name[:-5] for p in _files().iterdir() if p.name.endswith(".yaml"))


def study_path(name_or_path: str) -> tuple[str, str]:
    """(text, source) of a shipped study by name, or of a study file by path (a user's own study)."""
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        p = Path(name_or_path)
        if not p.is_file():
            raise ConfigError(f"study file {name_or_path!r} does not exist")
        try:
            return p.read_text(encoding="utf-8"), str(p)
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"cannot read study file {name_or_path!r}: {type(e).__name__}") from None
    names = list_studies()
    if name_or_path not in names:
        raise UnknownNameError(f"unknown study {name_or_path!r}; available: {', '.join(names)} "
                               f"(or the path of a study file)")
    return (_files() / f"{name_or_path}.yaml").read_text(encoding="utf-8"), f"{name_or_path}.yaml"


def load_study(name_or_path: str) -> Study:
    """The validated :class:`Study` of a shipped name or a file path (one-line ConfigError otherwise)."""
    text, source = study_path(name_or_path)
    return parse_study(text, source)


def _need(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in data:
        raise ConfigError(f"{where}: missing key {key!r}")
    v = data[key]
    if not isinstance(v, kind) or isinstance(v, bool) and kind is not bool:
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ConfigError(f"{where}: {key!r} should be a {names}, got {type(v).__name__}")
    return v


def _strings(v: Any, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(s, (str, int, float)) and not isinstance(s, bool) for s in v):
        raise ConfigError(f"{where}: {key!r} should be a list of strings")
    return tuple(str(s) for s in v)


def _cell(v: Any, key: str, where: str) -> CellRef:
    if not isinstance(v, dict) or not isinstance(v.get("pe"), str) or set(v) - {"pe", "arm", "dataset"}:
        raise ConfigError(f"{where}: {key!r} should be a mapping {{pe: NAME[, arm: NAME][, dataset: NAME]}}")
    for k in ("arm", "dataset"):
        if v.get(k) is not None and not isinstance(v.get(k), str):
            raise ConfigError(f"{where}: {key}.{k} should be a string")
    return CellRef(pe=v["pe"], arm=v.get("arm"), dataset=v.get("dataset"))


def parse_claim(raw: Any, i: int, source: str) -> Claim:
    where = f"{source}: claims[{i}]"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} should be a mapping")
    unknown = sorted(set(raw) - _CLAIM_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; known: {', '.join(sorted(_CLAIM_KEYS))}")
    cid = _need(raw, "id", str, where)
    where = f"{source}: claim {cid!r}"
    test = _need(raw, "test", str, where)
    if test not in TESTS:
        raise ConfigError(f"{where}: unknown test {test!r}; available: {', '.join(TESTS)}")
    direction = raw.get("direction")
    if direction is not None and direction not in DIRECTIONS:
        raise ConfigError(f"{where}: direction should be one of {', '.join(DIRECTIONS)}, got {direction!r}")
    claim = Claim(id=cid, sentence=_need(raw, "sentence", str, where), test=test,
                  family=str(raw.get("family", "main")), metric=raw.get("metric"), dataset=raw.get("dataset"),
                  arm=raw.get("arm"), a=_cell(raw["a"], "a", where) if "a" in raw else None,
                  b=_cell(raw["b"], "b", where) if "b" in raw else None, direction=direction,
                  margin=float(raw["margin"]) if "margin" in raw else None,
                  null=float(raw["null"]) if "null" in raw else None, x=raw.get("x"), y=raw.get("y"),
                  reason=raw.get("reason"), b_metric=raw.get("b_metric"),
                  learned_only=bool(raw.get("learned_only", False)),
                  learned_seeds=bool(raw.get("learned_seeds", False)),
                  learned_above=_number(raw, "learned_above", where), each=raw.get("each"),
                  control=bool(raw.get("control", False)), tests_learning=bool(raw.get("tests_learning", False)))
    needs = {"paired": ("metric", "dataset", "a", "b", "direction"),
             "equivalence": ("metric", "dataset", "a", "margin"),
             "mean": ("metric", "dataset", "a", "direction"),
             "correlation": ("dataset", "x", "y", "direction"),
             "not-informative": ("reason",)}[test]
    sides_named = claim.a is not None and claim.a.dataset is not None and (claim.b is None or claim.b.dataset is not None)
    for key in needs:
        if key == "dataset" and test != "correlation" and sides_named:
            continue  # each side names its own dataset
        if getattr(claim, key) is None:
            raise ConfigError(f"{where}: a {test!r} claim needs {key!r}")
    if claim.margin is not None and not claim.margin > 0:
        raise ConfigError(f"{where}: margin should be > 0, got {claim.margin}")
    return claim


def _number(raw: Mapping[str, Any], key: str, where: str) -> float | None:
    v = raw.get(key)
    if v is None:
        return None
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise ConfigError(f"{where}: {key!r} should be a number")
    return float(v)


def substitute_pe(v: Any, pe: str) -> Any:
    """``v`` with ``{pe}`` replaced by ``pe`` in every string (a claim template's expansion)."""
    if isinstance(v, str):
        return v.replace("{pe}", pe)
    if isinstance(v, dict):
        return {k: substitute_pe(x, pe) for k, x in v.items()}
    if isinstance(v, list):
        return [substitute_pe(x, pe) for x in v]
    return v


def _expand(raw: Any, i: int, source: str, groups: Mapping[str, "Group"],
            datasets_of: Any) -> list[tuple[Any, int]]:
    """A claim, or a template (``each: GROUP``) as one claim per PE of the group that runs on its dataset."""
    if not isinstance(raw, dict) or "each" not in raw:
        return [(raw, i)]
    group = raw["each"]
    if group not in groups:
        raise ConfigError(f"{source}: claims[{i}]: each names group {group!r}; groups: "
                          f"{', '.join(sorted(groups)) or 'none'}")
    if "{pe}" not in str(raw.get("id", "")):
        raise ConfigError(f"{source}: claims[{i}]: a template's id must hold {{pe}}")
    return [(substitute_pe(raw, pe), i) for pe in groups[group].pes
            if set(template_datasets(raw)) <= set(datasets_of(pe))]


def template_datasets(raw: Mapping[str, Any]) -> tuple[str, ...]:
    """The datasets a claim template reads (its own and its sides'): a PE joins it only where it runs on all."""
    sides = [raw.get(k) for k in ("a", "b")]
    found = [raw.get("dataset")] + [side.get("dataset") for side in sides if isinstance(side, dict)]
    return tuple(str(d) for d in found if d is not None)


def _learned_rule(raw: Any, where: str) -> LearnedRule:
    if (not isinstance(raw, dict) or not set(raw) <= {"metric", "share", "above", "above_bound"}
            or not isinstance(raw.get("metric"), str) or ("above" in raw) == ("above_bound" in raw)
            or not all(isinstance(raw.get(k), (int, float)) and not isinstance(raw.get(k), bool)
                       for k in ("share", "above" if "above" in raw else "above_bound"))
            or not 0 < raw["share"] <= 1):
        raise ConfigError(f"{where}: learned should be {{metric: NAME, share: (0, 1], above: NUMBER or above_bound: "
                          f"NUMBER}}")
    return LearnedRule(metric=raw["metric"], share=float(raw["share"]),
                       above=float(raw["above"]) if "above" in raw else None,
                       above_bound=float(raw["above_bound"]) if "above_bound" in raw else None)


def _reference(raw: Any, i: int, source: str) -> Reference:
    where = f"study file {source}: references[{i}]"
    if not isinstance(raw, dict) or set(raw) - {"name", "results", "model", "datasets", "seeds", "learned"}:
        raise ConfigError(f"{where} should be {{name, results, model, datasets, seeds[, learned]}}")
    seeds = raw.get("seeds")
    if not isinstance(seeds, list) or not seeds or not all(isinstance(x, int) and not isinstance(x, bool) for x in seeds):
        raise ConfigError(f"{where}: seeds should be a non-empty list of integers")
    return Reference(name=_need(raw, "name", str, where), results=_need(raw, "results", str, where),
                     model=raw.get("model"), datasets=_strings(raw.get("datasets"), "datasets", where),
                     seeds=tuple(seeds),
                     learned=_learned_rule(raw["learned"], where) if "learned" in raw else None)


def parse_study(text: str, source: str) -> Study:
    """Validate a study file's text (module docstring) into a :class:`Study`."""
    try:
        data = load_yaml_untrusted(text)
    except UnreadableYAML as e:
        raise ConfigError(f"study file {source}: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"study file {source}: expected a mapping at top level")
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise ConfigError(f"study file {source}: unknown key {unknown[0]!r}; known: {', '.join(sorted(_TOP_KEYS))}")
    version = data.get("version")
    if version != STUDY_FORMAT:
        raise ConfigError(f"study file {source}: version {version!r}; this pebench reads study files of version "
                          f"{STUDY_FORMAT}")
    grid = _need(data, "grid", dict, source)
    if set(grid) - {"datasets", "pes", "seeds"}:
        raise ConfigError(f"study file {source}: grid takes datasets, pes and seeds")
    datasets = _strings(grid.get("datasets"), "grid.datasets", source)
    pes_list, pe_datasets = [], []
    for i, entry in enumerate(grid.get("pes") if isinstance(grid.get("pes"), list) else []):
        if isinstance(entry, dict):
            if set(entry) != {"pe", "datasets"} or not isinstance(entry["pe"], str):
                raise ConfigError(f"study file {source}: grid.pes[{i}] should be a name or {{pe: NAME, datasets: "
                                  f"[...]}}")
            only = _strings(entry["datasets"], f"grid.pes[{i}].datasets", source)
            if not only or set(only) - set(datasets):
                raise ConfigError(f"study file {source}: grid.pes[{i}].datasets should be some of grid.datasets")
            pes_list.append(entry["pe"])
            pe_datasets.append((entry["pe"], tuple(d for d in datasets if d in only)))
        else:
            pes_list += list(_strings([entry], f"grid.pes[{i}]", source))
    if not isinstance(grid.get("pes"), list):
        _strings(grid.get("pes"), "grid.pes", source)
    pes = tuple(pes_list)
    if len(set(pes)) != len(pes):
        raise ConfigError(f"study file {source}: grid.pes names a PE twice")
    seeds_raw = grid.get("seeds")
    if not isinstance(seeds_raw, list) or not seeds_raw or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds_raw):
        raise ConfigError(f"study file {source}: grid.seeds should be a non-empty list of integers >= 0")
    if not datasets or not pes:
        raise ConfigError(f"study file {source}: grid.datasets and grid.pes must not be empty")
    arms_raw = data.get("arms") or [{"name": "default", "out": ".", "flags": []}]
    if not isinstance(arms_raw, list):
        raise ConfigError(f"study file {source}: arms should be a list")
    arms = []
    for i, a in enumerate(arms_raw):
        if not isinstance(a, dict) or set(a) - {"name", "out", "flags"} or not isinstance(a.get("name"), str):
            raise ConfigError(f"study file {source}: arms[{i}] should be {{name, out, flags}}")
        out = str(a.get("out", "."))
        if out.startswith("/") or ".." in Path(out).parts:
            raise ConfigError(f"study file {source}: arms[{i}].out must be a folder inside results, got {out!r}")
        arms.append(Arm(name=a["name"], out=out, flags=_strings(a.get("flags", []), f"arms[{i}].flags", source)))
    table = data.get("table") or {}
    if not isinstance(table, dict) or set(table) - {"metrics", "extrapolation", "percent", "layers"}:
        raise ConfigError(f"study file {source}: table takes metrics, extrapolation, percent and layers")
    plateau = data.get("plateau")
    if plateau is not None and (not isinstance(plateau, dict) or set(plateau) != {"metric", "band"}
                                or not isinstance(plateau["band"], (int, float)) or plateau["band"] < 0):
        raise ConfigError(f"study file {source}: plateau should be {{metric: NAME, band: NUMBER >= 0}}")
    learned = _learned_rule(data["learned"], f"study file {source}") if data.get("learned") is not None else None
    references = tuple(_reference(r, i, source) for i, r in enumerate(data.get("references") or []))
    groups = _groups(data.get("groups"), source, pes)
    datasets_of = dict(pe_datasets)
    raw_claims = data.get("claims") or []
    if not isinstance(raw_claims, list):
        raise ConfigError(f"study file {source}: claims should be a list")
    expanded = [e for i, c in enumerate(raw_claims)
                for e in _expand(c, i, source, groups, lambda pe: datasets_of.get(pe, datasets))]
    claims = tuple(parse_claim(c, i, source) for c, i in expanded)
    templates = tuple((i, c) for i, c in enumerate(raw_claims) if isinstance(c, dict) and "each" in c)
    flag_rules = _flag_rules(data.get("flags"), source, datasets, pes)
    cannot, checker = _capacity(data.get("capacity"), source, datasets, pes)
    ref_names = {r.name: r for r in references}
    for c in claims:
        for side in (c.x, c.y):
            if side is not None and side.count(":") >= 2 and side.split(":", 1)[0] in ref_names:
                ref = ref_names[side.split(":", 1)[0]]
                if side.split(":")[1] not in ref.datasets:
                    raise ConfigError(f"study file {source}: claim {c.id!r} reads dataset {side.split(':')[1]!r} of "
                                      f"reference {ref.name!r}, which lists {', '.join(ref.datasets)}")
    ids = [c.id for c in claims]
    if len(ids) != len(set(ids)):
        raise ConfigError(f"study file {source}: claim ids must be unique")
    arm_names = {a.name for a in arms}
    for c in claims:
        for cref in (c.a, c.b):
            if cref is not None and cref.pe not in pes:
                raise ConfigError(f"study file {source}: claim {c.id!r} names PE {cref.pe!r}, not in grid.pes")
            if cref is not None and cref.arm is not None and cref.arm not in arm_names:
                raise ConfigError(f"study file {source}: claim {c.id!r} names arm {cref.arm!r}; arms: "
                                  f"{', '.join(sorted(arm_names))}")
        for ds in c.datasets():
            if ds not in datasets:
                raise ConfigError(f"study file {source}: claim {c.id!r} names dataset {ds!r}, not in grid.datasets")
        for cref in (c.a, c.b):
            ds = cref.dataset or c.dataset if cref is not None else None
            if cref is not None and ds is not None and ds not in datasets_of.get(cref.pe, datasets):
                raise ConfigError(f"study file {source}: claim {c.id!r} names PE {cref.pe!r} on {ds!r}, where "
                                  f"the grid does not run it")
        if c.arm is not None and c.arm not in arm_names:
            raise ConfigError(f"study file {source}: claim {c.id!r} names arm {c.arm!r}")
    pe_flags_raw = data.get("pe_flags") or {}
    if not isinstance(pe_flags_raw, dict):
        raise ConfigError(f"study file {source}: pe_flags should be a mapping PE -> list of flags")
    for pe_name in pe_flags_raw:
        if pe_name not in pes:
            raise ConfigError(f"study file {source}: pe_flags names PE {pe_name!r}, not in grid.pes")
    pe_flags = tuple((str(k), _strings(v, f"pe_flags.{k}", source)) for k, v in pe_flags_raw.items())
    workers = data.get("workers", 1)
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ConfigError(f"study file {source}: workers should be an integer >= 1")
    families = tuple(dict.fromkeys(c.family for c in claims if c.test != "not-informative"))
    return Study(
        name=_need(data, "study", str, source), title=_need(data, "title", str, source),
        question=" ".join(_need(data, "question", str, source).split()),
        results=_need(data, "results", str, source), report=_need(data, "report", str, source),
        datasets=datasets, pes=pes, seeds=tuple(seeds_raw), recipe=_strings(data.get("recipe", []), "recipe", source),
        workers=workers, arms=tuple(arms), metrics=_strings(table.get("metrics", []), "table.metrics", source),
        extrapolation=table.get("extrapolation"), percent=bool(table.get("percent", False)),
        plateau_metric=plateau["metric"] if plateau else None,
        plateau_band=float(plateau["band"]) if plateau else None, claims=claims,
        learned=learned, references=references,
        reruns=str(data["reruns"]) if data.get("reruns") is not None else None,
        layers=_strings(table.get("layers", []), "table.layers", source),
        scope=tuple(" ".join(str(s).split()) for s in data.get("scope") or []),
        changes=tuple(" ".join(str(s).split()) for s in data.get("changes") or []),
        protocol=tuple(" ".join(str(s).split()) for s in data.get("protocol") or []),
        pe_flags=pe_flags, source=source, families=families, pe_datasets=tuple(pe_datasets), flag_rules=flag_rules,
        groups=tuple(groups.values()), templates=templates, cannot_represent=cannot, capacity_checker=checker,
        notes=_notes(data.get("notes"), source))


def _notes(raw: Any, source: str) -> tuple[tuple[str, str], ...]:
    """``notes``: ``[{title, text}]``, the study file's own markdown sections (measurements from outside the study's
    runs, quoted, not recomputed), printed after the verdicts under their titles."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(n, dict) and set(n) == {"title", "text"}
                                            and all(isinstance(n[k], str) for k in n) for n in raw):
        raise ConfigError(f"study file {source}: notes should be a list of {{title: TEXT, text: MARKDOWN}}")
    return tuple((" ".join(n["title"].split()), n["text"].strip("\n")) for n in raw)


def _groups(raw: Any, source: str, pes: Sequence[str]) -> dict[str, Group]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"study file {source}: groups should be a mapping NAME -> {{pes: [...], declaration: NAME}}")
    out = {}
    for name, g in raw.items():
        if not isinstance(g, dict) or set(g) - {"pes", "declaration"}:
            raise ConfigError(f"study file {source}: groups.{name} should be {{pes: [...][, declaration: NAME]}}")
        members = _strings(g.get("pes", []), f"groups.{name}.pes", source)
        stray = [pe for pe in members if pe not in pes]
        if stray:
            raise ConfigError(f"study file {source}: groups.{name} names PE {stray[0]!r}, not in grid.pes")
        decl = g.get("declaration")
        if decl is not None and decl not in DECLARATIONS + ("any",):
            raise ConfigError(f"study file {source}: groups.{name}.declaration should be one of "
                              f"{', '.join(DECLARATIONS)}, got {decl!r}")
        out[str(name)] = Group(name=str(name), pes=members, declaration=decl)
    return out


def _flag_rules(raw: Any, source: str, datasets: Sequence[str], pes: Sequence[str]) -> tuple[FlagRule, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError(f"study file {source}: flags should be a list of {{datasets, pes, flags}}")
    out = []
    for i, r in enumerate(raw):
        if not isinstance(r, dict) or "flags" not in r or set(r) - {"datasets", "pes", "flags"}:
            raise ConfigError(f"study file {source}: flags[{i}] should be {{[datasets: [...]], [pes: [...]], flags: "
                              f"[...]}}")
        ds = _strings(r.get("datasets", []), f"flags[{i}].datasets", source)
        ps = _strings(r.get("pes", []), f"flags[{i}].pes", source)
        if set(ds) - set(datasets) or set(ps) - set(pes):
            raise ConfigError(f"study file {source}: flags[{i}] names a dataset or PE outside the grid")
        out.append(FlagRule(flags=_strings(r["flags"], f"flags[{i}].flags", source), datasets=ds, pes=ps))
    return tuple(out)


def _capacity(raw: Any, source: str, datasets: Sequence[str], pes: Sequence[str]
              ) -> tuple[tuple[tuple[str, str, str], ...], str | None]:
    if raw is None:
        return (), None
    if not isinstance(raw, dict) or set(raw) - {"checker", "cannot_represent"}:
        raise ConfigError(f"study file {source}: capacity should be {{checker: NAME, cannot_represent: {{DATASET: "
                          f"{{PE: SYMMETRY}}}}}}")
    cells = raw.get("cannot_represent") or {}
    if not isinstance(cells, dict):
        raise ConfigError(f"study file {source}: capacity.cannot_represent should be a mapping")
    out = []
    for dataset, by_pe in cells.items():
        if dataset not in datasets or not isinstance(by_pe, dict):
            raise ConfigError(f"study file {source}: capacity.cannot_represent.{dataset} should be a dataset of the "
                              f"grid mapping PE -> symmetry")
        for pe, sym in by_pe.items():
            if pe not in pes or not isinstance(sym, str):
                raise ConfigError(f"study file {source}: capacity.cannot_represent.{dataset}.{pe}: a grid PE -> a "
                                  f"symmetry name")
            out.append((str(dataset), str(pe), sym))
    checker = raw.get("checker")
    if checker is not None and not isinstance(checker, str):
        raise ConfigError(f"study file {source}: capacity.checker should be a name")
    return tuple(out), checker
