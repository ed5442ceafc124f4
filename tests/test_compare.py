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
from .test_verdict import scipy_p

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
    report = compare(root, "base", "new")
    got = {c.benchmark: c for c in report.benchmarks}
    elyza, tengu, rakuda, overall = got["elyza"], got["tengu"], got["rakuda"], got["overall"]
    assert [c.benchmark for c in report.benchmarks] == ["elyza", "tengu", "rakuda", "overall"]  # Overall last
    assert elyza.verdict == "B better" and elyza.ci_low > 0 and elyza.p_adjusted < 0.05
    assert tengu.verdict == "n.s." and tengu.ci_low < 0 < tengu.ci_high and tengu.p_adjusted >= 0.05
    assert rakuda.verdict == "n.s." and rakuda.diff == 0  # nothing moved: no difference
    assert (rakuda.test, rakuda.p, rakuda.p_t, rakuda.ci_low, rakuda.ci_high) == ("drawn", 1.0, None, 0, 0)

    # Four rows tested (three benchmarks and the Overall): one family, each row at 0.05 / 4.
    level = 0.05 / 4
    assert report.family == 4 and [c.ci_level for c in report.benchmarks] == [pytest.approx(1 - level)] * 4
    d = (b["elyza"] - a["elyza"]) * 2.0  # ELYZA on the 0-10 scale
    kept = [i for i in range(80) if not 61 <= i <= 65]  # Tengu's ids 61–65 are never scored
    parts = [d, (b["tengu"] - a["tengu"])[kept].astype(float), np.zeros(40)]
    assert elyza.n == 60 and elyza.diff == pytest.approx(d.mean(), abs=1e-9) and tengu.n == 75
    # Each row's test is the sign-flip test (scipy's permutation_test on 10⁵ draws; ours draws 9,999, so the two
    # agree to their Monte Carlo error), its interval the shifts that test does not reject at 0.05 / 4.
    for c, rows in ((elyza, parts[:1]), (tengu, parts[1:2]), (overall, parts)):
        theirs = scipy_p(rows)
        assert abs(c.p - theirs) <= 4 * (max(theirs, 1e-4) / 9999) ** 0.5 + 1e-4, (c.title, c.p, theirs)
        margin = (c.ci_high - c.ci_low) / 10
        assert scipy_p(rows, c.ci_low - margin) < level <= scipy_p(rows, c.ci_low + margin), c.title
        assert scipy_p(rows, c.ci_high + margin) < level <= scipy_p(rows, c.ci_high - margin), c.title
        assert c.p_adjusted == pytest.approx(min(1.0, 4 * c.p), abs=1e-12)
    assert elyza.p_t == pytest.approx(stats.ttest_rel(b["elyza"] * 2.0, a["elyza"] * 2.0).pvalue, abs=1e-12)
    # The MDE: the effect size at which a two-sided paired t test on n questions has 80 % power at the verdict's
    # level, from scipy's noncentral t, times the differences' sd.
    n, crit = len(d), stats.t.ppf(1 - level / 2, len(d) - 1)

    def power(effect: float) -> float:
        nc = effect * np.sqrt(n)
        return stats.nct.sf(crit, n - 1, nc) + stats.nct.cdf(-crit, n - 1, nc)

    effect = optimize.brentq(lambda e: power(e) - 0.8, 0.05, 1.0)  # nct.cdf turns NaN far out
    assert elyza.mde == pytest.approx(effect * d.std(ddof=1), rel=1e-5)  # statsmodels solves to ~1e-6

    # The Overall: the mean of the three benchmarks' differences and means, the questions of all three, each
    # benchmark by its own size; Rakuda, with no spread, leaves no variance for a t test to weigh it by.
    assert overall.title == "Overall" and overall.over == ["elyza", "tengu", "rakuda"] and overall.n == 175
    assert overall.diff == pytest.approx((elyza.diff + tengu.diff + rakuda.diff) / 3, abs=1e-9)
    assert overall.mean_a == pytest.approx((elyza.mean_a + tengu.mean_a + rakuda.mean_a) / 3, abs=1e-9)
    assert overall.p_t is None and overall.verdict == "B better"


