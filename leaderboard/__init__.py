"""Everything that reads result files (docs/architecture.md §5), without importing torch.

* :mod:`.collect`, :mod:`.render`, :mod:`.stats`: ``results.json`` files -> deterministic leaderboard markdown;
* :mod:`.runs`: ``bench runs [show RUN]``; :mod:`.summary`: the plain-text tables ``bench run`` prints at the end;
* :mod:`.curves`: training curves from ``metrics.csv`` (``curves.png``, the leaderboard's comparison plot);
* :mod:`.cells`: the leaderboard as data (one record per table row); :mod:`.export` (CSV, JSON), :mod:`.page`
  and :mod:`.svg` (one static HTML page), :mod:`.formats` (``bench leaderboard --format``);
* :mod:`.check`: ``bench leaderboard --check DIR``, validation of a results folder before it is merged;
* :mod:`.text`: strings from result files made safe where they are shown (escaped for HTML, relative
  percent-encoded links, control characters escaped for the terminal): a result file may come from anyone.

Everything shown is read from the files (``bench run`` records what only the PE and dataset classes
know, e.g. ``pe_label`` and ``dataset_info``); of pebench this package imports only ``pebench.core``
(``tests/test_import_weight.py`` checks it).

Entry points::

    from pebench.leaderboard import collect_results, render_leaderboard, write_leaderboard
    runs, problems = collect_results("runs/")          # never raises on a bad file
    text = render_leaderboard(runs, problems)            # markdown, deterministic
    text = write_leaderboard("runs/", "LEADERBOARD.md")  # collect + render + atomic write
"""
from .collect import REQUIRED_KEYS, RunRecord, collect_results
from .render import CANONICAL_PE_ORDER, pe_sort_key, render_leaderboard, write_leaderboard

__all__ = [
    "CANONICAL_PE_ORDER",
    "REQUIRED_KEYS",
    "RunRecord",
    "collect_results",
    "pe_sort_key",
    "render_leaderboard",
    "write_leaderboard",
]
