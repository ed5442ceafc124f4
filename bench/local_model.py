"""Decode speed of the embedded local model on this machine, by thread count.

    python bench/local_model.py

Starts ``shaberi serve-local``'s server with 1 and then 2 threads and asks for the same 256-token answer
(temperature 0) three times each; prints completion tokens per second (median), and the same with the
other core kept busy by a spinning process, the situation of a server sharing the machine with a harness.
Then 2 threads on the stock ``python -m llama_cpp.server``, whose weights llama.cpp repacks (``_serve`` turns
that off: on a CPU with AMX it segfaults), against ours.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import urllib.request

from shaberi.llm.local import LocalServer

BODY = {"max_tokens": 256, "temperature": 0, "messages": [
    {"role": "user", "content": "日本の四季について、それぞれの季節の特徴と行事を詳しく説明してください。"}]}


def tokens_per_second(server: LocalServer) -> float:
    request = urllib.request.Request(f"{server.base_url}/chat/completions",
                                     json.dumps(BODY | {"model": server.name}).encode(),
                                     {"Content-Type": "application/json"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=600) as resp:
        usage = json.load(resp)["usage"]
    return usage["completion_tokens"] / (time.perf_counter() - started)


def main() -> None:
    for busy in (False, True):
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
        try:
            for threads in (1, 2):
                with LocalServer(threads=threads) as server:
                    tokens_per_second(server)  # warm-up
                    rate = statistics.median(tokens_per_second(server) for _ in range(3))
                print(f"threads {threads}{', other core busy' if busy else ''}: {rate:5.1f} tokens/s")
        finally:
            if spinner:
                spinner.kill()
    for program in ("llama_cpp.server", LocalServer.program):
        server = LocalServer(threads=2)
        server.program = program
        with server:
            tokens_per_second(server)
            rate = statistics.median(tokens_per_second(server) for _ in range(3))
        print(f"threads 2, {program}: {rate:5.1f} tokens/s")


if __name__ == "__main__":
    main()
