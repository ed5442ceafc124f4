"""Dataset registry: upstream columns in any of the accepted formats, the design's rules, clear errors."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from shaberi import benchmarks as bm
from shaberi.errors import DataError, UsageError


def test_question_counts_and_ids_follow_the_design(data_dir):
    loaded = {n: bm.load(n, data_dir) for n in bm.resolve("all")}
    assert {n: len(d.questions) for n, d in loaded.items()} == {"elyza": 100, "tengu": 115, "mt_bench": 60,
                                                                "rakuda": 40}
    assert {n: d.rows for n, d in loaded.items()} == {"elyza": 100, "tengu": 120, "mt_bench": 60, "rakuda": 40}
    assert all(d.known_version for d in loaded.values())

    tengu_ids = [int(q.question_id) for q in loaded["tengu"].questions]
    assert tengu_ids == [i for i in range(1, 121) if not 61 <= i <= 65]
    assert not any(q.category == "倫理的制御" for q in loaded["tengu"].questions)
    # 43 upstream rows have a null Answer, 5 of them among the excluded ids: null stays null, not "None"
    assert sum(q.reference is None for q in loaded["tengu"].questions) == 38

    mt_ids = [int(q.question_id) for q in loaded["mt_bench"].questions]
    assert mt_ids == [*range(11, 31), *range(41, 81)]

    elyza = loaded["elyza"].questions
    assert [q.question_id for q in elyza[:3]] == ["1", "2", "3"]
    assert elyza[0].turns[0].startswith("仕事の熱意を取り戻すための") and elyza[0].reference and elyza[0].criteria
    assert loaded["rakuda"].questions[0].question_id == "LaSEuuNG54CdpH9KCxTnZ3"


def test_csv_and_parquet_copies_load_identically(data_dir, tmp_path):
    for name in ("elyza", "tengu"):
        src = bm.locate(name, data_dir)
        rows = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines()]
        table = pa.Table.from_pylist(rows)
        for ext, write in ((".csv", pacsv.write_csv), (".parquet", pq.write_table)):
            d = tmp_path / ext.strip(".")
            (d / "ja").mkdir(parents=True, exist_ok=True)
            write(table, (d / bm.registry()[name]["file"]).with_suffix(ext))
            got = bm.load(name, d)
            assert got.questions == bm.load(name, data_dir).questions
            assert not got.known_version  # a different file: recorded, not refused


def test_stability_two_turn_mt_bench_layout_gives_the_same_sixty_first_turns(data_dir, tmp_path):
    (tmp_path / "ja").mkdir()
    shutil.copy(data_dir / "ja" / "ja_mt_bench_full_2turn.jsonl", tmp_path / "ja" / "ja_mt_bench_1shot.jsonl")
    d = bm.load("mt_bench", tmp_path)
    assert [q.question_id for q in d.questions] == [q.question_id for q in bm.load("mt_bench", data_dir).questions]
    assert all(len(q.turns) == 1 for q in d.questions)


def test_limit_takes_the_first_questions(data_dir):
    assert [q.question_id for q in bm.load("tengu", data_dir, limit=3).questions] == ["1", "2", "3"]


def test_missing_file_names_the_file_the_source_and_the_pull_command(tmp_path):
    with pytest.raises(DataError) as err:
        bm.load("elyza", tmp_path)
    msg = str(err.value)
    assert "ja/elyza_tasks_100" in msg and "elyza/ELYZA-tasks-100" in msg and "shaberi data pull" in msg


def test_wrong_columns_and_empty_files_are_refused(tmp_path):
    (tmp_path / "ja").mkdir()
    (tmp_path / "ja" / "rakuda.jsonl").write_text('{"Category": "x", "Question": "y"}\n', encoding="utf-8")
    with pytest.raises(DataError, match="lacks the upstream column"):
        bm.load("rakuda", tmp_path)
    (tmp_path / "ja" / "rakuda.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(DataError, match="holds no questions"):
        bm.load("rakuda", tmp_path)


def test_unknown_benchmark_lists_the_choices():
    with pytest.raises(UsageError, match="unknown benchmark gsm8k; choose from: all, elyza, tengu, mt_bench, rakuda"):
        bm.resolve("elyza,gsm8k")


def _write(tmp_path, name: str, text: str) -> None:
    (tmp_path / "ja").mkdir(parents=True, exist_ok=True)
    (tmp_path / "ja" / name).write_text(text, encoding="utf-8")


@pytest.mark.parametrize(("name", "text", "needle"), [
    # A CSV row cut short, and a null: either would be asked as the question "None".
    ("rakuda.csv", "category,question_id,text\nc,q1,質問1\nc,q2\n", "rakuda.csv:3: the row lacks the upstream "
                                                                    "column(s) text"),
    ("rakuda.jsonl", '{"category": "c", "question_id": "q1", "text": null}\n', "rakuda.jsonl:1: the row lacks"),
    # Ids repeated once read as the benchmark reads them.
    ("ja_mt_bench_1shot.jsonl", '{"id": "11", "category": "c", "Question": "a"}\n'
                                '{"id": "011", "category": "c", "Question": "b"}\n', "question id 11 is given to more "
                                                                                     "than one row (row 1, row 2)"),
    ("tengu_bench.jsonl", '{"Category": "c", "Question": "a", "Answer": null, "Criteria": "x", "id": "2"}\n'
                          '{"Category": "c", "Question": "b", "Answer": "r", "Criteria": "y"}\n',
     "question id 2 is given to more than one row"),
    ("ja_mt_bench_1shot.jsonl", '{"id": "abc", "category": "c", "Question": "a"}\n', "a row mt_bench cannot read"),
    ("rakuda.csv", 'category,question_id,text\nc,q1,"unterminated\n', "not valid CSV"),
])
def test_rows_that_would_be_asked_wrongly_are_refused_with_where_they_are(tmp_path, name, text, needle):
    _write(tmp_path, name, text)
    benchmark = {"rakuda": "rakuda", "ja_mt_bench_1shot": "mt_bench", "tengu_bench": "tengu"}[name.split(".")[0]]
    with pytest.raises(DataError) as refused:
        bm.load(benchmark, tmp_path)
    assert needle in str(refused.value)


def test_two_files_for_one_benchmark_are_refused(tmp_path):
    _write(tmp_path, "rakuda.jsonl", '{"category": "c", "question_id": "q1", "text": "a"}\n')
    _write(tmp_path, "rakuda.csv", "category,question_id,text\nc,q1,b\n")
    with pytest.raises(DataError, match="two files for one benchmark"):
        bm.load("rakuda", tmp_path)


def test_mt_bench_full_turns_must_be_a_list(tmp_path):
    _write(tmp_path, "ja_mt_bench_full_2turn.jsonl", '{"question_id": 81, "category": "writing", "turns": "abc"}\n')
    _write(tmp_path, "ja_mt_bench_reference_gpt4.jsonl", '{"question_id": 81, "choices": [{"turns": ["x", "y"]}]}\n')
    with pytest.raises(DataError, match="turns is not a list"):
        bm.load("mt_bench_full", tmp_path)
