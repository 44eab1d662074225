"""``bench leaderboard --format md|csv|json|html``: one collection of runs, rendered in the format asked for.

``md`` is :func:`.render.render_leaderboard` (the committed ``LEADERBOARD.md``); ``csv`` and ``json``
are :mod:`.export`, ``html`` is :mod:`.page`; all four are deterministic for equal result files.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from .cells import leaderboard_cells
from .collect import RunRecord
from .export import cells_csv, cells_json
from .page import render_page
from .render import render_leaderboard

__all__ = ["FORMATS", "render_format"]

#: output formats; the first is the default
FORMATS: tuple[str, ...] = ("md", "csv", "json", "html")


def render_format(fmt: str, runs: Sequence[RunRecord], problems: Sequence[str], results_root: str | os.PathLike,
                  out_path: str | os.PathLike, results_label: str | None = None, reference: str | None = "none",
                  config_defaults: Mapping[str, Any] | None = None, smoke_left_out: int = 0) -> str:
    """The leaderboard of ``runs`` (from ``collect_results(results_root)``) as ``fmt`` text.

    ``smoke_left_out``: how many smoke runs (``--fast-dev-run`` / ``--limit-*-batches``;
    :func:`.collect.split_smoke`) the caller left out of ``runs``; the md, html and json headers say so.

    ``out_path``: where the text will be written (the HTML page links the run files relative to
    its folder); ``results_label``: how the header names the results folder (default: as given).
    Raises ``ValueError`` for an unknown format.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown leaderboard format {fmt!r} (choose from {', '.join(FORMATS)})")
    label = os.fspath(results_root) if results_label is None else results_label
    if fmt == "md":
        return render_leaderboard(runs, problems, results_label=label, reference=reference,
                                  config_defaults=config_defaults, smoke_left_out=smoke_left_out)
    cells = leaderboard_cells(runs, reference, config_defaults)
    if fmt == "csv":
        return cells_csv(cells)
    if fmt == "json":
        return cells_json(cells, runs, problems, label, reference, smoke_left_out=smoke_left_out)
    link_prefix = Path(os.path.relpath(Path(results_root).resolve(), Path(out_path).resolve().parent)).as_posix()
    return render_page(cells, runs, problems, label, reference, results_root, link_prefix,
                       smoke_left_out=smoke_left_out)
