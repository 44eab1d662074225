"""Results collection -> deterministic leaderboard markdown."""
