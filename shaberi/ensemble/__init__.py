"""Ensemble consensus on ground-truth benchmarks: does answering N times and combining beat one answer?

    datasets/    one loader per dataset (upstream columns) → questions with gold answers and a grader
    cache        N answers per question, generated once (``generate-cache``) or imported
                 (``import-responses``), under an identity (model, dataset, N, temperature)
    strategies/  one file per consensus strategy: majority, standard, elo, council
    graders/     one file per grader: numeric, mcq, math (math-verify), llm (SimpleQA-style judge)
    evaluate     ``quick-eval``: a seeded sample served from the cache, consensus answers, grades
    gate         paired regression tests against the single-model baseline (McNemar, paired t, Holm)
    report       result files → one Markdown report; ``commands`` wires them to the CLI

Everything lands in the same tables as the chat benchmarks: members are ``answers`` rows with
``sample_index`` 0…N−1, consensus answers are ``answers`` rows with ``strategy`` set (their
``reasoning`` column holds the strategy's record as JSON: votes, ratings, rounds), grades are
``judgements`` rows (judge ``exact:<grader>`` or the judge model; score 1 or 0, or NULL when the judge's
reply could not be read or the grading call failed: no grade, never a wrong one).
"""
