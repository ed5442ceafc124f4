"""Reading stored results for people: scores (``view``), paired comparisons (``compare``), the original
leaderboard (``leaderboard``), the terminal browser (``inspector``, ``tui``), the HTML report (``html``) and
the JSONL + manifest export (``export``)."""