def test_compare_cli_formats_and_errors(planted):
    root = str(planted[0])
    out = shaberi("compare", "base", "new", "--format", "json", "--results-dir", root)
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert [c["verdict"] for c in body["benchmarks"]] == ["B better", "n.s.", "n.s.", "B better"]
    assert body["family"] == 4 and body["benchmarks"][-1]["title"] == "Overall"
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
    # The report of the two still stands, and says why it holds no comparison table.
    page = tmp_path / "ae.html"
    assert shaberi("report", "--tag", "a", "--compare", "e", "--out", str(page), "--results-dir",
                   str(results)).returncode == 0
    assert "Not compared: &#39;a&#39; and &#39;e&#39; share no judge" in page.read_text(encoding="utf-8")

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
                                                    "to compare with (or two judges of it: --judge-a, --judge-b)\n")
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


BASE = [3, 4, 5, 3, 4, 5, 6, 4, 3, 5]  # Rakuda scores (1–10) the judge gives each model's answer to question i
TUNED = [5, 5, 7, 6, 5, 7, 8, 5, 5, 8]
OTHER = [9, 1, 8, 2, 9, 1, 8, 2, 9, 1]


def three_models(server, tmp_path):
    """Models base, tuned and other under one tag v1, each answering by its own seed (the loopback server's
    <<answer#N>>) and scored by judge j per answer text."""
    from .conftest import write_rakuda

    texts = []
    for i in range(10):
        marks = "".join(f"<<answer#{seed}: 回答{seed}-{i}>><<judge@j?回答{seed}-{i}: FINAL SCORE: {s[i]}>>"
                        for seed, s in ((1, BASE), (2, TUNED), (3, OTHER)))
        texts.append(f"{marks} 質問{i}")
    data = write_rakuda(tmp_path / "d", texts)
    results = tmp_path / "r"
    for model, seed in (("org/base", 1), ("org/tuned", 2), ("other", 3)):
        proc = shaberi("run", "--model", model, "--tag", "v1", "--seed", str(seed), "--base-url", server.base_url,
                       "--benchmark", "rakuda", "--judge", "j", "--results-dir", str(results), "--data-dir",
                       str(data))
        assert proc.returncode == 0, proc.stderr
    return results


