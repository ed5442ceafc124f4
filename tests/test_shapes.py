"""Odd but real response shapes over HTTP: the run survives each, keeps what it can read, stores an error row for
what it cannot, and every resume works; a journal row that cannot be stored is set aside, never a crash."""

from __future__ import annotations

import base64

import orjson
import pytest

import shaberi as shaberi_api
from shaberi.run_info import run_id_for
from shaberi.tables.store import Store, recover

from .conftest import query, said, shaberi, write_rakuda

SHAPES = ["blocks", "dict", "number", "usage_string", "tokens_bad", "tokens_huge", "finish_number"]


def test_every_response_shape_is_stored_or_an_error_row_and_the_run_resumes(server, tmp_path):
    data = write_rakuda(tmp_path / "d", [f"[[shape:{s}]] 質問{i}" for i, s in enumerate(SHAPES)])
    args = ["run", "--model", "m", "--base-url", server.base_url, "--benchmark", "rakuda", "--judge", "j",
            "--results-dir", str(tmp_path / "r"), "--data-dir", str(data)]
    first = shaberi(*args)
    assert first.returncode == 0, first.stderr
    assert "status: partial" in first.stdout
    rows = {q: rest for q, *rest in query(tmp_path / "r", """
        SELECT question_id, content IS NOT NULL, reasoning, error_type, attempts, prompt_tokens, completion_tokens,
               finish_reason FROM answers ORDER BY 1""")}
    assert rows["q0"][:2] == [True, "考えています。"]  # Magistral's blocks: text joined, thinking as reasoning
    assert rows["q1"][2:4] == ["bad_response", 1] and rows["q2"][2:4] == ["bad_response", 1]  # never retried
    assert rows["q3"][4:6] == [0, 0]  # usage that is not an object: no counts, not a crash
    assert rows["q4"][4:6] == [0, 0]  # "many" and -5
    assert rows["q5"][4] == 0  # 1e30
    assert rows["q6"][6] == "1"
    judged = query(tmp_path / "r", "SELECT question_id, score IS NOT NULL, error FROM judgements ORDER BY 1")
    assert [(q, ok) for q, ok, _ in judged] == [("q0", True), ("q1", False), ("q2", False), ("q3", True),
                                                 ("q4", True), ("q5", True), ("q6", True)]
    assert server.stats()["calls"] == 7 + 5  # the two unreadable answers are not sent to the judge
    server.reset()
    again = shaberi(*args)  # resume: the two error rows are asked again, once each; nothing crashes
    # Every call of this resume failed, as before: the state, and so the exit code, are as they were; it says why.
    assert again.returncode == 0 and "status: partial" in again.stdout
    assert "note: generate stage: all 2 calls failed; most common: bad_response: message.content is a" in again.stderr
    assert server.stats()["calls"] == 2
    assert query(tmp_path / "r", "SELECT count(*), count(error) FROM answers") == [(7, 2)]


