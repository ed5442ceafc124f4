"""import-legacy and leaderboard: the original tooling's numbers to 1e-9, every edge case counted."""

from __future__ import annotations

import csv
import io
import json
import shutil

import openpyxl
import pytest

from shaberi.legacy import import_tree
from shaberi.reports.leaderboard import board, leaderboard

from .conftest import query, shaberi

SKIPPED = {"model_name", "% JA"}  # % JA: see the leaderboard module docstring


@pytest.fixture(scope="module")
def subset20(tmp_path_factory, data_dir):
    results = tmp_path_factory.mktemp("legacy")
    report = import_tree(data_dir / "legacy" / "subset20", results)
    return results, report


def _reference(data_dir) -> dict[str, dict[str, str]]:
    with open(data_dir / "legacy" / "subset20" / "reference_leaderboard.csv", encoding="utf-8") as fh:
        return {r["model_name"]: r for r in csv.DictReader(fh)}


# subset20's 6 verdicts off their benchmark's scale (model, judge title, column): the original averaged them
OFF_SCALE = {("cyberagent/calm2-7b-chat", "Tulu405", "ELYZA 100"), ("cyberagent/calm2-7b-chat", "Llama 3.3", "JA-MT"),
             ("Deepreneur/blue-lizard", "Tulu405", "ELYZA 100"), ("Deepreneur/blue-lizard", "Llama 3.3", "JA-MT"),
             ("ablation-182-a177.finaldpo2.6.5e7-shisa-v2-mistral-nemo-12b", "AtheneV2", "Tengu")}


def _off_scale(model: str, column: str) -> bool:
    """Whether a leaderboard cell averages one of subset20's off-scale verdicts (its Averages do, too)."""
    return any(model == m and (column in (f"{b} ({j})", f"{b} (All)", f"Average ({j})", "Average (All)",
                                          "Average (ex-GPT4)", "GPT4 delta")) for m, j, b in OFF_SCALE)


def _against_the_reference(subset20, data_dir, as_published: bool) -> tuple[int, int]:
    """(numbers equal to the original's to 1e-9, numbers that differ where they average an off-scale verdict),
    every number of the reference but % JA compared; any other difference fails."""
    results, report = subset20
    assert (report.models, report.answers, report.judgements) == (20, 6440, 20000)
    header, rows = leaderboard(results, as_published=as_published)
    ours = {r[0]: dict(zip(header, r, strict=True)) for r in rows}
    reference = _reference(data_dir)
    assert set(ours) == set(reference)
    equal = differ = 0
    for model, ref in reference.items():
        for column, value in ref.items():
            if column in SKIPPED:
                continue
            got = ours[model][column]
            if value == "":
                assert got is None, (model, column)
            elif got == pytest.approx(float(value), abs=1e-9):
                equal += 1
            else:
                assert not as_published and _off_scale(model, column), (model, column, got, value)
                differ += 1
    assert {r[header.index("JA-MT questions")] for r in rows} == {"60", "80"}  # the 80-question files as such
    assert {r[-1] for r in rows} == {"4/4"}
    return equal, differ


def test_leaderboard_as_published_equals_the_original_tooling_on_subset20(subset20, data_dir):
    """Every number of the original's table to 1e-9: --as-published counts its 6 off-scale verdicts (a judge's 0
    on ELYZA's 1–5, 0 on MT-Bench's 1–10, 11 on Tengu's 0–10) as the original averaged them, and says so."""
    assert _against_the_reference(subset20, data_dir, as_published=True) == (455, 0)  # every number but % JA
    results, _ = subset20
    assert board(results, as_published=True).notes == [
        "--as-published counts 6 scores outside their benchmark's judging scale, as the original tooling averaged "
        "them; the default leaderboard sets them aside"]


def test_the_default_leaderboard_equals_the_original_but_for_its_off_scale_verdicts(subset20, data_dir):
    """By default the 6 off-scale verdicts are unscored rows, never averaged: the 23 cells that average them
    differ from the original's, every other number equals it to 1e-9."""
    assert _against_the_reference(subset20, data_dir, as_published=False) == (432, 23)
    assert board(subset20[0]).notes == []


