"""The persisted tables, declared once: the contract between stages, SQL views and exports.

Every table is partitioned by ``run_id``. Rows are appended; when a key is written again the row with
the greatest ``Table.version`` (``created_at``; a run's row: ``updated_at``) wins, ties going to the row written
last. That ordering is declared here once: the SQL views (``sql.latest_row``, ``{latest:TABLE}`` in
``sql/010_tables.sql``) and the store's reads and compaction (``store._latest``) both take it from here.
``token_usage``'s rows are increments and are summed.

Column types are named here, not built as Arrow types, so that read-only commands (``leaderboard``,
``view``) can declare their DuckDB views without importing pyarrow; ``Table.schema`` builds the Arrow
schema on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["TABLES", "Table"]

TS, STR, I32, I64, F64, BOOL, STR_LIST = "timestamp", "string", "int32", "int64", "float64", "bool", "list<string>"
_DUCKDB = {TS: "TIMESTAMPTZ", STR: "VARCHAR", I32: "INTEGER", I64: "BIGINT", F64: "DOUBLE", BOOL: "BOOLEAN",
           STR_LIST: "VARCHAR[]"}


def _arrow(kind: str) -> pa.DataType:
    import pyarrow as pa

    return {TS: pa.timestamp("us", tz="UTC"), STR: pa.string(), I32: pa.int32(), I64: pa.int64(),
            F64: pa.float64(), BOOL: pa.bool_(), STR_LIST: pa.list_(pa.string())}[kind]


@dataclass(frozen=True)
class Table:
    name: str
    fields: tuple[tuple[str, str], ...]  # (column, type name)
    key: tuple[str, ...]
    additive: bool = False  # rows are increments to be summed, not versions of a key
    derive: Callable[[pa.Table], pa.Table] | None = None  # fills derived columns whenever a part is written
    version: str = "created_at"  # a key's latest row has the greatest value here (ties: the row written last)

    @cached_property
    def columns(self) -> list[str]:
        return [name for name, _ in self.fields]

    @cached_property
    def column_set(self) -> frozenset[str]:
        """The columns as a set: every row built is checked against it."""
        return frozenset(self.columns)

    @property
    def duckdb_columns(self) -> list[tuple[str, str]]:
        return [(name, _DUCKDB[kind]) for name, kind in self.fields]

    @cached_property
    def schema(self) -> pa.Schema:
        import pyarrow as pa

        return pa.schema([(name, _arrow(kind)) for name, kind in self.fields])


def _t(name: str, key: tuple[str, ...], fields: list[tuple[str, str]], additive: bool = False,
       derive: Callable[[pa.Table], pa.Table] | None = None, version: str = "created_at") -> Table:
    return Table(name, tuple(fields), key, additive, derive, version)


def _count_scripts(data: pa.Table) -> pa.Table:
    """answers.japanese_chars / letter_chars from content (see ``scripts``)."""
    import pyarrow as pa

    from ..unicode_scripts import japanese_counts

    japanese, letters = japanese_counts(data.column("content").to_pylist())
    for name, values in (("japanese_chars", japanese), ("letter_chars", letters)):
        data = data.set_column(data.schema.get_field_index(name), name, pa.array(values, pa.int32()))
    return data


# An answer's identity: also the first columns of every table that refers to an answer.
_ANSWER_FIELDS = [("run_id", STR), ("benchmark", STR), ("question_id", STR), ("sample_index", I32), ("strategy", STR)]
_ANSWER_KEY = tuple(name for name, _ in _ANSWER_FIELDS)

TABLES: dict[str, Table] = {
    t.name: t
    for t in [
        _t(
            "runs",
            ("run_id",),
            [
                ("run_id", STR),
                ("tag", STR),  # --tag: names the run with the model
                ("base_tag", STR),  # a family's tag without -runN (else the tag)
                ("run_index", I32),  # N of a family's {tag}-runN (1 for a single run)
                ("model", STR),  # the candidate model's name
                ("base_url", STR),  # the candidate's endpoint, without credentials
                ("api_key_sha256", STR),  # first 12 hex digits of sha256(key); never the key
                ("generation_config", STR),  # JSON
                ("benchmarks", STR_LIST),  # the benchmarks run
                ("judges", STR_LIST),  # MODEL@URL of each judge
                ("passes", STR_LIST),  # name@version of each pass that has run
                ("pass_config", STR),  # JSON: pass -> {version, options}
                ("datasets", STR),  # JSON: benchmark -> {file, sha256, rows, questions}
                ("prompt_hashes", STR),  # JSON: template path -> sha256 prefix
                ("judge_prompts", STR),  # JSON: prompt set label ("shaberi": its own prompts) -> its provenance
                # JSON: model -> {input, output[, cached_input, batch_input, batch_output]}: the entries of the
                # --pricing files the run's commands were given, which its cost is priced with (sql/045_cost.sql)
                ("pricing", STR),
                ("git_commit", STR),  # of shaberi's checkout, when run from one
                ("git_dirty", BOOL),  # the checkout had uncommitted changes
                ("package_versions", STR),  # JSON
                # JSON: endpoint label -> one entry per invocation:
                # {history: [[seconds, limit, why]], requests, rate_limited, retries, notes}
                ("concurrency_history", STR),
                ("status", STR),  # running | ok | partial | failed (a dead writer's running: interrupted)
                ("error", STR),  # why the run failed (its most common error)
                ("stages", STR),  # JSON: stage -> {status, calls, failed, error, error_count} of its last run
                ("created_at", TS),
                ("updated_at", TS),  # last written
            ],
            version="updated_at",  # every stage rewrites the run's row: the last written is the run
        ),
        _t(
            "questions",
            ("run_id", "benchmark", "question_id"),
            [
                ("run_id", STR),
                ("benchmark", STR),
                ("question_id", STR),
                ("turns", STR_LIST),  # the user turns, in order
                ("reference", STR),  # the benchmark's reference answer, if any
                ("criteria", STR),  # the benchmark's grading notes for the question, if any
                ("category", STR),  # the benchmark's category of the question
                ("extra", STR),  # JSON: upstream columns we do not map
                ("created_at", TS),
            ],
        ),
        _t(
            "answers",
            _ANSWER_KEY,
            [
                *_ANSWER_FIELDS,  # strategy is "" for raw answers
                ("model", STR),  # the model that answered
                ("content", STR),  # null when the call failed
                ("raw_content", STR),  # the reply as returned, where a think block was split off content (else null)
                ("japanese_chars", I32),  # kana and kanji in content, counted when written
                ("letter_chars", I32),  # letters and digits of any script in content
                ("reasoning", STR),  # stripped <think> text and reasoning_content
                ("finish_reason", STR),  # as the endpoint said (length: cut off)
                ("error", STR),  # why the call failed (null: it did not)
                ("error_type", STR),  # the failure's kind: rate_limit, http_5xx, …
                ("attempts", I32),  # HTTP attempts behind this row, summed over resumes
                ("calls", I32),  # times this row was requested (1, then +1 per retry of an error row)
                ("latency_ms", F64),  # the answering request's round trip (not time queued in the client)
                ("prompt_tokens", I64),  # as the endpoint reported
                ("completion_tokens", I64),  # as the endpoint reported
                ("reasoning_tokens", I64),  # of completion_tokens, thinking (usage.completion_tokens_details)
                ("cached_prompt_tokens", I64),  # of prompt_tokens, served from the provider's cache (priced apart)
                ("request_hash", STR),  # of what the model was sent (messages and sampling)
                ("answer_hash", STR),  # of the text a judge sees (see ``lineage``); null in parts older than it
                ("via", STR),  # how the answer came: sync | batch (null in parts older than it, and for an error)
                ("batch_id", STR),  # the provider's batch that answered it (via batch: ``run --batch``)
                ("created_at", TS),
            ],
            derive=_count_scripts,
        ),
        _t(
            "judgements",
            # One row per answer, judge, judging prompt (or rule grader version), judged text and time: a new
            # prompt, new rules, a regenerated answer or the same judgement asked again (--rejudge, a retried
            # failure) add a row, the older ones stay as history (``sql/015_lineage.sql`` says which one counts).
            # Rows are read oldest first, so a dict built from them keeps each identity's newest.
            (*_ANSWER_KEY, "judge", "prompt_hash", "grader_version", "answer_hash", "created_at"),
            [
                *_ANSWER_FIELDS,
                ("judge", STR),  # the judge model (a pooled or prompt-set label in views)
                ("score", F64),  # null when unparseable, never 0
                ("shaberi_score", F64),  # under another prompt set's reading: the same replies read by Shaberi's
                ("score_scale", STR),  # e.g. 1-10, 1-5
                ("parse_method", STR),  # which rule of the verdict grammar read the score
                ("judge_output", STR),  # the judge's reply
                ("fallback_output", STR),  # the reply to the fallback prompt, if asked
                ("finish_reason", STR),  # of the judge's first reply: "length" (cut off) is never read for a score
                ("fallback_finish_reason", STR),  # of the fallback reply
                ("prompt_hash", STR),  # of the judging templates (null: no prompt, a rule grader)
                ("prompt_set", STR),  # the prompt set's label (null: Shaberi's own; shaberi.judging.promptsets)
                ("grader_version", STR),  # of an ensemble rule grader's rules (null: a judge model)
                ("answer_hash", STR),  # of the judged text: a regenerated answer is judged again
                ("prompt_tokens", I64),  # as the judge's endpoint reported
                ("completion_tokens", I64),  # as the judge's endpoint reported
                ("reasoning_tokens", I64),  # of completion_tokens
                ("cached_prompt_tokens", I64),  # of prompt_tokens
                ("error", STR),  # answer_error | unparseable: … | judge_error: …
                ("via", STR),  # how the judge's first reply came: sync | batch (null in parts older than it)
                ("batch_id", STR),  # the provider's batch that answered it (via batch)
                ("created_at", TS),
            ],
        ),
        _t(
            "pass_deltas",
            (*_ANSWER_KEY, "judge", "pass_name"),
            [
                *_ANSWER_FIELDS,
                ("judge", STR),  # the judge whose score it changes ('': every judge)
                ("pass_name", STR),  # e.g. lang_mixing
                ("pass_version", STR),  # of the pass's rules
                ("delta", F64),  # on the benchmark's scale; 0: checked, nothing to change
                ("reason", STR),  # why, in a few words
                ("detail", STR),  # JSON
                ("answer_hash", STR),  # of the checked text (a model's verdict is reused only for the same text)
                ("prompt_tokens", I64),  # of the pass's model calls, if any
                ("completion_tokens", I64),  # of the pass's model calls
                ("created_at", TS),
            ],
        ),
        _t(
            "pairwise",
            # One row per question, ordered pair of runs (the first shown as A), judge, pairwise prompt, both judged
            # texts and time (``shaberi pairwise``): as for judgements, asking again adds a row, the older ones stay
            # as history (``sql/080_pairwise.sql`` says which one counts and how the two orders combine).
            ("run_id", "benchmark", "question_id", "run_a", "run_b", "judge", "prompt_hash", "answer_hash_a",
             "answer_hash_b", "created_at"),
            [
                ("run_id", STR),  # the pairwise job that wrote it (pairwise-…: its tags and judge), not a model's run
                ("benchmark", STR),
                ("question_id", STR),
                ("run_a", STR),  # the run whose answer was shown first, as A
                ("run_b", STR),  # the run whose answer was shown second, as B
                ("judge", STR),  # the judge model
                ("prompt_hash", STR),  # of the benchmark's pairwise templates (prompts.pairwise_hash)
                ("answer_hash_a", STR),  # of A's judged text (``lineage``): a regenerated answer is judged again
                ("answer_hash_b", STR),  # of B's judged text
                ("verdict", STR),  # A | B | TIE as the judge chose (extract.choose); null: none read
                ("judge_output", STR),  # the judge's reply
                ("fallback_output", STR),  # the reply to the fallback prompt, if asked
                ("finish_reason", STR),  # of the judge's first reply ("length": cut off, never read)
                ("fallback_finish_reason", STR),  # of the fallback reply
                ("prompt_tokens", I64),  # as the judge's endpoint reported (both calls)
                ("completion_tokens", I64),
                ("reasoning_tokens", I64),  # of completion_tokens
                ("cached_prompt_tokens", I64),  # of prompt_tokens
                ("error", STR),  # unparseable: … | judge_error: …
                ("created_at", TS),
            ],
        ),
        _t(
            "pairwise_ratings",
            # Bradley–Terry ratings a pairwise job fitted from its outcomes (``shaberi.pairwise.ratings``), per
            # benchmark and overall; each fit adds rows, the latest counts (the ``pairwise_ratings`` view).
            ("run_id", "judge", "benchmark", "rated_run", "created_at"),
            [
                ("run_id", STR),  # the pairwise job (pairwise-…)
                ("judge", STR),
                ("benchmark", STR),  # '*': every compared benchmark's questions together
                ("rated_run", STR),  # the run rated
                ("tag", STR),  # its name as --tags gave it: its tag, or MODEL@TAG
                ("rating", F64),  # Elo-like: 400 points are 10:1 odds; the anchor at 1000
                ("low", F64),  # 2.5th percentile over the bootstrap over questions; -inf: open below
                ("high", F64),  # 97.5th percentile; inf: open above
                ("open_low", F64),  # share of resamples with no finite fit below (over 2.5 %: low is -inf)
                ("open_high", F64),  # share of resamples with no finite fit above (over 2.5 %: high is inf)
                ("comparisons", I64),  # questions it was compared on (each both orders)
                ("win_rate", F64),  # its share of those, a tie half
                ("anchor", STR),  # the tag at 1000
                ("design", STR),  # which pairs were compared, in words
                ("compared_with", STR_LIST),  # the runs the design compares it with (the job's pairs)
                ("benchmarks", STR_LIST),  # the benchmarks the job compares on (--benchmark, else all)
                ("regularised", BOOL),  # the point fit needed a prior (a tag won or lost everything)
                ("bootstrap", I32),  # resamples
                ("seed", I64),
                ("created_at", TS),
            ],
        ),
        _t(
            "batches",
            # A provider batch a stage submitted, journaled before anything waits on it; a later row of the same
            # batch says it was collected. A run resumed collects the batches it submitted and has not collected
            # instead of submitting their requests again.
            ("run_id", "batch_id"),
            [
                ("run_id", STR),
                ("batch_id", STR),  # the provider's id
                ("endpoint", STR),  # its base URL, without credentials
                ("stage", STR),  # judging
                ("custom_ids", STR_LIST),  # its requests: a hash of each body (``llm.batch_api.custom_id``)
                ("status", STR),  # submitted | collected
                ("created_at", TS),
            ],
        ),
        _t(
            "token_usage",
            ("run_id", "stage", "benchmark", "model"),
            [
                ("run_id", STR),
                ("stage", STR),  # generation | judging | passes | consensus
                ("benchmark", STR),
                ("model", STR),  # the model called
                ("requests", I64),  # HTTP requests sent, retries included
                ("prompt_tokens", I64),  # summed
                ("completion_tokens", I64),  # summed
                ("reasoning_tokens", I64),  # of completion_tokens (null in parts older than it)
                ("cached_prompt_tokens", I64),  # of prompt_tokens: priced at the cached input rate
                ("batch_prompt_tokens", I64),  # of prompt_tokens, sent through a Batch API: priced at its rate
                ("batch_completion_tokens", I64),  # of completion_tokens, answered through a Batch API
                ("cached_requests", I64),  # no longer written (0): the token_usage view counts reuse from the tables
                ("created_at", TS),
            ],
            additive=True,
        ),
    ]
}