def test_a_journal_row_that_cannot_be_stored_is_set_aside_and_the_rest_recovered(tmp_path, capfd):
    store = Store(tmp_path)
    good = {"run_id": "r1", "benchmark": "rakuda", "question_id": "q0", "sample_index": 0, "strategy": "",
            "model": "m", "content": "東京です。", "created_at": 1}
    bad = good | {"question_id": "q1", "content": [{"type": "text", "text": "a list"}]}  # written before the fix
    folder = tmp_path / "journal" / "r1"
    folder.mkdir(parents=True)
    lines = [["answers", good], ["answers", bad], ["no_such_table", {}], "not a pair"]
    (folder / "7.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines) + b'["answers", {"tor')
    assert recover(store, "r1") == 1
    assert store.read("answers", "r1").column("question_id").to_pylist() == ["q0"]
    kept = (tmp_path / "quarantine" / "r1" / "7.jsonl").read_text().splitlines()
    assert len(kept) == 3 and orjson.loads(kept[2])["reason"].startswith("answers: ")
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "3 journal row(s) of run r1 could not be stored" in err
    assert not (folder / "7.jsonl").exists() and recover(store, "r1") == 0  # the next resume has nothing to redo


def test_the_key_and_url_credentials_never_reach_disk(server, tmp_path):
    data = write_rakuda(tmp_path / "d", ["[[fail:echo]] 質問0", "質問1"])
    key = "sk-test-0123456789abcdef"
    echoed = shaberi("run", "--model", "m", "--base-url", server.base_url, "--api-key-env", "MY_KEY", "--benchmark",
                     "rakuda", "--results-dir", str(tmp_path / "r"), "--data-dir", str(data), env={"MY_KEY": key})
    assert echoed.returncode == 0, echoed.stderr  # one answer of two failed: partial
    errors = query(tmp_path / "r", "SELECT error FROM answers WHERE error IS NOT NULL")
    assert errors == [("HTTP 401: invalid credentials: Authorization: Bearer [redacted]",)]
    # Credentials in a URL: basic auth to the server, never stored (base URL, judges, stages, export).
    with_creds = server.base_url.replace("http://", "http://user:pw-secret-42@")
    stored = shaberi("run", "--model", "m", "--base-url", with_creds, "--benchmark", "rakuda", "--judge", "j",
                     "--tag", "creds", "--results-dir", str(tmp_path / "r"), "--data-dir", str(data))
    assert stored.returncode == 0, stored.stderr
    assert query(tmp_path / "r", "SELECT base_url, judges FROM runs WHERE tag = 'creds'") == [
        (server.base_url, [f"j@{server.base_url}"])]
    # A server that echoes Basic credentials (user:password@ in the URL) in its 401: base64 is no disguise.
    basic = server.base_url.replace("http://", "http://alice:Pa55SECRETword@")
    echoed_basic = shaberi("run", "--model", "m", "--base-url", basic, "--benchmark", "rakuda", "--tag", "basic",
                           "--results-dir", str(tmp_path / "r"), "--data-dir", str(data))
    assert echoed_basic.returncode == 0, echoed_basic.stderr
    assert query(tmp_path / "r", "SELECT error FROM answers WHERE error IS NOT NULL AND run_id LIKE 'basic%'") == [
        ("HTTP 401: invalid credentials: Authorization: Basic [redacted]",)]
    b64 = base64.b64encode(b"alice:Pa55SECRETword")
    written = b"".join(p.read_bytes() for p in (tmp_path / "r").rglob("*") if p.is_file())
    assert key.encode() not in written and b"pw-secret-42" not in written
    assert b64 not in written and b64.rstrip(b"=") not in written and b"Pa55SECRETword" not in written
    shown = "".join(p.stdout + p.stderr for p in (echoed, stored, echoed_basic))
    assert not any(s in shown for s in (key, "pw-secret-42", "Pa55SECRETword", b64.decode().rstrip("=")))


def test_redaction_rules():
    import pytest

    from shaberi.errors import UsageError
    from shaberi.llm.client import ChatClient
    from shaberi.redact import redact, strip_credentials, url_secrets

    assert strip_credentials("at https://u:p@api.x/v1 and http://h/v1") == "at https://api.x/v1 and http://h/v1"
    text = 'key mykey-123 {"authorization": "Bearer abc.def"} sk-proj-AAAAAAAAAAAA AIzaSyBBBBBBBBBBBB'
    assert redact(text, ["mykey-123", None, ""]) == ('key [redacted] {"authorization": "Bearer [redacted]"} '
                                                    "[redacted] [redacted]")
    # Every Authorization scheme, Basic tokens anywhere, a known secret in base64; ordinary words stay.
    assert redact("Authorization: Digest username=x; authorization=Token abc") == (
        "Authorization: Digest [redacted]; authorization=Token [redacted]")
    assert redact("got Basic dXNlcjpwYXNz back") == "got Basic [redacted] back"
    secret = base64.b64encode(b"alice:Pa55SECRETword").decode()
    assert redact(f"echo {secret} / {secret.rstrip('=')}", url_secrets("http://alice:Pa55SECRETword@h/v1")) == (
        "echo [redacted] / [redacted]")
    assert redact("token limit exceeded; basic usage") == "token limit exceeded; basic usage"
    with pytest.raises(UsageError, match="user:password@ and an API key cannot both be sent"):
        ChatClient("http://u:p@127.0.0.1:9/v1", "sk-x")


def test_a_corrupt_part_is_one_line_naming_it_in_every_command(server, tmp_path):
    """Under a root whose name holds what a glob escape looks like (``[*]``): DuckDB names a corrupt file as it
    found it, which undoing glob_literal's escapes would turn into another path (and "was replaced" with exit 1)."""
    data = write_rakuda(tmp_path / "d", ["質問0", "質問1"])
    root = str(tmp_path / "a[*]b" / "r")
    args = ["--model", "m", "--base-url", server.base_url, "--benchmark", "rakuda", "--results-dir", root,
            "--data-dir", str(data)]
    assert shaberi("run", *args).returncode == 0
    (part,) = (tmp_path / "a[*]b" / "r" / "tables" / "answers").glob("*/part-*.parquet")
    part.write_bytes(part.read_bytes()[:40])  # truncated, as by a full disk or a bad copy
    for command in (["view"], ["sql", "SELECT count(*) FROM answers"], ["export"], ["leaderboard", "--tag", "default"],
                    ["run", *args[:-4], "--judge", "j", "--stages", "judge"]):
        proc = shaberi(*command, *(["--results-dir", root] if command[0] != "run" else ["--results-dir", root,
                                                                                         "--data-dir", str(data)]))
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (command, proc.stderr)
        assert proc.stderr.startswith(f"error: cannot read {part}: ") and "move that part out" in proc.stderr
    from shaberi.errors import UnreadablePart

    with pytest.raises(UnreadablePart, match="move that part out") as caught:  # a notebook: the same error, by type
        shaberi_api.open(root).sql("SELECT count(*) FROM answers")
    assert str(caught.value).startswith(f"cannot read {part}: ")


def test_a_part_found_corrupt_midway_stops_the_run_interrupted_not_failed(server, tmp_path):
    """The judge stage finds its stored judgements unreadable after the run began: one line, exit 2, and the run is
    ``interrupted`` (the same command resumes it once the part is restored), never ``failed`` by what the disk did."""
    data = write_rakuda(tmp_path / "d", ["質問0", "質問1"])
    args = ["run", "--model", "m", "--base-url", server.base_url, "--benchmark", "rakuda", "--judge", "j",
            "--results-dir", str(tmp_path / "r"), "--data-dir", str(data)]
    assert shaberi(*args).returncode == 0
    (part,) = (tmp_path / "r" / "tables" / "judgements").glob("*/part-*.parquet")
    whole = part.read_bytes()
    part.write_bytes(whole[:64])
    for _ in range(2):  # the same state, the same code
        proc = shaberi(*args)
        errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert len(errors) == 1 and errors[0].startswith(f"error: cannot read {part}: "), proc.stderr
    (row,) = Store(tmp_path / "r").read("runs", run_id_for("m", "default")).to_pylist()
    assert row["status"] == "interrupted" and row["error"].startswith(f"cannot read {part}"), row
    part.write_bytes(whole)
    server.reset()
    again = shaberi(*args)
    assert again.returncode == 0 and server.stats()["calls"] == 0, again.stderr  # resumed: nothing paid twice
    assert query(tmp_path / "r", "SELECT status FROM runs") == [("ok",)]


def test_what_the_disk_does_is_one_line_with_what_to_do():
    import errno

    full = said(OSError(errno.ENOSPC, "No space left on device", "/r/tables/x.parquet"))
    assert full == ("no space left on the device writing /r/tables/x.parquet: free some space and run the same "
                    "command again (what was done is kept)", 1)
    locked = said(PermissionError(errno.EROFS, "Read-only file system", "/r/journal"))
    assert locked is not None and locked[1] == 2 and "choose another --results-dir" in locked[0]
    assert said(ValueError("a bug")) is None  # anything else keeps its traceback