def test_the_off_scale_verdicts_of_subset20_are_unscored_rows_counted_and_named(subset20):
    results, report = subset20
    assert report.counts["scores_outside_the_scale"] == 6 and report.counts["scores_not_a_number"] == 0
    assert query(results, "SELECT benchmark, judge, count(*) FROM judgements WHERE error LIKE 'legacy: score % "
                          "outside the %scale%' GROUP BY ALL ORDER BY ALL") == [
        ("elyza", "llmjudge-tulu405", 2), ("mt_bench", "llmjudge-llama33", 1), ("mt_bench_80", "llmjudge-llama33", 2),
        ("tengu", "llmjudge-athenev2", 1)]
    assert sum("outside the" in w and w.endswith(": imported unscored") for w in report.warnings) == 6
    # the score stays null; the value the original averaged ends the error, for --as-published
    assert query(results, "SELECT error FROM judgements WHERE score IS NULL AND error LIKE '%; as published: %' "
                          "ORDER BY error") == [("legacy: score 0 outside the 1–10 scale; as published: 0",)] * 2 + [
        ("legacy: score 0 outside the 1–5 scale; as published: 0",)] * 2 + [
        ("legacy: score 0.0 outside the 1–10 scale; as published: 0",),
        ("legacy: score 11 outside the 0–10 scale; as published: 11",)]
    assert report.as_published == 6 and len(report.counted) == 3  # calm2, blue-lizard, the ablation


def test_percent_ja_equals_the_unicode_script_regex_over_all_answers(subset20):
    """The counts stored at import give what a regex over every answer (RE2's scripts) gives."""
    results, _ = subset20
    header, rows = leaderboard(results)
    ours = {r[0]: r[header.index("% JA")] for r in rows}
    by_regex = dict(query(results, r"""
        SELECT model, sum(length(regexp_replace(content, '[^\p{Hiragana}\p{Katakana}\p{Han}]', '', 'g'))) /
                      sum(length(regexp_replace(content, '[^\p{L}\p{N}]', '', 'g')))
        FROM answers GROUP BY model"""))
    assert ours == pytest.approx(by_regex, abs=1e-12)
    assert min(ours.values()) > 0.5 and max(ours.values()) < 1


def test_the_80_question_set_is_its_own_benchmark_and_tengu_61_to_65_are_kept_but_not_scored(subset20):
    results, report = subset20
    assert report.counts["mt_bench_80_files_in_60_folder"] == 10
    assert query(results, "SELECT count(DISTINCT question_id) FROM questions WHERE benchmark = 'mt_bench_80'"
                 ) == [(80,)]
    assert query(results, "SELECT max(cast(question_id AS INT)) FROM questions WHERE benchmark = 'mt_bench'") == [(80,)]
    assert query(results, "SELECT count(*) FROM judgements WHERE benchmark = 'tengu' AND question_id IN "
                          "('61', '62', '63', '64', '65')")[0][0] > 0
    assert query(results, "SELECT count(*) FROM scores WHERE benchmark = 'tengu' AND question_id IN "
                          "('61', '62', '63', '64', '65')") == [(0,)]


def test_edge_cases_of_the_sample_files_are_counted(tmp_path, data_dir):
    report = import_tree(data_dir / "legacy" / "samples", tmp_path)
    counts = report.counts
    assert (counts["dict_scores"], counts["duplicate_rows"], counts["mt_bench_80_files_in_60_folder"]) == (3, 1, 1)
    assert (counts["tengu_files_with_id"], counts["tengu_files_without_id"]) == (1, 3)
    assert counts["ascii_escaped_files"] == 7 and counts["null_scores"] == 1 and counts["float_scores"] == 117
    # every judge reply is kept, the ones nested in dict scores included
    assert query(tmp_path, "SELECT count(judge_output) FROM judgements WHERE judge = 'gpt-5.1-2025-11-13'") == [(380,)]
    rows = query(tmp_path, "SELECT count(*), count(score) FROM judgements")
    assert rows == [(report.judgements, report.judgements - 1)]


