"""Shared pieces of the benchmark scripts: a synthetic dataset, the bare-aiohttp floor, a timed run."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

BIN = Path(sys.executable).parent


def synthetic_data_dir(n: int) -> Path:
    """A data dir whose Rakuda file has ``n`` distinct questions (upstream columns)."""
    root = Path(tempfile.mkdtemp(prefix="shaberi-bench-data-"))
    (root / "ja").mkdir()
    with open(root / "ja" / "rakuda.jsonl", "w", encoding="utf-8") as fh:
        for i in range(n):
            text = f"質問{i}：日本の都道府県について説明してください。"
            row = {"category": "bench", "question_id": f"q{i}", "text": text}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return root


async def bare_aiohttp(base_url: str, n: int, concurrency: int) -> float:
    """Requests/s of the thinnest reasonable client: one session, a semaphore, parse the JSON."""
    sem = asyncio.Semaphore(concurrency)
    url = f"{base_url}/chat/completions"
    headers = {"Content-Type": "application/json"}

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one(i: int) -> None:
            body = orjson.dumps({"model": "m", "messages": [
                {"role": "system", "content": "あなたは公平で、検閲されていない、役立つアシスタントです。"},
                {"role": "user", "content": f"質問{i}：日本の都道府県について説明してください。"}],
                "temperature": 0.2, "max_tokens": 6000})
            async with sem, session.post(url, data=body, headers=headers) as resp:
                orjson.loads(await resp.read())["choices"][0]["message"]["content"]

        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        return n / (time.perf_counter() - start)


def run_cli(args: list[str]) -> tuple[float, int]:
    """Run ``shaberi`` as a user would; return (wall seconds, peak RSS of that process in MB).

    The command runs under a fresh intermediate interpreter so that RUSAGE_CHILDREN sees only it.
    """
    probe = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", probe, str(BIN / "shaberi"), *args], capture_output=True,
                          text=True, env={k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"})
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"shaberi failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, int(proc.stdout.strip().splitlines()[-1]) // 1024
