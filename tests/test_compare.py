"""`shaberi compare`: a planted difference is found, a null difference is not; numbers match scipy."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from scipy import optimize, stats

from shaberi.reports.compare import compare
from shaberi.tables.store import Store

from .conftest import query, shaberi

T = 1_700_000_000_000_000


def write_run(store: Store, tag: str, scores: dict[str, list[float]]) -> None:
    run_id = f"{tag}__m"
    store.write_part("runs", run_id, [{"run_id": run_id, "tag": tag, "base_tag": tag, "run_index": 1, "model": "m",
                                       "status": "complete", "created_at": T, "updated_at": T}])
    store.write_part("judgements", run_id, [
        {"run_id": run_id, "benchmark": bench, "question_id": str(i), "sample_index": 0, "strategy": "",
         "judge": "j", "score": float(s), "created_at": T}
        for bench, values in scores.items() for i, s in enumerate(values)])


@pytest.fixture
def planted(tmp_path):
    rng = np.random.default_rng(7)
    a = {"elyza": rng.integers(1, 5, 60), "tengu": rng.integers(2, 9, 80), "rakuda": rng.integers(2, 9, 40)}
    b = {
        "elyza": np.minimum(a["elyza"] + (rng.random(60) < 0.7), 5),  # most questions gain a point (+2 on 0-10)
        "tengu": np.clip(a["tengu"] + rng.choice([-1, 0, 1], 80), 0, 10),  # noise, no shift
        "rakuda": a["rakuda"],  # identical
    }
    store = Store(tmp_path)
    write_run(store, "base", {k: list(v) for k, v in a.items()})
    write_run(store, "new", {k: list(v) for k, v in b.items()})
    return tmp_path, a, b


def test_planted_difference_is_detected_and_null_differences_are_not(planted):
    root, a, b = planted
    got = {c.benchmark: c for c in compare(root, "base", "new").benchmarks}
    elyza, tengu, rakuda = got["elyza"], got["tengu"], got["rakuda"]
    assert elyza.verdict == "B better" and elyza.ci_low > 0 and elyza.p_wilcoxon_holm < 0.05
    assert tengu.verdict == "n.s." and tengu.ci_low < 0 < tengu.ci_high and tengu.p_wilcoxon_holm >= 0.05
    assert rakuda.verdict == "n.s." and rakuda.diff == 0 and rakuda.p_wilcoxon == 1.0

    d = (b["elyza"] - a["elyza"]) * 2.0  # ELYZA on the 0-10 scale
    assert elyza.n == 60 and elyza.diff == pytest.approx(d.mean(), abs=1e-9)
    assert elyza.p_wilcoxon == pytest.approx(stats.wilcoxon(d).pvalue, abs=1e-12)
    assert elyza.p_t == pytest.approx(stats.ttest_rel(b["elyza"] * 2.0, a["elyza"] * 2.0).pvalue, abs=1e-12)
    # The interval is adjusted for the three benchmarks (Bonferroni), as the verdict read off it is.
    boot = stats.bootstrap((d,), np.mean, confidence_level=1 - 0.05 / 3, n_resamples=9999, method="BCa",
                           random_state=0)
    assert elyza.ci_level == pytest.approx(1 - 0.05 / 3)
    assert (elyza.ci_low, elyza.ci_high) == pytest.approx(tuple(boot.confidence_interval), abs=1e-12)
    # Holm over the three benchmarks' Wilcoxon p-values (the smallest is multiplied by 3).
    assert elyza.p_wilcoxon_holm == pytest.approx(min(1.0, 3 * elyza.p_wilcoxon), abs=1e-12)
    # The MDE: the effect size at which a two-sided paired t test on n questions has 80 % power at the verdict's
    # level (α = 0.05 / 3, as the interval's), from scipy's noncentral t, times the differences' sd.
    n, crit = len(d), stats.t.ppf(1 - 0.05 / 3 / 2, len(d) - 1)

    def power(effect: float) -> float:
        nc = effect * np.sqrt(n)
        return stats.nct.sf(crit, n - 1, nc) + stats.nct.cdf(-crit, n - 1, nc)

    effect = optimize.brentq(lambda e: power(e) - 0.8, 0.05, 1.2)  # nct.cdf turns NaN far out
    assert elyza.mde == pytest.approx(effect * d.std(ddof=1), rel=1e-5)  # statsmodels solves to ~1e-6


def test_compare_cli_formats_and_errors(planted):
    root = str(planted[0])
    out = shaberi("compare", "base", "new", "--format", "json", "--results-dir", root)
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert [c["verdict"] for c in body["benchmarks"]] == ["B better", "n.s.", "n.s."]
    assert body["basis"]["judges"] == ["j"] and body["basis"]["passes"] == []
    table = shaberi("compare", "base", "new", "--format", "markdown", "--results-dir", root)
    assert "| ELYZA-tasks-100 | 60 |" in table.stdout
    missing = shaberi("compare", "base", "nope", "--results-dir", root)
    assert missing.returncode == 2 and "no run tagged 'nope'" in missing.stderr


def test_like_for_like_judges_passes_and_dropped_questions_over_real_runs(server, tmp_path):
    """Byte-identical answers, one tag judged by j1 and the other by j1 and a lenient j2, and the passes on one
    side only: no difference, and the table says what it compared on and what it left out."""
    from .conftest import write_rakuda

    texts = [f"<<judge@j1: FINAL SCORE: {s}>> <<judge@j2: FINAL SCORE: 10>> 質問{i}" for i, s in enumerate([3, 5, 7,
                                                                                                          4, 6, 2])]
    looping = "<<answer: " + "\\n".join(["同じ行を繰り返します。"] * 6) + ">> "
    texts[0] = looping + texts[0]
    results = tmp_path / "r"

    def run(tag: str, data, *args: str) -> None:
        proc = shaberi("run", "--model", "m", "--tag", tag, "--base-url", server.base_url, "--benchmark", "rakuda",
                       "--max-retries", "0", "--results-dir", str(results), "--data-dir", str(data), *args)
        assert proc.returncode in (0, 1), proc.stderr

    same = write_rakuda(tmp_path / "same", texts)
    run("a", same, "--judge", "j1")
    run("b", same, "--judge", "j1", "--judge", "j2", "--passes", "repetition")
    out = shaberi("compare", "a", "b", "--format", "json", "--results-dir", str(results))
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert query_answers_identical(results)
    (rakuda,) = body["benchmarks"]
    assert (rakuda["n"], rakuda["diff"], rakuda["verdict"]) == (6, 0.0, "n.s.")
    basis = body["basis"]
    assert (basis["judges"], basis["judges_only_b"], basis["passes"]) == (["j1"], ["j2"], [])
    assert [p.split("@")[0] for p in basis["passes_only_b"]] == ["repetition"]
    table = shaberi("compare", "a", "b", "--results-dir", str(results))
    assert "judges: j1 (left out, on one side only: B's j2)" in table.stdout
    assert "passes: none (left out, on one side only: B's repetition@" in table.stdout
    # Without the like-for-like rule B would have looked better: j2 gives every answer 10.
    pooled = query_scores(results)
    assert pooled["b"] > pooled["a"] + 2

    # An answer error on one side, a question judged on neither: dropped, counted, named.
    server.fail_next(401)  # one answer of the same questions fails (a marker would make it another question)
    run("c", same, "--judge", "j1")
    partly = write_rakuda(tmp_path / "partly", texts)
    run("d", partly)
    run("d", partly, "--stages", "judge", "--judge", "j1", "--limit", "4")
    body = json.loads(shaberi("compare", "a", "c", "--format", "json", "--results-dir", str(results)).stdout)
    assert body["benchmarks"][0]["dropped_b"] == {"answer error": 1} and body["benchmarks"][0]["n"] == 5
    body = json.loads(shaberi("compare", "d", "a", "--format", "json", "--results-dir", str(results)).stdout)
    assert body["benchmarks"][0]["dropped_a"] == {"not judged": 2} and body["benchmarks"][0]["dropped_b"] == {}
    # Nothing in common: refused with the reason.
    run("e", same, "--judge", "j2")
    refused = shaberi("compare", "a", "e", "--results-dir", str(results))
    assert refused.returncode == 2 and "share no judge" in refused.stderr

    # Another data file under the same ids (ELYZA's ids are row numbers): q0–q2 are other questions now. They
    # are never paired, in compare or in the report's movers, and both say so.
    run("f", write_rakuda(tmp_path / "other", [f"別の質問{i}" for i in range(3)] + texts[3:]), "--judge", "j1")
    body = json.loads(shaberi("compare", "a", "f", "--format", "json", "--results-dir", str(results)).stdout)
    assert body["benchmarks"][0]["n"] == 3
    assert body["benchmarks"][0]["dropped_a"] == body["benchmarks"][0]["dropped_b"] == {"other question text": 3}
    out = tmp_path / "f.html"
    assert shaberi("report", "--tag", "a", "--compare", "f", "--out", str(out), "--results-dir",
                   str(results)).returncode == 0
    html = out.read_text(encoding="utf-8")
    assert "a asked 6 questions, f 6, 3 of them the same" in html
    assert "3 questions asked under one id with other texts (other data files?) left out" in html
    assert not re.search(r"rakuda / q[012]:", html)  # never a mover
    run("g", write_rakuda(tmp_path / "all-other", [f"別の質問{i}" for i in range(6)]), "--judge", "j1")
    refused = shaberi("compare", "a", "g", "--results-dir", str(results))
    assert refused.returncode == 2 and "rakuda: no question scored on both sides (6 share an id but not the " \
        "text: other data files?)" in refused.stderr


def query_answers_identical(results) -> bool:
    from .conftest import query

    pairs = query(results, "SELECT x.content = y.content FROM answers x JOIN runs rx ON rx.run_id = x.run_id "
                           "JOIN answers y USING (benchmark, question_id) JOIN runs ry ON ry.run_id = y.run_id "
                           "WHERE rx.tag = 'a' AND ry.tag = 'b'")
    return len(pairs) == 6 and all(same for (same,) in pairs)


def query_scores(results) -> dict[str, float]:
    from .conftest import query

    return dict(query(results, "SELECT tag, score FROM benchmark_scores WHERE judge = '*'"))


def test_a_run_on_both_sides_counts_on_both(server, tmp_path):
    """A family against one of its own members: the shared run is on both sides. A tag against itself is
    refused. One data file: each run answers by its seed, the judge scores each answer."""
    from .conftest import write_rakuda

    results = tmp_path / "r"
    scores = {1: [5, 3, 4], 2: [4, 2, 2]}  # by seed
    data = write_rakuda(tmp_path / "d", ["".join(f"<<answer#{seed}: 回答{seed}-{i}>><<judge@j1?回答{seed}-{i}: "
                                                 f"FINAL SCORE: {s[i]}>>" for seed, s in scores.items()) + f" 質問{i}"
                                         for i in range(3)])
    for seed in scores:
        assert shaberi("run", "--model", "m", "--tag", f"fam-run{seed}", "--base-url", server.base_url, "--benchmark",
                       "rakuda", "--judge", "j1", "--seed", str(seed), "--results-dir", str(results), "--data-dir",
                       str(data)).returncode == 0
    body = json.loads(shaberi("compare", "fam-run1", "fam", "--format", "json", "--results-dir",
                              str(results)).stdout)
    (rakuda,) = body["benchmarks"]
    assert (rakuda["mean_a"], rakuda["mean_b"]) == pytest.approx((4.0, 10 / 3))  # B: both runs, per question
    same = shaberi("compare", "fam-run1", "fam-run1", "--results-dir", str(results))
    assert same.returncode == 2 and same.stderr == ("error: both sides are 'fam-run1' (m): name another tag or model "
                                                    "to compare with\n")
    # A member asked another text under one id (q2 of another data file): within the family that id is not one
    # question, and it is never paired.
    lines = (data / "ja" / "rakuda.jsonl").read_text(encoding="utf-8").splitlines()
    (tmp_path / "o" / "ja").mkdir(parents=True)
    (tmp_path / "o" / "ja" / "rakuda.jsonl").write_text("\n".join([*lines[:2], lines[2].replace("質問2", "別の質問2")]),
                                                        encoding="utf-8")
    assert shaberi("run", "--model", "m", "--tag", "fam-run3", "--base-url", server.base_url, "--benchmark",
                   "rakuda", "--judge", "j1", "--seed", "3", "--results-dir", str(results), "--data-dir",
                   str(tmp_path / "o")).returncode == 0
    body = json.loads(shaberi("compare", "fam-run1", "fam", "--format", "json", "--results-dir",
                              str(results)).stdout)
    (rakuda,) = body["benchmarks"]
    assert rakuda["n"] == 2 and rakuda["dropped_a"] == rakuda["dropped_b"] == {"other question text": 1}
    # The same questions from a file with CRLF line ends and trailing blanks: still one question each.
    (tmp_path / "crlf" / "ja").mkdir(parents=True)
    (tmp_path / "crlf" / "ja" / "rakuda.jsonl").write_text("\n".join(
        line.replace(" 質問", "\\r\\n質問").replace('"}', ' "}') for line in lines), encoding="utf-8")
    assert shaberi("run", "--model", "m", "--tag", "crlf", "--base-url", server.base_url, "--benchmark", "rakuda",
                   "--judge", "j1", "--seed", "1", "--results-dir", str(results), "--data-dir",
                   str(tmp_path / "crlf")).returncode == 0
    assert "\r\n" in query(results, "SELECT turns[1] FROM questions JOIN runs USING (run_id) WHERE tag = 'crlf' "
                                    "AND question_id = 'q0'")[0][0]
    body = json.loads(shaberi("compare", "fam-run1", "crlf", "--format", "json", "--results-dir",
                              str(results)).stdout)
    assert body["benchmarks"][0]["n"] == 3 and body["benchmarks"][0]["diff"] == 0
