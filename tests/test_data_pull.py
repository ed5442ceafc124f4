"""`shaberi data pull` against a loopback stand-in for the Hugging Face hub (HF_ENDPOINT), never the internet."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import threading
import urllib.parse
from typing import ClassVar

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from shaberi import benchmarks as bm

from .conftest import shaberi


def upstream_files(data_dir) -> dict[tuple[str, str, str], bytes]:
    """The registry's (repo, revision, file) -> bytes in the upstream's format, made from the shared copies."""
    files = {}
    for name, entry in bm.registry().items():
        if "hf_repo" not in entry:
            continue  # not on the hub (mt_bench_full)
        src = bm.locate(name, data_dir)
        rows = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines()]
        buf = io.BytesIO()
        if entry["hf_file"].endswith(".csv"):
            pacsv.write_csv(pa.Table.from_pylist(rows), buf)
        elif entry["hf_file"].endswith(".parquet"):
            pq.write_table(pa.Table.from_pylist(rows), buf)
        else:
            buf.write(src.read_bytes())
        files[(entry["hf_repo"], entry["hf_revision"], entry["hf_file"])] = buf.getvalue()
    return files


class FakeHub(http.server.BaseHTTPRequestHandler):
    files: ClassVar[dict] = {}  # set per test by the fixture
    requested: ClassVar[list] = []

    def _lookup(self) -> bytes | None:
        # /datasets/<org>/<name>/resolve/<revision>/<path>
        parts = urllib.parse.unquote(self.path).split("/")
        if len(parts) < 6 or parts[1] != "datasets" or "resolve" not in parts:
            return None
        i = parts.index("resolve")
        repo, rest = "/".join(parts[2:i]), parts[i + 1:]
        for (r, rev, path), data in self.files.items():
            if r == repo and "/".join(rest) == f"{rev}/{path}":
                self.requested.append((repo, rev, path))
                return data
        return None

    def _head(self) -> bytes | None:
        data = self._lookup()
        if data is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        self.send_response(200)
        self.send_header("X-Repo-Commit", "0" * 40)
        self.send_header("ETag", '"' + hashlib.sha256(data).hexdigest() + '"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        return data

    def do_HEAD(self) -> None:
        self._head()

    def do_GET(self) -> None:
        data = self._head()
        if data is not None:
            self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def hub(data_dir):
    FakeHub.files, FakeHub.requested = upstream_files(data_dir), []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_pull_fetches_every_upstream_file_and_the_loaders_read_them(hub, data_dir, tmp_path):
    env = {"HF_ENDPOINT": hub, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_DISABLE_TELEMETRY": "1"}
    proc = shaberi("data", "pull", "--data-dir", str(tmp_path / "data"), env=env)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "data" / "ja").iterdir()) == [
        "elyza_tasks_100.csv", "ja_mt_bench_1shot.jsonl", "rakuda.parquet", "tengu_bench.parquet"]
    assert {r for r, _, _ in FakeHub.requested} == {bm.registry()[n]["hf_repo"] for n in bm.resolve("all")}
    for name in bm.resolve("all"):
        assert bm.load(name, tmp_path / "data").questions == bm.load(name, data_dir).questions


def test_pull_of_a_file_the_hub_does_not_serve_says_where_to_put_it(hub, tmp_path):
    FakeHub.files.clear()  # every request is a 404, as for a renamed upstream file
    proc = shaberi("data", "pull", "--benchmark", "rakuda", "--data-dir", str(tmp_path / "data"),
                   env={"HF_ENDPOINT": hub, "HF_HOME": str(tmp_path / "hf")})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "cannot download yuzuai/rakuda-questions" in lines[0] and "ja/rakuda.parquet" in lines[0]
    assert not (tmp_path / "data").exists()
