"""Chat calls through a provider's Batch API (OpenAI's, which Gemini, Together and ``vllm run-batch`` speak): about
half the price, answered within hours.

``BatchTransport`` sits under the client in place of the network (a ``Transport``): each chat request the client
sends waits in a queue; once none has come for ``linger`` seconds, or ``size`` are waiting, they are uploaded as
one file and a batch is created; the batch is polled until it ends, and each request gets the response its line
got, as if the endpoint had answered it directly. So the client's retries, parsing and errors, and everything
above them, are unchanged: a line the batch failed or left unprocessed (expired, cancelled) comes back as a 5xx,
which the client retries (in a later batch) as often as any 5xx; a follow-up a reply needs goes in a later batch.

A request's ``custom_id`` is a hash of its body: what the model sees. ``on_submit(batch_id, custom_ids)`` is
called once a batch exists, before anything waits on it, so that the caller can journal it; a later process
given those as ``known`` collects that batch for those requests instead of submitting them again.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from .. import errors
from .transport import Response, Transport

__all__ = ["BATCH_SIZE", "BatchTransport", "Batches", "custom_id"]

BATCH_SIZE = 50_000  # requests a batch holds at most (OpenAI's limit; 200 MB is the other)
TERMINAL = ("completed", "failed", "expired", "cancelled")
_PATHS = ("/chat/completions", "/responses")


def custom_id(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()[:32]


class Batches:
    """OpenAI's Batch API at one endpoint, over a transport: upload a file of requests, create a batch, poll it,
    read its output and error files. An HTTP failure of these calls is retried (``attempts``, backing off);
    one that persists, or a 4xx, raises ``errors.LLMError`` with its status."""

    def __init__(self, base_url: str, headers: Mapping[str, str], transport: Transport, timeout: float = 120.0,
                 attempts: int = 5) -> None:
        self.base_url, self.transport, self.timeout, self.attempts = base_url.rstrip("/"), transport, timeout, attempts
        self.headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}

    async def submit(self, endpoint: str, lines: list[tuple[str, bytes]]) -> dict[str, Any]:
        """A batch of ``lines`` ((custom_id, body) POSTed to ``endpoint``, e.g. ``/v1/chat/completions``)."""
        data = b"".join(b'{"custom_id":"' + cid.encode() + b'","method":"POST","url":"' + endpoint.encode()
                        + b'","body":' + body + b"}\n" for cid, body in lines)
        boundary = f"shaberi-{hashlib.sha256(data).hexdigest()[:24]}"
        form = (f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="shaberi.jsonl"\r\n'
                f"Content-Type: application/jsonl\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
        uploaded = await self._json("POST", "/files", form, f"multipart/form-data; boundary={boundary}")
        # not sent again when no answer came: the batch may exist (and be paid for) all the same
        return await self._json("POST", "/batches", orjson.dumps({
            "input_file_id": uploaded["id"], "endpoint": endpoint, "completion_window": "24h"}), "application/json",
            once=True)

    async def get(self, batch_id: str) -> dict[str, Any]:
        return await self._json("GET", f"/batches/{batch_id}", None, None)

    async def results(self, batch: dict[str, Any]) -> dict[str, tuple[int, bytes]]:
        """custom_id -> (status, body) of each line the ended ``batch`` answered or failed; a line it left
        unprocessed, or failed with no response, is a 503 naming why (the client retries it)."""
        found: dict[str, tuple[int, bytes]] = {}
        for key in ("output_file_id", "error_file_id"):
            if not batch.get(key):
                continue
            raw = await self._call("GET", f"/files/{batch[key]}/content", None, None)
            for line in raw.body.splitlines():
                record = orjson.loads(line)
                response, error = record.get("response"), record.get("error") or {}
                if response and response.get("body") is not None:
                    found[record["custom_id"]] = (int(response["status_code"]), orjson.dumps(response["body"]))
                else:
                    why = f"batch {batch['id']} {batch['status']}: {error.get('code')}: {error.get('message')}"
                    found[record["custom_id"]] = (503, orjson.dumps({"error": {"message": why}}))
        return found

    async def _json(self, method: str, path: str, body: bytes | None, content_type: str | None,
                    once: bool = False) -> dict[str, Any]:
        resp = await self._call(method, path, body, content_type, once)
        try:
            got = orjson.loads(resp.body)
        except orjson.JSONDecodeError:
            raise errors.BadResponseError(f"{method} {path} answered no JSON: {resp.body[:200]!r}") from None
        if not isinstance(got, dict):
            raise errors.BadResponseError(f"{method} {path} answered {type(got).__name__}, not an object")
        return got

    async def _call(self, method: str, path: str, body: bytes | None, content_type: str | None,
                    once: bool = False) -> Response:
        """``once``: a request the endpoint may have carried out though no answer came back is not sent again."""
        headers = dict(self.headers) | ({"Content-Type": content_type} if content_type else {})
        for attempt in range(self.attempts):
            try:
                resp = await self.transport.request(method, f"{self.base_url}{path}", body, headers, self.timeout)
            except (errors.ConnectError, errors.RequestTimeout):
                if once or attempt == self.attempts - 1:
                    raise
            else:
                if resp.status < 400:
                    return resp
                if (resp.status != 429 and resp.status < 500) or attempt == self.attempts - 1:
                    cls = errors.PermanentError if resp.status < 500 and resp.status != 429 else errors.ServerError
                    raise cls(f"{method} {path}: HTTP {resp.status}: {resp.body[:300].decode(errors='replace')}")
            await asyncio.sleep(min(30.0, 0.5 * 2 ** attempt))
        raise AssertionError("unreachable")


@dataclass
class _Waiting:
    path: str
    body: bytes
    answers: list[asyncio.Future] = field(default_factory=list)


class BatchTransport:
    """A ``Transport`` that sends chat requests through ``Batches`` (see the module); anything else (``/models``)
    goes to ``inner`` as it is."""

    def __init__(self, inner: Transport, base_url: str, *, size: int = BATCH_SIZE, max_bytes: int = 190 << 20,
                 linger: float = 0.5, poll: float = 10.0, on_submit: Callable[[str, list[str]], object] | None = None,
                 known: Mapping[str, str] | None = None) -> None:
        self.inner, self.api = inner, Batches(base_url, {}, inner)
        self.base_url = base_url.rstrip("/")
        self.size, self.max_bytes, self.linger, self.poll = size, max_bytes, linger, poll
        self.on_submit = on_submit
        self.known = dict(known or {})  # custom_id -> a batch submitted earlier whose results it takes
        self._queue: dict[str, _Waiting] = {}
        self._last = 0.0
        self._flusher: asyncio.Task | None = None
        self._collecting: dict[str, asyncio.Task] = {}  # batch id -> its collector: custom_id -> (status, body)
        self._running: set[asyncio.Task] = set()  # submissions under way (the loop keeps only weak references)
        self.submitted: list[str] = []  # batch ids, in order
        self._began = 0.0  # when the first was submitted (or collecting began)
        self.status: dict[str, dict[str, Any]] = {}  # batch id -> its last polled object
        self.notes: list[str] = []  # what the user should know (shown once each, as the client's notes are)

    async def request(self, method: str, url: str, body: bytes | None, headers: Mapping[str, str],
                      timeout: float) -> Response:
        path = url.removeprefix(self.base_url)
        if method != "POST" or body is None or not path.endswith(_PATHS):
            return await self.inner.request(method, url, body, headers, timeout)
        self.api.headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}  # the client's key
        cid = custom_id(body)
        answer: asyncio.Future = asyncio.get_running_loop().create_future()
        if (earlier := self.known.pop(cid, None)) is not None:  # submitted by an earlier process: collected
            task = self._collecting.get(earlier) or self._collect(earlier, {}, known=True)
            status, data = (await asyncio.shield(task)).get(cid) or _MISSING
            return Response(status, {}, data, earlier)
        self._queue.setdefault(cid, _Waiting(path, body)).answers.append(answer)
        self._last = time.monotonic()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_when_quiet())
        return await answer  # the batch's wait is as long as it takes: the per-request timeout is not for it

    async def _flush_when_quiet(self) -> None:
        while self._queue:
            quiet = self.linger - (time.monotonic() - self._last)
            if quiet > 0 and len(self._queue) < self.size:
                await asyncio.sleep(quiet)
                continue
            chunk: dict[str, _Waiting] = {}
            size = 0
            for cid in list(self._queue):
                if len(chunk) >= self.size or (size + len(self._queue[cid].body) > self.max_bytes and chunk):
                    break
                chunk[cid] = self._queue.pop(cid)
                size += len(chunk[cid].body) + 200
            self._submit(chunk)

    def _submit(self, chunk: dict[str, _Waiting]) -> None:
        async def go() -> None:
            by_path: dict[str, list[str]] = {}
            for cid, waiting in chunk.items():
                by_path.setdefault(waiting.path, []).append(cid)
            for path, cids in by_path.items():
                try:
                    batch = await self.api.submit(f"/v1{path}", [(cid, chunk[cid].body) for cid in cids])
                except errors.LLMError as exc:  # the upload or creation failed for good: each request says why
                    _answer_all([chunk[c] for c in cids], 503 if isinstance(exc, errors.ServerError) else 400,
                                orjson.dumps({"error": {"message": f"batch submission: {exc}"}}), None)
                    continue
                self._began = self._began or time.monotonic()
                self.submitted.append(batch["id"])
                self.status[batch["id"]] = batch
                if self.on_submit is not None:
                    self.on_submit(batch["id"], cids)  # journaled before anything waits on it
                results = await self._collect(batch["id"], batch)
                outcomes = {cid: results.get(cid) or _MISSING for cid in cids}
                if again := sum(status >= 500 for status, _ in outcomes.values()):
                    state = self.status.get(batch["id"], {}).get("status", "ended")
                    self.notes.append(f"batch {batch['id']} ({state}): {again:,} of its {len(cids):,} requests "
                                      "failed or were not processed; they go in a later batch (each at most "
                                      "--max-retries times)")
                for cid, (status, data) in outcomes.items():
                    _answer_all([chunk[cid]], status, data, batch["id"])

        def failed(task: asyncio.Task) -> None:  # a bug or a cancelled transport: no request waits forever
            if not task.cancelled() and task.exception() is not None:
                _fail_all(chunk, task.exception())

        task = asyncio.create_task(go())
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        task.add_done_callback(failed)

    def _collect(self, batch_id: str, batch: dict[str, Any], known: bool = False) -> asyncio.Task:
        """The batch's results once it has ended. Polling and reading its files are retried however long it
        takes: the batch is paid for and runs on, and submitting its requests again would pay twice. A batch
        the endpoint does not know (404) answers its requests as missing (they go in a new batch)."""

        async def go() -> dict[str, tuple[int, bytes]]:
            current, failures = batch, 0
            while True:
                try:
                    while current.get("status") not in TERMINAL:
                        await asyncio.sleep(self.poll)
                        current = await self.api.get(batch_id)
                        self.status[batch_id] = current
                    if current["status"] == "failed":  # the file was refused: every line, with the reasons
                        why = {"error": {"message": f"batch {batch_id} failed: {current.get('errors')}"}}
                        return _Every(400, orjson.dumps(why))
                    return await self.api.results(current)
                except errors.PermanentError:
                    return {}
                except errors.LLMError:
                    failures += 1
                    await asyncio.sleep(min(300.0, self.poll * 2 ** min(failures, 8)))

        if known:
            self._began = self._began or time.monotonic()
            self.submitted.append(batch_id)
        task = asyncio.create_task(go())
        self._collecting[batch_id] = task
        return task

    def counts(self) -> tuple[int, int]:
        """(requests the provider has done, requests in the batches submitted), from their last poll."""
        counts = [self.status.get(b, {}).get("request_counts") or {} for b in self.submitted]
        return (sum(c.get("completed", 0) + c.get("failed", 0) for c in counts),
                sum(c.get("total", 0) for c in counts))

    def summary(self) -> str:
        """How its batches stand, for the display: submitted, in progress, ended, their requests done, the time
        waited."""
        if not self.submitted:
            return f"{len(self._queue):,} requests queued for a batch" if self._queue else ""
        ended = sum(self.status.get(b, {}).get("status") in TERMINAL for b in self.submitted)
        done, total = self.counts()
        return (f"batches: {len(self.submitted)} submitted, {len(self.submitted) - ended} in progress, {ended} ended, "
                f"{done:,} of {total:,} requests done, {time.monotonic() - self._began:.0f} s")

    def submitted_earlier(self, body: bytes) -> bool:
        """A batch an earlier process submitted holds this request: it is paid for, and collected from there."""
        return custom_id(body) in self.known

    def collected(self, finished: bool = True) -> list[str]:
        """The batches whose results were read; once every request of the stage is answered (``finished``), those
        submitted earlier that no request needed any more too (their results were recorded before a kill)."""
        done = [b for b, task in self._collecting.items() if task.done() and not task.cancelled()]
        return list(dict.fromkeys([*done, *(self.known.values() if finished else ())]))

    def bind(self, known: Mapping[str, str], on_submit: Callable[[str, list[str]], object]) -> None:
        """What a stage's journal says: the requests of batches submitted earlier and not collected (custom_id
        -> batch id), and where a new batch is journaled."""
        self.known, self.on_submit = dict(known), on_submit

    async def aclose(self) -> None:
        for task in [*self._collecting.values(), *self._running, *([self._flusher] if self._flusher else [])]:
            task.cancel()
        await self.inner.aclose()


_MISSING = (503, b'{"error": {"message": "the batch has no line for this request"}}')


class _Every(dict):
    """The same outcome for every line (a batch the endpoint refused whole)."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__()
        self.outcome = (status, body)

    def get(self, key: str, default: object = None) -> tuple[int, bytes]:
        return self.outcome


def _answer_all(waiting: list[_Waiting], status: int, data: bytes, batch_id: str | None) -> None:
    for w in waiting:
        for fut in w.answers:
            if not fut.done():
                fut.set_result(Response(status, {}, data, batch_id))


def _fail_all(chunk: dict[str, _Waiting], exc: BaseException | None) -> None:
    for w in chunk.values():
        for fut in w.answers:
            if not fut.done():
                fut.set_exception(exc or errors.ConnectError("the batch was lost"))
