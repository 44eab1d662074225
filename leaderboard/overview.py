"""The leaderboard's overview (issue #72): one matrix, PE variants × datasets, of the primary metric.

The matrix states what the sections state; nothing here computes a number or a test. Each section row hands
over one :class:`Entry` (its primary-metric mean as the section prints it, the number of seeds that report
it, and the section's own verdict on its paired difference to the reference row): the markdown's from the
very computation that prints the section's ``*`` (:mod:`.render`), the page's from its cells (:mod:`.cells`,
whose ``delta.significant`` is the same rule). This module lays them out:

* a row is one PE variant with its provenance tag: the sections' row label (``ape``, ``ape+rpt``,
  ``ape (epochs=4)``, ``ape @abc1234``). A variant that a section splits by configuration or commit stays
  split (its tagged rows are rows of their own), so no cell stands for what a section keeps apart. Rows of
  the reference variants come first (in the order ``--reference`` names them), then the others in the
  sections' order (``row_order``: :func:`.render.pe_sort_key`), then by tag;
* a column is one dataset (sorted, as the sections); a dataset whose runs use several models gets one column
  per model (its title names the model), since a section row is one (model, variant);
* a cell: the entry, marked ``*`` when its section marks the difference significant, or as the reference row;
  none (``—``) where the variant has no run on that dataset.

Also the sentence under the matrix (:func:`overview_note`) and GitHub's heading anchors
(:func:`section_anchors`), which the markdown's column headers link to. This module imports nothing of the
leaderboard (the renderers import it); equal inputs give equal output.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any, Callable, Sequence

__all__ = ["Entry", "Overview", "build_overview", "overview_note", "markdown_anchor", "section_anchors"]

RowKey = tuple[str, str, str]  # (pe, variant label, provenance tag)
ColumnKey = tuple[str, str]  # (dataset, model)


@dataclass(frozen=True)
class Entry:
    """One section row as the overview shows it."""

    dataset: str
    model: str
    pe: str
    label: str  # the PE variant (``ape+rpt``)
    tag: str  # "" or the provenance tag (``@abc1234``, ``(epochs=4)``)
    metric: str  # the row's primary metric
    percent: bool  # shown × 100
    mean_text: str  # the mean as the section prints it (``—`` when no seed reports it)
    n: int  # seeds that report the metric
    significant: bool  # the section's ``*``
    is_reference: bool  # the row the section compares with
    reference_note: str | None = None  # why the row has no comparison, as the section says (``no none row``)
    mean: float | None = None  # the raw mean (the page's ``data-v``)
    link: str = ""  # the page: the id of the row in its section's table
    tip: str = ""  # the page: hover text (the section's Δ)

    @property
    def row(self) -> RowKey:
        return (self.pe, self.label, self.tag)

    @property
    def column(self) -> ColumnKey:
        return (self.dataset, self.model)

    @property
    def text(self) -> str:
        """``72.6* (n=5)``, ``74.7 (n=5, ref)``: the cell as plain text."""
        return (self.mean_text + ("*" if self.significant else "")
                + f" (n={self.n}{', ref' if self.is_reference else ''})")


@dataclass(frozen=True)
class Overview:
    """The matrix: ``rows`` and ``columns`` in display order; ``cells[(row, column)]``, none where no run."""

    rows: list[RowKey]
    columns: list[ColumnKey]
    split: frozenset[str]  # datasets with one column per model
    cells: dict[tuple[RowKey, ColumnKey], Entry]
    reference: str | None

    @staticmethod
    def row_label(row: RowKey) -> str:
        """The label the sections give the row (``ape @abc1234``)."""
        return f"{row[1]} {row[2]}" if row[2] else row[1]

    def column_entries(self, column: ColumnKey) -> list[Entry]:
        return [self.cells[(r, column)] for r in self.rows if (r, column) in self.cells]

    def column_title(self, column: ColumnKey) -> str:
        return f"{column[0]} · {column[1]}" if column[0] in self.split else column[0]

    def column_metrics(self, column: ColumnKey) -> list[str]:
        return sorted({e.metric for e in self.column_entries(column)})

    def column_reference(self, column: ColumnKey) -> str:
        """What the column's marks compare with: ``vs none`` (the reference rows' labels), else why nothing
        (the section's note: ``no rope-axial or none row``)."""
        entries = self.column_entries(column)
        refs = sorted({self.row_label(e.row) for e in entries if e.is_reference})
        if refs:
            return "vs " + ", ".join(refs)
        if not self.reference:
            return "no reference"
        return next((e.reference_note for e in entries if e.reference_note), None) or "no reference row"


def build_overview(entries: Sequence[Entry], reference: str | None,
                   row_order: Callable[[str, str], Any]) -> Overview:
    """The overview of the section rows ``entries`` made with ``reference``; ``row_order(pe, label)``: the
    sections' sort key of a variant."""
    matrix: dict[tuple[RowKey, ColumnKey], Entry] = {}
    models: dict[str, set[str]] = {}
    for e in entries:
        matrix.setdefault((e.row, e.column), e)  # one per section row: (dataset, model, pe, label, tag) is unique
        models.setdefault(e.dataset, set()).add(e.model)
    candidates = reference.split(",") if reference else []
    rank: dict[RowKey, int] = {}
    for (row, _), e in matrix.items():
        for i, c in enumerate(candidates):  # a reference row is the variant `c`, with the row's token kind
            if e.is_reference and (e.label == c or e.label.startswith(c + "+")):
                rank[row] = min(rank.get(row, i), i)
                break
    rows = sorted({row for row, _ in matrix},
                  key=lambda r: (rank.get(r, len(candidates)), row_order(r[0], r[1]), r[2]))
    return Overview(rows=rows, columns=sorted({column for _, column in matrix}),
                    split=frozenset(d for d, m in models.items() if len(m) > 1), cells=matrix, reference=reference)


def overview_note(ov: Overview, code: Callable[[str], str], text: Callable[[str], str],
                  static: Callable[[str], str]) -> str:
    """The sentence under the matrix: what a cell holds, what the mark means (the sections' test and level,
    no correction across cells) and each column's primary metric, model and reference. ``code`` formats a
    code span, ``text`` a string from a file, ``static`` the rest (markdown: as it is; HTML: escaped)."""
    columns = "; ".join(
        f"{text(ov.column_title(col))}: {', '.join(code(m) for m in ov.column_metrics(col))}"
        f"{' (%)' if all(e.percent for e in ov.column_entries(col)) else ''}, {text(col[1])}, "
        f"{text(ov.column_reference(col))}" for col in ov.columns)
    if ov.reference:
        mark = (f"{code('*')}: the row's paired per-seed difference to its section's reference row of the same "
                f"model and token kind ({code('ref')}) is significant as the section's {code('*')} marks it: "
                + static("the paired Student-t 95 % interval excludes 0 and the paired t-test p < 0.05, each cell "
                         "tested on its own, with no correction for multiple comparisons across cells"))
    else:
        mark = f"no reference is set ({code('--reference')}), so no cell is marked"
    return (f"Each cell is its section's primary-metric mean over seeds (as the section prints it: accuracies and "
            f"mAP in % with 1 decimal, other metrics with 4 decimals) with the number of seeds {code('n')} that "
            f"report it; {mark}; {code('—')}: the variant has no run on that dataset. Columns (primary metric, "
            f"model, reference): {columns}.")


def markdown_anchor(text: str) -> str:
    """The anchor GitHub gives a heading ``text``: lower case, every character but letters, digits, marks,
    ``_``, ``-`` and spaces dropped, spaces as ``-`` (a repeated anchor: :func:`section_anchors`)."""
    kept = "".join(ch for ch in text.lower()
                   if ch.isalnum() or ch in "_- " or unicodedata.category(ch).startswith("M"))
    return kept.replace(" ", "-")


def section_anchors(datasets: Sequence[str], before: Sequence[str]) -> dict[str, str]:
    """dataset -> the anchor of its section heading (``## <dataset>``, in the order given), the headings
    ``before`` it counted: GitHub appends ``-1``, ``-2``, ... to an anchor already taken, in document order."""
    taken: set[str] = set()
    counts: dict[str, int] = {}

    def unique(heading: str) -> str:
        base = markdown_anchor(heading)
        slug = base
        while slug in taken:
            counts[base] = counts.get(base, 0) + 1
            slug = f"{base}-{counts[base]}"
        taken.add(slug)
        return slug

    for heading in before:
        unique(heading)
    return {d: unique(d) for d in datasets}
