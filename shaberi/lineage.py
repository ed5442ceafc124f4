"""What a score is made of: the identity of the text a judge (or a pass) saw.

An answer row stores ``answer_hash``: the hash of the text a judge is shown for it — the answer, and for a
later turn of a conversation the model's own earlier answers too. Every judgement and pass delta stores
the hash of the text it judged or checked. The rule, applied once in ``sql/015_lineage.sql`` and read by
every view, report and export:

- a judgement counts only while its ``answer_hash`` is the answer's (legacy imports, which have none,
  and answers written before the hash was stored are taken as they are);
- of one judge's judgements of the same text, the latest counts (a newer judging prompt supersedes an
  older one; a run only ever judged under an older prompt keeps its scores);
- everything else stays in the tables as history (``judgement_history``: ``stale`` or ``superseded``)
  and is counted as such (``coverage``), never averaged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .tables.rows import AnswerKey

if TYPE_CHECKING:
    from .tables.typed import QuestionRow, Questions, Texts

__all__ = ["answer_hash", "call_failed", "conversation_hash", "earlier_turns"]


def call_failed(error: str | None) -> bool:
    """Whether a stored judgement's judge call failed (its ``error`` column): it is asked again. Any other verdict
    stored for the same answer text under the same judging identity (judge, prompt hash or grader version) is
    final and reused, never paid for twice: the judge stage's rule and the ensemble's grading stage's."""
    return error is not None and error.startswith("judge_error")


def answer_hash(content: str | None) -> str:
    return hashlib.sha256((content or "").encode()).hexdigest()[:16]


def conversation_hash(earlier: list[str], content: str | None) -> str:
    """The hash of an answer together with the model's earlier answers in the same conversation (oldest
    first); equal to ``answer_hash(content)`` for a single turn."""
    return answer_hash("\0".join([*earlier, content or ""]))


def earlier_turns(question: QuestionRow, answer: Mapping[str, Any], questions: Questions, texts: Texts
                  ) -> list[dict[str, str]]:
    """The earlier turns of a conversation, as the model answered them ({user, assistant}), oldest first.
    ``questions`` maps (benchmark, question_id) to rows with ``extra`` parsed; ``texts`` maps ``AnswerKey``s
    to contents."""
    turns, key = [], question["extra"].get("previous")
    while key is not None:
        earlier = questions[(answer["benchmark"], key)]
        text = texts.get(AnswerKey(answer["benchmark"], key, answer["sample_index"], answer["strategy"]))
        turns.append({"user": earlier["turns"][-1], "assistant": text or ""})
        key = earlier["extra"].get("previous")
    return turns[::-1]