def test_two_models_compared_on_the_same_questions_with_a_third_in_the_tag(server, tmp_path):
    import shaberi as api

    results = three_models(server, tmp_path)
    root = ["--results-dir", str(results)]
    out = shaberi("compare", "org/base@v1", "org/tuned@v1", "--format", "json", *root)
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert (body["a"], body["b"]) == ({"tag": "v1", "model": "org/base", "label": "org/base@v1", "judge": None},
                                      {"tag": "v1", "model": "org/tuned", "label": "org/tuned@v1", "judge": None})
    (rakuda,) = body["benchmarks"]
    a, b = np.array(BASE, float), np.array(TUNED, float)
    d = b - a
    assert rakuda["n"] == 10 and (rakuda["mean_a"], rakuda["mean_b"]) == pytest.approx((a.mean(), b.mean()), abs=1e-9)
    assert rakuda["diff"] == pytest.approx(d.mean(), abs=1e-9)
    # one benchmark: no Overall row, the verdict at 0.05 by the exact sign-flip test (scipy's), its 95 % interval the
    # shifts that test does not reject
    assert rakuda["test"] == "exact" and rakuda["p"] == pytest.approx(scipy_p([d]), abs=1e-12) and body["family"] == 1
    assert scipy_p([d], rakuda["ci_low"] + 1e-6) >= 0.05 > scipy_p([d], rakuda["ci_low"] - 1e-6)
    assert scipy_p([d], rakuda["ci_high"] - 1e-6) >= 0.05 > scipy_p([d], rakuda["ci_high"] + 1e-6)
    assert rakuda["verdict"] == "B better" and rakuda["min_pairs"] == 6
    # The same sides named with --model-a/--model-b, and through the Python API.
    named = shaberi("compare", "v1", "v1", "--model-a", "org/base", "--model-b", "org/tuned", "--format", "json",
                    *root)
    assert json.loads(named.stdout)["benchmarks"] == body["benchmarks"]
    frame = api.open(results).compare("org/base@v1", "org/tuned@v1")
    assert frame.row(0, named=True)["a"] == "org/base@v1" and frame["diff"].to_list() == [rakuda["diff"]]
    table = shaberi("compare", "org/base@v1", "org/tuned@v1", *root).stdout
    assert "A = org/base@v1, B = org/tuned@v1" in table
    # A tag holding several models is one side only with the model named.
    vague = shaberi("compare", "v1", "org/tuned@v1", *root)
    assert vague.returncode == 2 and vague.stderr == (
        "error: side A 'v1' holds several models (org/base, org/tuned, other): name one, as 'org/base@v1' or with "
        "--model-a/--model-b\n")
    # The report of the two, and of the tag: one block per model, the best Overall first, each with its tokens.
    html = tmp_path / "c.html"
    assert shaberi("report", "--tag", "org/base@v1", "--compare", "org/tuned@v1", "--out", str(html),
                   *root).returncode == 0
    page = html.read_text(encoding="utf-8")
    assert "Biggest movers: org/base@v1 → org/tuned@v1" in page and "<title>shaberi report: org/base@v1 vs " \
        "org/tuned@v1</title>" in page
    assert shaberi("report", "--tag", "v1", "--out", str(html), *root).returncode == 0
    page = html.read_text(encoding="utf-8")
    assert re.findall(r"<h3>([^<]+) · v1", page) == ["org/tuned", "other", "org/base"]  # Overall 6.2, 5.0, 4.2
    view = json.loads(shaberi("view", "--tag", "v1", "--format", "json", *root).stdout)
    overall = [next(r["score"] for r in s["rows"] if r["benchmark"] == "Overall") for s in view["scores"]]
    assert [s["model"] for s in view["scores"]] == ["org/tuned", "other", "org/base"]
    assert overall == sorted(overall, reverse=True) == pytest.approx([np.mean(TUNED), np.mean(OTHER), np.mean(BASE)])
    tokens = {(t["model"], t["stage"]): t["requests"] for t in view["tokens"]}
    assert {m for m, _ in tokens} == {"org/tuned", "other", "org/base", "all models"}
    assert tokens[("org/base", "Total")] == 20 and tokens[("all models", "Total")] == 60  # 10 answers + 10 judgements


def test_a_judge_that_scored_a_question_on_one_side_only_is_left_out_of_it(server, tmp_path):
    """j1 and j2 judge both tags; j2's replies to B's answers of q0 and q1 are unreadable (null). Those two
    questions are compared on j1 alone on both sides, never one judge against the mean of two."""
    from .conftest import write_rakuda

    j1 = {1: [4, 5, 6, 4, 5, 6, 7, 4], 2: [6, 6, 7, 7, 6, 8, 8, 6]}  # by seed (tag a: 1, tag b: 2)
    j2 = {1: [6, 7, 8, 6, 7, 8, 9, 6], 2: [None, None, 9, 9, 8, 9, 10, 8]}
    texts = []
    for i in range(8):
        marks = ""
        for seed in (1, 2):
            marks += f"<<answer#{seed}: 回答{seed}-{i}>><<judge@j1?回答{seed}-{i}: FINAL SCORE: {j1[seed][i]}>>"
            reply = "読めません || 読めません" if j2[seed][i] is None else f"FINAL SCORE: {j2[seed][i]}"
            marks += f"<<judge@j2?回答{seed}-{i}: {reply}>>"
        texts.append(f"{marks} 質問{i}")
    data = write_rakuda(tmp_path / "d", texts)
    results = tmp_path / "r"
    for tag, seed in (("a", 1), ("b", 2)):
        assert shaberi("run", "--model", "m", "--tag", tag, "--seed", str(seed), "--base-url", server.base_url,
                       "--benchmark", "rakuda", "--judge", "j1", "--judge", "j2", "--results-dir", str(results),
                       "--data-dir", str(data)).returncode == 0
    body = json.loads(shaberi("compare", "a", "b", "--format", "json", "--results-dir", str(results)).stdout)
    (rakuda,) = body["benchmarks"]
    both = [[j1[s][i], j2[s][i]] if j2[2][i] is not None else [j1[s][i]] for s in (1, 2) for i in range(8)]
    a, b = np.array([np.mean(x) for x in both[:8]]), np.array([np.mean(x) for x in both[8:]])
    assert rakuda["n"] == 8 and rakuda["judge_scores_dropped"] == 2  # A's j2 scores of q0 and q1
    assert (rakuda["mean_a"], rakuda["mean_b"], rakuda["diff"]) == pytest.approx((a.mean(), b.mean(), (b - a).mean()),
                                                                                 abs=1e-9)
    assert rakuda["p"] == pytest.approx(scipy_p([b - a]), abs=1e-12)  # exact: 8 questions
    assert rakuda["p_t"] == pytest.approx(stats.ttest_rel(b, a).pvalue, abs=1e-12)
    naive = np.mean([np.mean(x) for x in ([j1[1][i], j2[1][i]] for i in range(8))])
    assert abs(naive - rakuda["mean_a"]) > 0.1  # the old pairing (every judge on each side) would differ
    table = shaberi("compare", "a", "b", "--results-dir", str(results)).stdout
    assert "note: judge scores left out, the judge having scored the question on one side only" in table


