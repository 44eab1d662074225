"""Plans made from a study file: the ``bench sweep`` command lines of its grid (:func:`sweep_argvs`) and the study
with a user's own PEs added (:func:`with_pes`, ``bench study run/report --pe``)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Mapping, Sequence

from pebench.studies.spec import Arm, Group, Study, parse_claim, substitute_pe, template_datasets

__all__ = ["sweep_argvs", "with_pes"]


def with_pes(study: Study, extra: Mapping[str, Sequence[str]],
             cannot: Mapping[tuple[str, str], str] | None = None, only_new: bool = False,
             datasets: Mapping[str, Sequence[str]] | None = None) -> Study:
    """``study`` with PEs added to its grid (a user's own PE, ``--pe``): ``extra`` maps each new PE to the groups
    it joins (the CLI decides them from the PE's declarations); its claims are the templates of those groups;
    ``cannot``: (dataset, PE) -> symmetry for the new cells the capacity checker found out of reach; ``only_new``:
    keep only the new PEs' claims (their own Holm families: the committed verdicts are not re-adjusted);
    ``datasets``: the datasets a new PE runs on, when not all (a PE that needs a grid skips the token-set datasets)."""
    new = [pe for pe in extra if pe not in study.pes]
    if not new:
        return study
    groups = {g.name: Group(g.name, g.pes + tuple(pe for pe in new if g.name in extra[pe]), g.declaration)
              for g in study.groups}
    claims = list(study.claims)
    own = {pe: tuple(d for d in study.datasets if d in (datasets or {}).get(pe, study.datasets)) for pe in new}
    for i, raw in study.templates:
        group = groups[str(raw["each"])]
        for pe in new:
            if pe in group.pes and set(template_datasets(raw)) <= set(own[pe]):
                claims.append(parse_claim(substitute_pe(raw, pe), i, study.source))
    if only_new:
        claims = [c for c in claims[len(study.claims):]]
    families = tuple(dict.fromkeys(c.family for c in claims if c.test != "not-informative"))
    pe_datasets = study.pe_datasets + tuple((pe, ds) for pe, ds in own.items() if ds != study.datasets)
    return replace(study, pes=study.pes + tuple(new), groups=tuple(groups.values()), claims=tuple(claims),
                   families=families, pe_datasets=pe_datasets, own_pes=study.own_pes + tuple(new),
                   cannot_represent=study.cannot_represent + tuple(
                       (d, p, sym) for (d, p), sym in sorted((cannot or {}).items())))


def sweep_argvs(study: Study, arm: Arm, results: str, pes: Sequence[str] | None = None,
                seeds: Sequence[int] | None = None, workers: int | None = None) -> list[list[str]]:
    """The ``bench sweep`` command lines of one arm (``results``: the folder the study's runs go to): one per group
    of PEs that run on the same datasets with the same added flags (``pe_flags``, ``flags``), in the grid's order; a
    PE whose flags differ between its datasets runs one sweep per set of datasets that share its flags."""
    out = str(Path(results) / arm.out) if arm.out not in ("", ".") else str(results)
    groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for pe in pes or study.pes:
        by_flags: dict[tuple[str, ...], list[str]] = {}
        for d in study.datasets_of(pe) if pe in study.pes else study.datasets:
            by_flags.setdefault(study.flags_for(d, pe), []).append(d)
        for flags, ds in by_flags.items():
            groups.setdefault((tuple(ds), flags), []).append(pe)
    return [["sweep", "--datasets", ",".join(ds), "--pes", ",".join(group),
             "--seeds", ",".join(str(s) for s in (seeds or study.seeds)), "--out", out,
             "--workers", str(workers or study.workers), *study.recipe, *arm.flags, *flags]
            for (ds, flags), group in groups.items()]
