"""Results collection -> deterministic leaderboard markdown (docs/architecture.md §5).

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
