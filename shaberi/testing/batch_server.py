"""The loopback server's Batch API, as OpenAI's: ``POST /v1/files`` (multipart, purpose ``batch``), ``POST
/v1/batches``, ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``, ``GET /v1/files/{id}/content``.

Each line of a batch is answered by the server's own chat handler (the same replies, faults and judge verdicts
as a synchronous call), its requests spread over ``--batch-seconds`` (the batch completes then). A line whose
reply is no 2xx goes to the error file with its status; one whose messages hold ``[[batch:fail]]`` goes there
as a server error, the others of its batch to the output file (a partial error file).
``POST /_batches/expire`` makes every batch in progress expire now: what it answered so far is in its output
file, the rest in its error file as ``batch_expired``, as OpenAI does after the completion window.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

__all__ = ["BatchAPI"]

TERMINAL = ("completed", "failed", "expired", "cancelled")


class _Line:
    """A batch line as the chat handler reads a request."""

    def __init__(self, url: str, body: dict[str, Any]) -> None:
        self.path, self._body = url, orjson.dumps(body)
        self.headers: dict[str, str] = {}
        self._seen: dict[str, Any] = {}

    async def read(self) -> bytes:
        return self._body

    def __setitem__(self, key: str, value: Any) -> None:
        self._seen[key] = value


class _Work:
    """A batch's lines and what became of them so far."""

    def __init__(self, lines: list[dict[str, Any]]) -> None:
        self.lines, self.done = lines, 0
        self.out: list[dict[str, Any]] = []
        self.err: list[dict[str, Any]] = []


