"""Head-to-head judging of stored answers (``shaberi pairwise``): one module per concept; ``ratings`` turns verdicts
into Bradley–Terry ratings with intervals."""