def test_too_few_pairs_give_no_verdict_however_constant_the_shift(tmp_path):
    store = Store(tmp_path)
    write_run(store, "base", {"rakuda": [3, 4]})
    write_run(store, "new", {"rakuda": [4, 5]})  # +1 on both: no spread for a t test, sign-flip p = 0.5
    (c,) = compare(tmp_path, "base", "new").benchmarks
    assert (c.n, c.min_pairs, c.verdict, c.p_t, c.p) == (2, 6, "too few", None, 0.5)
    out = shaberi("compare", "base", "new", "--results-dir", str(tmp_path))
    assert out.returncode == 0 and "note: too few for a verdict: Rakuda (2 paired, 2 moved)" in out.stdout
    # At the minimum the same constant shift is a verdict: the t statistic is undefined (its p is null, never 0);
    # the exact sign-flip test (scipy's) gives 2/2⁶ < 0.05, its interval the shift itself.
    write_run(store, "base6", {"rakuda": [3, 4, 5, 3, 4, 5]})
    write_run(store, "new6", {"rakuda": [4, 5, 6, 4, 5, 6]})
    (c,) = compare(tmp_path, "base6", "new6").benchmarks
    assert (c.n, c.verdict) == (6, "B better")
    flips = stats.permutation_test(([1.0] * 6,), np.mean, permutation_type="samples", n_resamples=10 ** 4)
    assert (c.test, c.p_t, c.ci_low, c.ci_high) == ("exact", None, 1.0, 1.0)
    assert c.p == pytest.approx(flips.pvalue) == 2 / 2 ** 6
    out = shaberi("compare", "base6", "new6", "--format", "json", "--results-dir", str(tmp_path))
    assert json.loads(out.stdout)["benchmarks"][0]["p_t"] is None
    table = shaberi("compare", "base6", "new6", "--format", "markdown", "--results-dir", str(tmp_path)).stdout
    assert "| 1.00–1.00 | 0.031 | B better |" in table
    # Eight pairs of which only five moved: a t test would reject (p 0.011), but the sign-flip test cannot (its
    # smallest p with five that moved is 2/2⁵ = 0.0625), and its interval holds 0: no verdict, nothing disagrees.
    write_run(store, "base8", {"rakuda": [5, 5, 5, 5, 5, 5, 5, 5]})
    write_run(store, "new8", {"rakuda": [5, 5, 5, 9, 9, 9, 9, 9]})
    (c,) = compare(tmp_path, "base8", "new8").benchmarks
    assert (c.n, c.moved_pairs, c.verdict) == (8, 5, "too few")
    assert c.p == pytest.approx(scipy_p([np.array([0, 0, 0, 4, 4, 4, 4, 4.0])])) == 2 / 2 ** 5
    assert c.ci_low <= 0 <= c.ci_high and c.p_t < 0.05