def test_a_malformed_line_and_an_unknown_folder_are_reported_and_reimport_adds_nothing(tmp_path, data_dir):
    tree = tmp_path / "tree" / "data"
    src = data_dir / "legacy" / "samples"
    folder = "yuzuai__rakuda-questions"
    shutil.copytree(src / "model_answers" / folder, tree / "model_answers" / folder)
    judged = tree / "judgements" / "judge_gpt-5.1-2025-11-13" / "yuzuai__rakuda-questions"
    judged.mkdir(parents=True)
    lines = (src / "judgements" / "judge_gpt-5.1-2025-11-13" / "yuzuai__rakuda-questions" /
             "shisa-ai__shisa-v2-llama3.1-8b.json").read_text(encoding="utf-8").splitlines()
    (judged / "shisa-ai__shisa-v2-llama3.1-8b.json").write_text("\n".join([lines[0], '{"broken": ', *lines[1:]]) + "\n",
                                                                  encoding="utf-8")
    (tree / "model_answers" / "someone__private-bench").mkdir(parents=True)
    (tree / "model_answers" / "someone__private-bench" / "m.json").write_text('{"q": 1}\n', encoding="utf-8")

    results = tmp_path / "results"
    proc = shaberi("import-legacy", str(tmp_path / "tree"), "--results-dir", str(results))
    assert proc.returncode == 0, proc.stderr
    assert "judgements/judge_gpt-5.1-2025-11-13/yuzuai__rakuda-questions/shisa-ai__shisa-v2-llama3.1-8b.json:2" \
        in proc.stdout
    assert "skipped unknown dataset folder" in proc.stdout and "malformed lines: 1" in proc.stdout
    assert query(results, "SELECT count(*) FROM judgements") == [(40,)]  # the other 40 lines all imported
    before = query(results, "SELECT (SELECT count(*) FROM raw_answers), (SELECT count(*) FROM raw_judgements)")
    assert shaberi("import-legacy", str(tmp_path / "tree"), "--results-dir", str(results)).returncode == 0
    assert query(results, "SELECT (SELECT count(*) FROM raw_answers), (SELECT count(*) FROM raw_judgements)") == before


def test_leaderboard_cli_and_export_of_imported_runs(tmp_path, data_dir):
    results = tmp_path / "results"
    proc = shaberi("import-legacy", str(data_dir / "legacy" / "samples"), "--export", "--results-dir", str(results))
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((results / "shisa-ai%2Fshisa-v2-llama3.1-8b" / "legacy" / "manifest.json").read_text())
    assert manifest["tag"] == "legacy" and "gpt-5.1-2025-11-13" in [j["name"] for j in manifest["judges"]]
    exported = [json.loads(line) for f in (results / "shisa-ai%2Fshisa-v2-llama3.1-8b" / "legacy").rglob(
        "judgements/*/*.jsonl") for line in f.read_text(encoding="utf-8").splitlines()]
    # imported without --judge-prompts: whose prompts judged it is not known (the leaderboard's label), not Shaberi's
    assert exported and {e["prompt_set"] for e in exported} == {"unknown"}
    table = shaberi("leaderboard", "--format", "markdown", "--results-dir", str(results))
    assert table.returncode == 0 and "| model_name | Judges | Average (All) | ELYZA 100 (All) |" in table.stdout
    bad = shaberi("import-legacy", str(tmp_path / "nowhere"), "--results-dir", str(results))
    assert bad.returncode == 2 and "is not an original Shaberi result tree" in bad.stderr