class BatchAPI:
    def __init__(self, answer: Callable[[Any], Awaitable[web.Response]], seconds: float) -> None:
        self.answer, self.seconds = answer, seconds
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}  # what GET /v1/batches/{id} answers
        self._tasks: dict[str, asyncio.Task] = {}
        self._work: dict[str, _Work] = {}
        self._ids = itertools.count(1)
        self.created = self.answered = self.uploads = 0

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/files", self.upload)
        app.router.add_get("/v1/files/{id}/content", self.content)
        app.router.add_post("/v1/batches", self.create)
        app.router.add_get("/v1/batches/{id}", self.get)
        app.router.add_post("/v1/batches/{id}/cancel", self.cancel)
        app.router.add_post("/_batches/expire", self.expire)

    async def upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        if form.get("purpose") != "batch" or not isinstance(upload, web.FileField):
            return _error(400, "a batch file needs purpose=batch and a file part")
        file_id = f"file-{next(self._ids)}"
        self.files[file_id] = upload.file.read()
        self.uploads += 1
        return web.json_response({"id": file_id, "object": "file", "bytes": len(self.files[file_id]),
                                  "created_at": int(time.time()), "filename": upload.filename, "purpose": "batch"})

    async def content(self, request: web.Request) -> web.Response:
        data = self.files.get(request.match_info["id"])
        if data is None:
            return _error(404, "no such file")
        return web.Response(body=data, content_type="application/octet-stream")

    async def create(self, request: web.Request) -> web.Response:
        spec = orjson.loads(await request.read())
        data = self.files.get(spec.get("input_file_id", ""))
        if data is None:
            return _error(400, "no such input file")
        batch_id = f"batch_{next(self._ids)}"
        now = int(time.time())
        batch = {"id": batch_id, "object": "batch", "endpoint": spec.get("endpoint"), "errors": None,
                 "input_file_id": spec["input_file_id"], "completion_window": spec.get("completion_window", "24h"),
                 "status": "validating", "output_file_id": None, "error_file_id": None, "created_at": now,
                 "in_progress_at": None, "expires_at": now + 86400, "finalizing_at": None, "completed_at": None,
                 "failed_at": None, "expired_at": None, "cancelling_at": None, "cancelled_at": None,
                 "request_counts": {"total": 0, "completed": 0, "failed": 0}, "metadata": spec.get("metadata")}
        self.batches[batch_id] = batch
        self.created += 1
        lines, problems = _parse(data, batch["endpoint"])
        if problems:
            batch.update(status="failed", failed_at=now, errors={"object": "list", "data": problems})
        else:
            batch.update(status="in_progress", in_progress_at=now)
            batch["request_counts"]["total"] = len(lines)
            self._work[batch_id] = _Work(lines)
            self._tasks[batch_id] = asyncio.create_task(self._run(batch))
        return web.json_response(batch)

    async def get(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["id"])
        return web.json_response(batch) if batch else _error(404, "no such batch")

    async def cancel(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return _error(404, "no such batch")
        if batch["status"] not in TERMINAL:
            self._tasks[batch["id"]].cancel()
            await asyncio.gather(self._tasks[batch["id"]], return_exceptions=True)
            self._finish(batch, "cancelled", "batch_cancelled")
        return web.json_response(batch)

    async def expire(self, request: web.Request) -> web.Response:
        running = [b for b in self.batches.values() if b["status"] not in TERMINAL]
        for batch in running:
            self._tasks[batch["id"]].cancel()
            await asyncio.gather(self._tasks[batch["id"]], return_exceptions=True)
            self._finish(batch, "expired", "batch_expired")
        return web.json_response({"expired": [b["id"] for b in running]})

    async def _run(self, batch: dict[str, Any]) -> None:
        work = self._work[batch["id"]]
        loop, began = asyncio.get_running_loop(), asyncio.get_running_loop().time()
        for i, line in enumerate(work.lines):  # line i is due at its share of the batch's time, not after it
            await asyncio.sleep(max(0.0, began + self.seconds * (i + 1) / len(work.lines) - loop.time()))
            response = await self.answer(_Line(line["url"], line["body"]))
            self.answered += 1
            try:
                body = orjson.loads(response.body)  # type: ignore[arg-type]
            except orjson.JSONDecodeError:
                body = None
            record = {"id": f"batch_req_{batch['id']}_{i}", "custom_id": line["custom_id"],
                      "response": {"status_code": response.status, "request_id": f"req_{i}", "body": body},
                      "error": None}
            if b"[[batch:fail]]" in orjson.dumps(line["body"]):
                record.update(response=None, error={"code": "server_error", "message": "the request failed"})
            (work.out if record["error"] is None and response.status < 400 else work.err).append(record)
            work.done = i + 1
            batch["request_counts"].update(completed=len(work.out), failed=len(work.err))
        self._finish(batch, "completed", "")

    def _finish(self, batch: dict[str, Any], status: str, leftover: str) -> None:
        """``status`` now, with the output and error files written (the lines not answered: ``leftover``)."""
        now = int(time.time())
        work = self._work.pop(batch["id"])
        out, err = work.out, work.err + [
            {"id": f"batch_req_{batch['id']}_left_{i}", "custom_id": line["custom_id"], "response": None,
             "error": {"code": leftover, "message": f"not processed: the batch is {status}"}}
            for i, line in enumerate(work.lines[work.done:])]
        for key, rows in (("output_file_id", out), ("error_file_id", err)):
            if rows:
                file_id = f"file-{next(self._ids)}"
                self.files[file_id] = b"".join(orjson.dumps(r) + b"\n" for r in rows)
                batch[key] = file_id
        batch["request_counts"].update(completed=len(out), failed=len(err))
        batch.update(status=status, finalizing_at=now, **{f"{status}_at": now})


def _parse(data: bytes, endpoint: str | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A batch input file's lines, and what is wrong with it (OpenAI's validation: each line a POST to the
    batch's endpoint with a unique ``custom_id``)."""
    lines, problems, seen = [], [], set()
    for number, raw in enumerate(data.splitlines(), start=1):
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError:
            problems.append({"code": "invalid_json_line", "message": "not JSON", "line": number})
            continue
        if line.get("method") != "POST" or line.get("url") != endpoint or not isinstance(line.get("body"), dict):
            problems.append({"code": "invalid_request", "message": f"not a POST to {endpoint}", "line": number})
        elif line.get("custom_id") in seen:
            problems.append({"code": "duplicate_custom_id", "message": "custom_id repeated", "line": number})
        else:
            seen.add(line["custom_id"])
            lines.append(line)
    return lines, problems if problems or lines else [{"code": "empty_file", "message": "no requests", "line": 0}]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "invalid_request_error"}}, status=status)
