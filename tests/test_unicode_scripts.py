"""Japanese character counts stored with every answer: the numbers `% JA` is built from."""

from __future__ import annotations

from shaberi.tables.store import Store, now_us
from shaberi.unicode_scripts import japanese_counts

from .conftest import query


def test_counts_by_script_on_hand_written_answers():
    texts = [
        "日本の首都は東京です。",  # kanji and hiragana; 。 is punctuation
        "コーヒー・ブレイク",  # ー and ・ are script Common, not Katakana; ー is a letter (Lm), ・ is not
        "Python 3.12 で動く",  # Latin letters and digits count as letters, not as Japanese
        "东京",  # simplified 东 is still script Han: % JA is a coarse heuristic (lang_mixing is the fine one)
        "안녕하세요 привет",  # Hangul, Cyrillic: letters, not Japanese
        "ｶﾀｶﾅ１２３",  # half-width katakana; full-width digits are letters of no script
        "𠮷野家",  # a kanji outside the BMP
        "",
        None,
    ]
    japanese, letters = japanese_counts(texts)
    assert japanese == [10, 6, 3, 2, 0, 4, 3, 0, None]
    assert letters == [10, 8, 12, 2, 11, 7, 3, 0, None]


def test_every_write_path_fills_the_counts(tmp_path):
    store = Store(tmp_path)
    row = {"run_id": "r", "benchmark": "rakuda", "sample_index": 0, "strategy": "", "created_at": now_us()}
    store.write_part("answers", "r", [{**row, "question_id": "1", "content": "こんにちは world"}])
    journal = store.journal("r")
    journal.append_many([("answers", {**row, "question_id": "2", "content": "漢字"}),
                         ("answers", {**row, "question_id": "3", "content": None, "error": "timeout"})])
    journal.close()
    assert query(tmp_path, "SELECT question_id, japanese_chars, letter_chars FROM answers ORDER BY 1") == [
        ("1", 5, 10), ("2", 2, 2), ("3", None, None)]