def test_a_repeated_legacy_row_counts_once_and_as_published_counts_it_as_the_original_did(tmp_path, data_dir):
    """karakuri's Tulu405 MT-Bench file holds the 80-question set with one question twice (81 rows): the
    original leaderboard averaged all 81 rows; by default each question counts once."""
    path = (data_dir / "legacy" / "samples" / "judgements" / "judge_llmjudge-tulu405" / "shisa-ai__ja-mt-bench-1shot"
            / "karakuri-ai__karakuri-lm-70b-chat-v0.1.json")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    last = {r["Question"]: r["score"] for r in rows}  # the last row of a repeated question
    assert (len(rows), len(last)) == (81, 80)
    results = tmp_path / "r"
    proc = shaberi("import-legacy", str(data_dir / "legacy" / "samples"), "--results-dir", str(results))
    assert proc.returncode == 0, proc.stderr
    published = sum(r["score"] for r in rows) / len(rows)
    once = sum(last.values()) / len(last)
    assert ("karakuri-ai/karakuri-lm-70b-chat-v0.1: MT-Bench (80, legacy) (all judges) "
            f"{once:.4f} by default, {published:.4f} as published ({published - once:+.4f})"
            ) in proc.stdout

    def ja_mt(*args: str) -> float:
        out = shaberi("leaderboard", "--format", "csv", "--results-dir", str(results), *args)
        row = next(r for r in csv.DictReader(io.StringIO(out.stdout)) if r["model_name"].startswith("karakuri"))
        assert row["JA-MT questions"] == "80"
        return float(row["JA-MT (All)"])

    assert ja_mt() == pytest.approx(once, abs=1e-12)
    assert ja_mt("--as-published") == pytest.approx(published, abs=1e-12)
    as_json = json.loads(shaberi("leaderboard", "--format", "json", "--results-dir", str(results)).stdout)
    row = next(r for r in as_json if r["model_name"].startswith("karakuri"))
    assert row["JA-MT questions"] == "80" and row["JA-MT (All)"] == pytest.approx(once, abs=1e-12)
    # The repeat is history, not lost: one superseded judgement beside the current one.
    assert query(results, "SELECT lineage, count(*) FROM judgement_history WHERE judge = 'llmjudge-tulu405' "
                          "AND benchmark = 'mt_bench_80' GROUP BY 1 ORDER BY 1") == [("current", 80), ("superseded", 1)]
    # An imported run reads like any other (no token usage: no Total row to make up).
    view = shaberi("view", "--tag", "legacy", "--model", "karakuri-ai/karakuri-lm-70b-chat-v0.1", "--format", "json",
                   "--results-dir", str(results))
    assert view.returncode == 0, view.stderr
    assert json.loads(view.stdout)["tokens"] == [] and json.loads(view.stdout)["scores"][0]["status"] == "ok"
    rows = {r["benchmark"]: r for r in json.loads(view.stdout)["scores"][0]["rows"]}
    assert rows["MT-Bench (80, legacy)"]["score"] == pytest.approx(once * 1.0)  # (1–10: as is)
    assert rows["Overall"]["note"] == "none of the four core benchmarks has a score"
    # A model whose answers no judge scored: its benchmarks were run, not judged.
    unjudged = shaberi("view", "--tag", "legacy", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--format", "json",
                       "--results-dir", str(results))
    rows = {r["benchmark"]: r for r in json.loads(unjudged.stdout)["scores"][0]["rows"]}
    assert rows["Tengu-Bench"]["note"] == "answered, not judged (115 answers)" and rows["Rakuda"]["note"] == "not run"


# -- bad input: one line, exit code 2, nothing written ---------------------------------------------------
RAKUDA = "yuzuai__rakuda-questions"
SAMPLE = ("judgements", "judge_gpt-5.1-2025-11-13", RAKUDA, "shisa-ai__shisa-v2-llama3.1-8b.json")


