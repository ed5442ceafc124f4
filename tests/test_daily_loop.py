"""The README's daily loop, end to end from the command line on the loopback server: two models under one tag as
``--runs 3`` families, the seed's own commands on stored answers (rejudge, passes, reprocess by the family's base tag,
no ``--runs``, no ``--base-url``), then every reader by one selector grammar (TAG, MODEL@TAG, comma lists), with the
calls counted on the server: the candidate is never called after generation; then a legacy import and a run judged
with the original's prompts on one leaderboard. And a family whose member has nothing usable finishes."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from shaberi.judging import promptsets
from shaberi.testing import LoopbackServer

from .conftest import query, shaberi
from .test_pairwise import write_data

GPT41 = "gpt-4.1-2025-04-14"

N = 6  # Rakuda questions


def _models_called(server) -> Counter[str]:
    return Counter(r["model"] for r in server.replies())


def test_two_models_under_one_tag_through_every_reader(server, tmp_path: Path, data_dir: Path) -> None:
    data, results, url = write_data(tmp_path / "data", N), str(tmp_path / "r"), server.base_url
    common = ["--benchmark", "rakuda", "--results-dir", results]
    for m in ("m1", "m2"):
        made = shaberi("run", "--model", m, "--base-url", url, "--tag", "v1", "--runs", "3", "--judge", "j1",
                       "--data-dir", str(data), *common)
        assert made.returncode == 0, made.stderr
    assert _models_called(server) == {"m1": 3 * N, "m2": 3 * N, "j1": 2 * 3 * N}
    server.reset()

    # The seed's commands verbatim: a family by its base tag, no --runs, no --base-url.
    rejudged = shaberi("run", "--model", "m1", "--tag", "v1", "--rejudge", "--judge-model", f"j2@{url}", *common)
    assert rejudged.returncode == 0, rejudged.stderr
    assert rejudged.stdout.count("judged ") == 3
    passed = shaberi("run", "--model", "m1", "--tag", "v1", "--passes", "repetition", *common)
    assert passed.returncode == 0 and "on the stored answers of --tag v1" in passed.stderr, passed.stderr
    everyone = shaberi("run", "--tag", "v1", "--rejudge", "--judge", f"j2@{url}", *common)  # each model of the tag
    assert everyone.returncode == 0 and everyone.stdout.count("judged ") == 6, everyone.stderr
    reprocessed = shaberi("run", "--model", "m2", "--tag", "v1", "--reprocess", "--results-dir", results)
    assert reprocessed.returncode == 0 and reprocessed.stdout.count("reprocessed run v1-run") == 3
    first = shaberi("run", "--model", "m2", "--tag", "v1", "--runs", "1", "--rejudge", "--judge", f"j3@{url}", *common)
    assert first.returncode == 0 and first.stdout.count("judged ") == 1, first.stdout  # the family's first run alone
    # rejudge asks again: m1's runs twice (by m1, then by the tag), m2's once; the candidate never
    assert _models_called(server) == {"j2": 3 * N * 3, "j3": N}
    assert query(Path(results), "SELECT count(*) FROM judgements WHERE judge = 'j2'")[0][0] == 2 * 3 * N
    assert query(Path(results), "SELECT count(DISTINCT run_id) FROM pass_deltas")[0][0] == 3

    # A first query by tag and model: the scores and cost views carry both.
    scored = shaberi("sql", "SELECT judge, count(*) FROM scores WHERE tag = 'v1-run1' AND model = 'm1' GROUP BY 1 "
                     "ORDER BY 1", "--format", "csv", "--results-dir", results)
    assert scored.returncode == 0 and scored.stdout.split() == ["judge,count_star()", f"j1,{N}", f"j2,{N}"]
    assert query(Path(results), "SELECT sum(requests) FROM cost WHERE tag = 'v1-run2' AND run_model = 'm2' AND "
                                "model = 'm2'")[0][0] == N

    # Every reader by the same names.
    shown = shaberi("view", "--tag", "m1@v1,m2@v1", "--format", "json", "--results-dir", results)
    assert shown.returncode == 0, shown.stderr
    assert [[s["model"] for s in body["scores"]] for body in json.loads(shown.stdout)] == [["m1"] * 1, ["m2"]]
    assert all(len(s["runs"]) == 3 for body in json.loads(shown.stdout) for s in body["scores"])
    compared = shaberi("compare", "m1@v1", "m2@v1", "--results-dir", results)
    assert compared.returncode == 0 and "A = m1@v1, B = m2@v1" in compared.stdout, compared.stderr
    report = shaberi("report", "--tag", "m1@v1", "--compare", "m2@v1", "--out", str(tmp_path / "r.html"),
                     "--results-dir", results)
    assert report.returncode == 0, report.stderr
    board = shaberi("leaderboard", "--tag", "m2@v1", "--format", "csv", "--results-dir", results)
    assert board.returncode == 0 and [r.split(",")[0] for r in board.stdout.splitlines()[1:]] == ["m2"]
    exported = shaberi("export", "--tag", "m2@v1", "--results-dir", results)
    assert exported.returncode == 0 and exported.stdout.count("(m2)") == 4 and "(m1)" not in exported.stdout

    # Head to head by MODEL@TAG: two models of one tag, no new generation.
    server.reset()
    rated = shaberi("pairwise", "--tags", "m1@v1-run1,m2@v1-run1", "--judge", f"pj@{url}", "--bootstrap", "50",
                    "--results-dir", results)
    assert rated.returncode == 0, rated.stderr
    assert "m1@v1-run1" in rated.stdout and "m2@v1-run1" in rated.stdout
    assert _models_called(server) == {"pj": 2 * N}  # both orders of each question; no candidate call
    assert sorted(query(Path(results), "SELECT DISTINCT tag FROM pairwise_ratings")) == [("m1@v1-run1",),
                                                                                           ("m2@v1-run1",)]
    for tags, said in [("m1@v1,m2@v1-run1", "--tags 'm1@v1' is a family of 3 runs: name one member (m1@v1-run1, "
                                            "m1@v1-run2, m1@v1-run3)"),
                       ("v1-run1,m1@v1-run2", "--tags 'v1-run1' names runs of 2 models: name one as MODEL@TAG "
                                              "(m1@v1-run1, m2@v1-run1)"),
                       ("m3@v1-run1,m1@v1-run1", "no run tagged 'm3@v1-run1', nor model 'm3' in tag 'v1-run1' (it "
                                                 "holds m1, m2)"),
                       ("m1@v1-run1,,m2@v1-run1", "--tags 'm1@v1-run1,,m2@v1-run1' has an empty item: give TAG, "
                                                  "MODEL@TAG, or a comma list of them")]:
        refused = shaberi("pairwise", "--tags", tags, "--judge", f"pj@{url}", "--results-dir", results)
        assert refused.returncode == 2 and refused.stderr == f"error: {said}\n", refused.stderr
    for args in (["view", "--tag", "v2"], ["export", "--tag", "m1@v2"], ["leaderboard", "--tag", "v1,v2"],
                 ["view", "--tag", "m3@v2"], ["report", "--tag", "m3@v2", "--out", str(tmp_path / "no.html")],
                 ["leaderboard", "--tag", "m3@v2"], ["export", "--tag", "m3@v2"], ["inspect", "--tag", "m3@v2"]):
        missing = shaberi(*args, "--results-dir", results)
        assert missing.returncode == 2 and "v1 (3 runs)" in missing.stderr and missing.stderr.count("\n") == 1, \
            missing.stderr
        assert "m3" not in args[2] or "nor model 'm3' tagged 'v2'" in missing.stderr, missing.stderr

    # The published leaderboard imported as it is (its prompts unnamed), and one run judged again with the
    # original's prompts: one board ranks it among the imported models in the same judge columns.
    imported = shaberi("import-legacy", str(data_dir / "legacy" / "samples"), "--results-dir", results)
    assert imported.returncode == 0, imported.stderr
    clone = data_dir / "original" / "2025-04-30-451c0aa"
    with LoopbackServer(judges=(GPT41,)) as judge:
        original = shaberi("run", "--model", "m1", "--tag", "v1-run1", "--stages", "judge", "--judge",
                           f"{GPT41}@{judge.base_url}", "--judge-prompts", str(clone), *common)
        assert original.returncode == 0, original.stderr
        assert judge.stats()["calls"] == N  # the stored answers judged; no candidate call
    label = promptsets.load(str(clone)).label
    rows = json.loads(shaberi("leaderboard", "--tag", "legacy,m1@v1-run1", "--format", "json", "--results-dir",
                              results).stdout)
    mine = {r["Prompts"]: r for r in rows if r["Tag"] == "v1-run1"}
    assert set(mine) == {"shaberi", label} and {r["Prompts"] for r in rows if r["Tag"] == "legacy"} == {"unknown"}
    assert mine[label]["Average (GPT4.1)"] is not None and mine[label]["Average (All)"] is not None
    assert mine["shaberi"]["Average (GPT4.1)"] is None and mine["shaberi"]["Average (j1)"] is not None
    assert any(r["Average (GPT4.1)"] is not None for r in rows if r["Tag"] == "legacy")  # the same column
    ((rakuda,),) = query(Path(results), f"SELECT avg(score) FROM judgements WHERE judge = '{GPT41} [{label}]'")
    assert mine[label]["Rakuda (GPT4.1)"] == pytest.approx(rakuda, abs=1e-9)


def test_a_family_whose_member_holds_nothing_usable_finishes(server, tmp_path: Path) -> None:
    """Run 2 (seed 2) gets an answer whose every judge reply is unreadable: it is named and left out, run 3 runs,
    and the same command again runs it again (its unreadable verdicts are final: not paid for twice)."""
    data = tmp_path / "data" / "ja"
    data.mkdir(parents=True)
    with open(data / "rakuda.jsonl", "w", encoding="utf-8") as fh:
        for i in range(N):
            text = f"質問{i} <<answer#2: 回答XYZ{i}>> <<judge@j1?XYZ: 読めない返事 || まだ読めない>>"
            fh.write(json.dumps({"category": "c", "question_id": f"q{i}", "text": text}, ensure_ascii=False) + "\n")
    results = str(tmp_path / "r")
    args = ["run", "--model", "m", "--base-url", server.base_url, "--tag", "fam", "--runs", "3", "--judge", "j1",
            "--benchmark", "rakuda", "--data-dir", str(data.parent), "--results-dir", results]
    first = shaberi(*args)
    assert first.returncode == 1
    assert "error: fam-run2 (m) holds nothing usable: the family's statistics leave it out" in first.stderr
    assert query(Path(results), "SELECT tag, status FROM runs ORDER BY tag") == [
        ("fam-run1", "ok"), ("fam-run2", "failed"), ("fam-run3", "ok")]
    view = shaberi("view", "--tag", "fam", "--results-dir", results)
    assert view.returncode == 0 and "(3 runs, 2 counted)" in view.stdout, view.stdout
    server.reset()
    again = shaberi(*args)
    assert again.returncode == 1 and again.stdout.count("status: ") == 3  # every member run again, the same state
    assert server.stats()["calls"] == 0


def test_a_partial_run_says_why(server, tmp_path: Path) -> None:
    """One answer's call fails every time: the run is partial, and its row, its manifest and view say where and
    with which error."""
    data = tmp_path / "data" / "ja"
    data.mkdir(parents=True)
    with open(data / "rakuda.jsonl", "w", encoding="utf-8") as fh:
        for i, text in enumerate(["一つ目の質問", "二つ目の質問 [[fail:500]]", "三つ目の質問"]):
            fh.write(json.dumps({"category": "c", "question_id": f"q{i}", "text": text}, ensure_ascii=False) + "\n")
    results = tmp_path / "r"
    made = shaberi("run", "--model", "m", "--base-url", server.base_url, "--tag", "p", "--judge", "j1",
                   "--benchmark", "rakuda", "--max-retries", "0", "--data-dir", str(data.parent),
                   "--results-dir", str(results))
    assert made.returncode == 0 and "status: partial" in made.stdout, made.stderr
    [(error,)] = query(results, "SELECT error FROM runs WHERE tag = 'p'")
    assert error.startswith("rakuda: generate: 1 of 3 answers missing or errored; most common: ") and "500" in error
    manifest = json.loads((results / "m" / "p" / "manifest.json").read_text())
    assert manifest["status"] == "partial" and manifest["error"] == error
    view = shaberi("view", "--tag", "p", "--results-dir", str(results))
    assert view.returncode == 0 and "partial: rakuda: generate: 1 of 3 answers missing or errored" in view.stdout