def test_sides_named_twice_or_two_ways_are_refused_and_csv_keeps_the_numbers(server, tmp_path):
    import csv
    import io

    results = three_models(server, tmp_path)
    root = ["--results-dir", str(results)]
    both = shaberi("compare", "v1", "v1", "--model", "org/base", "--model-a", "org/tuned", *root)
    assert both.returncode == 2 and both.stderr.startswith("error: --model names the model of both sides, --model-a")
    twice = shaberi("compare", "org/base@v1", "org/tuned@v1", "--model-a", "org/base", *root)
    assert twice.returncode == 2 and "is MODEL@TAG, and --model-a names the model too" in twice.stderr
    missing = shaberi("compare", "m9@v1", "org/tuned@v1", *root)
    assert missing.returncode == 2 and missing.stderr == (
        "error: no run tagged 'm9@v1', nor model 'm9' in tag 'v1' (it holds org/base, org/tuned, other)\n")
    # A tag holding '@' beside a model named like its first part: two readings, refused.
    data = tmp_path / "d"
    for model, tag in (("a", "b@v1"), ("a@b", "v1")):
        assert shaberi("run", "--model", model, "--tag", tag, "--seed", "1", "--base-url", server.base_url,
                       "--benchmark", "rakuda", "--judge", "j", *root, "--data-dir", str(data)).returncode == 0
    ambiguous = shaberi("compare", "a@b@v1", "org/base@v1", *root)
    assert ambiguous.returncode == 2 and "side A 'a@b@v1' can be read 2 ways: model 'a', tag 'b@v1'; model 'a@b', " \
        "tag 'v1'" in ambiguous.stderr
    assert shaberi("compare", "b@v1", "org/base@v1", "--model-a", "a", *root).returncode == 0  # said once: fine
    # csv: the numbers as computed (not the table's cells), and what they rest on on every row.
    out = shaberi("compare", "org/base@v1", "org/tuned@v1", "--format", "csv", *root)
    (row,) = list(csv.DictReader(io.StringIO(out.stdout)))
    body = json.loads(shaberi("compare", "org/base@v1", "org/tuned@v1", "--format", "json", *root).stdout)
    (rakuda,) = body["benchmarks"]
    assert (row["a"], row["b"], row["verdict"]) == ("org/base@v1", "org/tuned@v1", "B better")
    assert float(row["diff"]) == rakuda["diff"] and float(row["ci_low"]) == rakuda["ci_low"]
    assert float(row["p"]) == rakuda["p"] and row["notes"].startswith("judges: j")


def test_a_judge_that_scored_nothing_on_a_side_is_no_judge_of_it(server, tmp_path):
    """Judge k failed every call on m1's answers: for the comparison it judged m2 alone, and the header says so."""
    from shaberi.testing import LoopbackServer

    from .conftest import write_rakuda

    data = write_rakuda(tmp_path / "d", [f"質問{i}" for i in range(6)])
    results = tmp_path / "r"
    with LoopbackServer() as broken:
        broken.fail_next(*[500] * 20)
        assert shaberi("run", "--model", "m1", "--tag", "t", "--seed", "1", "--base-url", server.base_url,
                       "--benchmark", "rakuda", "--judge", "j", "--judge", f"k@{broken.base_url}", "--max-retries", "0",
                       "--results-dir", str(results), "--data-dir", str(data)).returncode == 0
    assert shaberi("run", "--model", "m2", "--tag", "t", "--seed", "2", "--base-url", server.base_url, "--benchmark",
                   "rakuda", "--judge", "j", "--judge", "k", "--results-dir", str(results), "--data-dir",
                   str(data)).returncode == 0
    basis = json.loads(shaberi("compare", "m1@t", "m2@t", "--format", "json", "--results-dir", str(results)
                               ).stdout)["basis"]
    assert (basis["judges"], basis["judges_only_a"], basis["judges_only_b"]) == (["j"], [], ["k"])


def test_a_score_that_is_not_a_number_is_a_null_score_not_a_traceback(tmp_path):
    """A hand-written or corrupt table holding NaN or inf: those questions are dropped as null scores, counted."""
    store = Store(tmp_path)
    write_run(store, "base", {"rakuda": [3, 4, 5, 3, 4, 5, 6, 4, 3, 5]})
    write_run(store, "new", {"rakuda": [4, 5, float("nan"), 4, float("inf"), 6, 7, 5, 4, 6]})
    out = shaberi("compare", "base", "new", "--format", "json", "--results-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    (rakuda,) = json.loads(out.stdout)["benchmarks"]
    assert (rakuda["n"], rakuda["dropped_b"], rakuda["diff"]) == (8, {"null score": 2}, 1.0)