def _rakuda_tree(tmp_path, data_dir):
    """A tree whose first model (a__good) is fine: a refusal must come before it is written. Returns the judge's
    Rakuda folder and the sample file's rows."""
    folder = tmp_path / "tree" / "data" / "judgements" / "judge_j" / RAKUDA
    folder.mkdir(parents=True)
    sample = data_dir / "legacy" / "samples" / "/".join(SAMPLE)
    shutil.copyfile(sample, folder / "a__good.json")
    return folder, [json.loads(line) for line in sample.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write_rows(path, rows) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _bad_directory(folder, rows, tmp_path):
    (folder / "z__bad.json").mkdir()
    return "z__bad.json is a directory, not a JSON Lines file"


def _bad_dangling_symlink(folder, rows, tmp_path):
    (folder / "z__bad.json").symlink_to(tmp_path / "gone.json")
    return "z__bad.json cannot be read (a symlink to nothing)"


def _bad_device(folder, rows, tmp_path):
    (folder / "z__bad.json").symlink_to("/dev/zero")  # read, it never ends
    return "z__bad.json is a device, not a JSON Lines file"


def _bad_no_question_key(folder, rows, tmp_path):
    _write_rows(folder / "z__bad.json", [rows[0], {k: v for k, v in rows[1].items() if k != "question_id"}])
    return "z__bad.json:2: the row has no question_id; Rakuda rows are keyed by question_id"


def _bad_dict_judge_output(folder, rows, tmp_path):
    _write_rows(folder / "z__bad.json", [rows[0], rows[1] | {"judge_output": {"text": "FINAL SCORE: 7"}}])
    return 'z__bad.json:2: judge_output is {"text":"FINAL SCORE: 7"}, not the judge\'s reply as text'


def _bad_every_score_off_the_scale(folder, rows, tmp_path):
    _write_rows(folder / "z__bad.json", [r | {"score": 85} for r in rows[:3]])
    return "z__bad.json: none of its scores is on Rakuda's 1–10 scale (line 1: score 85 outside the 1–10 scale)"


def _bad_json_array(folder, rows, tmp_path):
    (folder / "z__bad.json").write_text(json.dumps(rows[:3], ensure_ascii=False) + "\n", encoding="utf-8")
    return "z__bad.json is a JSON array, where JSON Lines (one JSON object per line) are expected"


def _bad_json_array_over_lines(folder, rows, tmp_path):
    (folder / "z__bad.json").write_text("\n" + json.dumps(rows[:3], ensure_ascii=False, indent=2), encoding="utf-8")
    return "z__bad.json is a JSON array, where JSON Lines (one JSON object per line) are expected"


@pytest.mark.parametrize("make", [_bad_directory, _bad_dangling_symlink, _bad_device, _bad_no_question_key,
                                  _bad_dict_judge_output, _bad_every_score_off_the_scale, _bad_json_array,
                                  _bad_json_array_over_lines],
                         ids=lambda f: f.__name__.removeprefix("_bad_"))
def test_bad_legacy_input_is_one_line_exit_2_and_nothing_written(tmp_path, data_dir, make):
    folder, rows = _rakuda_tree(tmp_path, data_dir)
    said = make(folder, rows, tmp_path)
    results = tmp_path / "results"
    proc = shaberi("import-legacy", str(tmp_path / "tree"), "--results-dir", str(results), timeout=60)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert said in lines[0] and "Traceback" not in proc.stderr
    assert not results.exists() or not any(results.rglob("*")), "nothing may be written, a__good included"


def test_a_line_longer_than_the_limit_is_refused_naming_the_file_and_line(tmp_path, data_dir, monkeypatch):
    from shaberi import legacy
    from shaberi.errors import DataError

    folder, rows = _rakuda_tree(tmp_path, data_dir)
    longest = max(len(line) for line in (folder / "a__good.json").read_bytes().splitlines())
    _write_rows(folder / "z__bad.json", [*rows[:2], rows[2] | {"judge_output": "x" * (longest + 10)}])
    monkeypatch.setattr(legacy, "MAX_LINE", longest + 1)  # (64 MB in earnest: read a line at most that long)
    with pytest.raises(DataError, match=r"z__bad\.json:3: a line longer than "):
        import_tree(tmp_path / "tree", tmp_path / "results")
    assert not (tmp_path / "results").exists()


def _with_scores(rows, scores: dict[int, object], nan: tuple[int, ...] = ()) -> str:
    """The rows as JSON Lines with these scores, NaN written bare as Python's json wrote it for the original."""
    lines = [json.dumps(r | ({"score": scores[i]} if i in scores else {}), ensure_ascii=False)
             for i, r in enumerate(rows)]
    for i in nan:
        lines[i] = lines[i].replace(f'"score": {json.dumps(rows[i]["score"])}', '"score": NaN')
    return "\n".join(lines) + "\n"


def test_scores_off_the_scale_or_not_numbers_are_set_aside_and_as_published_counts_what_the_original_did(
        tmp_path, data_dir):
    """Issue #30: 1e308 made Rakuda 1.25e307, -7 lowered a published average, true was imported as 1.0. By default
    each is an unscored row with its reason, counted in the summary, never averaged. --as-published counts what
    the original tooling counted, and never fails. The original (multijudge-viz.py, the shisa-ai/shaberi script
    that made output.csv) read a file with ``pd.read_json(path, lines=True)`` and took ``.score.mean()``:
      1e308, -7, 0 on ELYZA   averaged as they are (ELYZA's × 2 makes 1e308 inf: the original printed inf)
      true, false             read_json makes the score column numbers: 1 and 0, averaged
      "7", " 7.5 "            made numbers by the same conversion (Python's float()): 7 and 7.5, averaged
      null, NaN, "nan"        NaN in the column, which the mean leaves out
      "seven"                 the column stays text and the mean raises TypeError: the original had no number
      Infinity                the mean is inf, no score: set aside here as well"""
    folder, rows = _rakuda_tree(tmp_path, data_dir)
    (folder / "a__good.json").unlink()
    valid = [r["score"] for r in rows]
    huge = {2: 1e308, 5: -7, 8: True, 11: "7", 14: None}
    (folder / "m.json").write_text(_with_scores(rows, huge, nan=(17,)), encoding="utf-8")
    read = {5: -7, 8: True, 9: False, 11: "7", 12: " 7.5 ", 14: None}  # what the original read as numbers
    (folder / "n.json").write_text(_with_scores(rows, read, nan=(17,)), encoding="utf-8")
    unread = {3: "seven", 6: "nan", 9: float("inf")}  # json writes Infinity, as Python's json did for the original
    (folder / "x.json").write_text(_with_scores(rows, unread), encoding="utf-8")
    elyza = data_dir / "legacy" / "samples" / "judgements" / "judge_gpt-4.1-2025-04-14" / "elyza__ELYZA-tasks-100"
    elyza_rows = [json.loads(line) for line in (elyza / "shisa-ai__shisa-v2-llama3.1-8b.json").read_text(
        encoding="utf-8").splitlines() if line.strip()]
    (folder.parent / elyza.name).mkdir()
    (folder.parent / elyza.name / "e.json").write_text(_with_scores(elyza_rows, {0: 1e308, 1: 0}), encoding="utf-8")

    results = tmp_path / "results"
    proc = shaberi("import-legacy", str(tmp_path / "tree"), "--results-dir", str(results), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert ("set aside 16 scores (5 outside the benchmark's judging scale, 11 not a number): their rows are imported "
            "unscored, the reason in judgements.error, and no score counts them but shaberi leaderboard "
            "--as-published, which counts the 11 the original tooling averaged") in proc.stdout
    assert "m.json:3: score 1e+308 outside the 1–10 scale: imported unscored" in proc.stdout
    assert "m.json:6: score -7 outside the 1–10 scale: imported unscored" in proc.stdout
    assert "m.json:9: score true is not a number: imported unscored" in proc.stdout
    assert "m.json: 2 more scores set aside" in proc.stdout
    # the score stays null; the value the original counted ends the error
    assert sorted(e for (e,) in query(results, "SELECT error FROM judgements WHERE score IS NULL AND run_id LIKE "
                                               "'legacy__m__%'")) == [
        'legacy: no score', 'legacy: score "7" is not a number; as published: 7',
        "legacy: score -7 outside the 1–10 scale; as published: -7",
        "legacy: score 1e+308 outside the 1–10 scale; as published: 1e+308", "legacy: score NaN is not a number",
        "legacy: score true is not a number; as published: 1"]
    assert sorted(e for (e,) in query(results, "SELECT error FROM judgements WHERE score IS NULL AND run_id LIKE "
                                               "'legacy__x__%'")) == [
        'legacy: score "nan" is not a number', 'legacy: score "seven" is not a number',
        "legacy: score Infinity is not a number"]

    def mean(values):
        return sum(values) / len(values)

    def rest(scores: dict, *more: int):  # the valid scores of a file so changed
        return [v for i, v in enumerate(valid) if i not in scores and i not in more]

    default = {"m": mean(rest(huge, 17)), "n": mean(rest(read, 17)), "x": mean(rest(unread))}
    published = {"m": mean([*rest(huge, 17), 1e308, -7, 1, 7]), "n": mean([*rest(read, 17), -7, 1, 0, 7, 7.5]),
                 "x": default["x"]}  # x: the original had no number for it (its "seven" stopped it)
    said = f"  m: Rakuda (all judges) {default['m']:.4f} by default, 2.632e+306 as published (+2.632e+306)"
    assert said in proc.stdout
    assert "  e: ELYZA-tasks-100 (all judges) 7.4898 by default, inf as published (+inf)" in proc.stdout
    for as_published, expected in ((False, default), (True, published)):
        header, board_rows = leaderboard(results, as_published=as_published)
        got = {r[0]: r[header.index("Rakuda (All)")] for r in board_rows if r[0] != "e"}
        assert got == {m: pytest.approx(v, rel=1e-12, abs=1e-9) for m, v in expected.items()}, as_published
    # ELYZA's 1e308 and 0: set aside by default; as published, 1e308 × 2 is inf, as the original printed it
    header, board_rows = leaderboard(results)
    e = dict(zip(header, next(r for r in board_rows if r[0] == "e"), strict=True))
    elyza_valid = [r["score"] * 2 for r in elyza_rows[2:]]
    assert e["ELYZA 100 (All)"] == pytest.approx(mean(elyza_valid)) and e["Average (All)"] == e["ELYZA 100 (All)"]
    header, board_rows = leaderboard(results, as_published=True)
    e = dict(zip(header, next(r for r in board_rows if r[0] == "e"), strict=True))
    assert e["ELYZA 100 (All)"] == e["Average (All)"] == float("inf")
    markdown = shaberi("leaderboard", "--as-published", "--format", "markdown", "--results-dir", str(results))
    assert markdown.returncode == 0, markdown.stderr
    assert "| e | 1 | inf | inf |" in markdown.stdout
    assert ("note: --as-published counts 5 scores outside their benchmark's judging scale and 6 that are no number "
            "(true as 1, numeric text as its number), as the original tooling averaged them; the default leaderboard "
            "sets them aside") in markdown.stdout
    book = tmp_path / "b.xlsx"  # inf as Excel's #DIV/0!
    workbook = shaberi("leaderboard", "--as-published", "--out", str(book), "--results-dir", str(results))
    assert workbook.returncode == 0 and book.stat().st_size > 0, workbook.stderr


def test_an_empty_file_is_skipped_and_counted_adding_no_run_and_no_judge(tmp_path, data_dir):
    """An empty judgement file (0 bytes, or only blank lines) holds no model's results: e.json made a model e with
    no judge and 0/4, and a__good's empty file under a second judge made that judge one of its judges."""
    folder, _ = _rakuda_tree(tmp_path, data_dir)
    (folder / "e.json").write_bytes(b"")
    (folder / "w.json").write_text("\n  \n", encoding="utf-8")
    other = folder.parent.parent / "judge_k" / RAKUDA
    other.mkdir(parents=True)
    (other / "a__good.json").write_bytes(b"")
    results = tmp_path / "results"
    proc = shaberi("import-legacy", str(tmp_path / "tree"), "--results-dir", str(results), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "imported 1 models (1 files): 40 answers, 40 judgements" in proc.stdout
    assert "empty files: 3" in proc.stdout
    for path in (folder / "e.json", folder / "w.json", other / "a__good.json"):
        assert f"skipped empty file {path}: it holds no rows, so it adds no run" in proc.stdout
    assert query(results, "SELECT model, judges FROM runs") == [("a/good", ["j"])]
    rows = list(csv.DictReader(io.StringIO(shaberi("leaderboard", "--format", "csv", "--results-dir",
                                                   str(results)).stdout)))
    assert [(r["model_name"], r["Judges"]) for r in rows] == [("a/good", "1")]


def _as_the_original(path, elyza: bool = False) -> float:
    """multijudge-viz.py's number for this one file: read_json(lines=True), ELYZA's column × 2, groupby mean."""
    import warnings

    pd = pytest.importorskip("pandas")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's overflow, which is the point
        df = pd.read_json(path, lines=True)
        df["model_name"], df["eval_dataset"] = "m", "d"
        if elyza:
            df["score"] = df["score"] * 2
        return float(df.groupby(["model_name", "eval_dataset"]).score.mean().iloc[0])


def test_as_published_one_board_gives_one_number_in_every_format_the_original_pandas_mean(tmp_path, data_dir):
    """A Rakuda file whose first three scores are 1e308, 1e308, -1e308: DuckDB's avg summed the rows in whatever
    order a plan gave (1e308 + 1e308 is inf), so the table and markdown said inf, csv and xlsx 2.5e+306, json null
    and the import report inf. The number is pandas' groupby mean, 1e308 / 40: the same in every format and in
    the report. An inf (ELYZA's 1e308 × 2) and a nan (1e308 × 2 and -1e308 × 2) are the text inf / nan in every
    format, json's string included, never null (missing)."""
    folder, rows = _rakuda_tree(tmp_path, data_dir)
    (folder / "a__good.json").unlink()
    (folder / "m.json").write_text(_with_scores(rows, {0: 1e308, 1: 1e308, 2: -1e308}), encoding="utf-8")
    elyza = data_dir / "legacy" / "samples" / "judgements" / "judge_gpt-4.1-2025-04-14" / "elyza__ELYZA-tasks-100"
    elyza_rows = [json.loads(line) for line in (elyza / "shisa-ai__shisa-v2-llama3.1-8b.json").read_text(
        encoding="utf-8").splitlines() if line.strip()]
    (folder.parent / elyza.name).mkdir()
    (folder.parent / elyza.name / "e.json").write_text(_with_scores(elyza_rows, {0: 1e308}), encoding="utf-8")
    (folder.parent / elyza.name / "n.json").write_text(_with_scores(elyza_rows, {0: 1e308, 1: -1e308}),
                                                       encoding="utf-8")
    m = _as_the_original(folder / "m.json")
    assert m == 2.5e306  # what pandas gives: its sum is 1e308, the small scores lost beside it
    assert _as_the_original(folder.parent / elyza.name / "e.json", elyza=True) == float("inf")
    assert str(_as_the_original(folder.parent / elyza.name / "n.json", elyza=True)) == "nan"

    results = tmp_path / "results"
    proc = shaberi("import-legacy", str(tmp_path / "tree"), "--results-dir", str(results), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "  m: Rakuda (all judges) 5.0811 by default, 2.5e+306 as published (+2.5e+306)" in proc.stdout
    assert "  m: Rakuda (j) 5.0811 by default, 2.5e+306 as published (+2.5e+306)" in proc.stdout
    said = {line.split(" by default, ")[0].strip().rsplit(" ", 1)[0]: line.split(" by default, ")[1]
            for line in proc.stdout.splitlines() if " by default, " in line}  # what, its default left out
    assert said["e: ELYZA-tasks-100 (all judges)"] == said["e: ELYZA-tasks-100 (j)"] == "inf as published (+inf)"
    assert said["n: ELYZA-tasks-100 (all judges)"] == said["n: ELYZA-tasks-100 (j)"] == "nan as published (+nan)"
    scored = {"m": ["Average (All)", "Rakuda (All)", "Average (j)", "Rakuda (j)"],
              "e": ["Average (All)", "ELYZA 100 (All)", "Average (j)", "ELYZA 100 (j)"]}
    scored["n"] = scored["e"]
    expected = {"m": m, "e": float("inf"), "n": float("nan")}

    def run(fmt: str, *args: str) -> str:
        out = shaberi("leaderboard", "--as-published", "--format", fmt, "--results-dir", str(results), *args)
        assert out.returncode == 0, out.stderr
        return out.stdout

    for _ in range(3):  # the same number at every call, whatever order a plan gives (DuckDB's avg did not)
        header, board_rows = leaderboard(results, as_published=True)
        got = {r[0]: dict(zip(header, r, strict=True)) for r in board_rows}
        for model, columns in scored.items():
            for column in columns:
                assert str(got[model][column]) == str(expected[model]), (model, column)
    assert [r[0] for r in board_rows] == ["e", "m", "n"]  # inf ranks first, nan last (as pandas sorts)
    shown = {"m": "2.5e+306", "e": "inf", "n": "nan"}
    for fmt in ("table", "markdown"):
        text = run(fmt, "--judges", "all")
        for model, cell in shown.items():  # the table: a table per judge, a line for the model in each
            lines = [x for x in text.splitlines() if x.strip("|│ ").startswith(f"{model} ")]
            assert len(lines) == (1 if fmt == "markdown" else 2), (fmt, lines)  # the pooled table, then j's
            cells = [c.strip() for line in lines for c in line.strip("|│ ").replace("│", "|").split("|")]
            assert cells.count(cell) == 4, (fmt, model, cells)  # its 4 columns, no other number for it
    for row in csv.DictReader(io.StringIO(run("csv"))):
        for column in scored[row["model_name"]]:
            assert row[column] == str(expected[row["model_name"]]), (row["model_name"], column)
            assert str(float(row[column])) == str(expected[row["model_name"]])
    for row in json.loads(run("json")):
        for column in scored[row["model_name"]]:
            value = row[column]
            assert (value == m) if row["model_name"] == "m" else value == shown[row["model_name"]], (row, column)
    book = tmp_path / "b.xlsx"
    assert shaberi("leaderboard", "--as-published", "--out", str(book), "--results-dir", str(results)).returncode == 0
    sheet = openpyxl.load_workbook(book).active
    names = [c.value for c in sheet[1]]
    for line in sheet.iter_rows(min_row=2, values_only=True):
        cells = dict(zip(names, line, strict=True))
        for column in scored[cells["model_name"]]:
            value = cells[column]
            assert (value == m) if cells["model_name"] == "m" else value == shown[cells["model_name"]], (cells, column)
