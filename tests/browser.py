"""Headless Chromium driven over the DevTools protocol (a websocket, aiohttp's client): open a page, read
values out of it with JavaScript, ask which platform font rendered a node's text, take a screenshot."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from shaberi.testing.ray import session_processes

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("Debian's chromium is needed to test the HTML report: apt-get install -y chromium")
    return found


class Page:
    """One page of a fresh headless Chromium; every method is a DevTools call."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)

    async def call(self, method: str, **params: Any) -> dict:
        call_id = next(self.ids)
        await self.ws.send_json({"id": call_id, "method": method, "params": params})
        while True:
            message = await self.ws.receive_json(timeout=60)
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    async def fonts(self, selector: str) -> list[str]:
        """The platform fonts Chromium used for the text of the first node matching ``selector``."""
        root = (await self.call("DOM.getDocument"))["root"]["nodeId"]
        node = (await self.call("DOM.querySelector", nodeId=root, selector=selector))["nodeId"]
        assert node, f"no node matches {selector!r}"
        found = await self.call("CSS.getPlatformFontsForNode", nodeId=node)
        return [f["familyName"] for f in found["fonts"]]

    async def screenshot(self, path: Path) -> Path:
        shot = await self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


async def _open(url: str, work: Path, steps: Any) -> Any:
    proc = subprocess.Popen([chromium(), *FLAGS, "--remote-debugging-port=0", f"--user-data-dir={work}",
                             "--window-size=1280,1600", "about:blank"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        port_file = work / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        async with aiohttp.ClientSession() as http:
            pages = await (await http.get(f"http://127.0.0.1:{port}/json/list")).json()
            target = next(p for p in pages if p["type"] == "page")
            async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                page = Page(ws)
                for domain in ("Page", "DOM", "CSS", "Runtime"):
                    await page.call(f"{domain}.enable")
                await page.call("Page.navigate", url=url)
                while await page.evaluate("document.readyState") != "complete":
                    await asyncio.sleep(0.05)
                return await steps(page)
    finally:  # the whole browser, its renderer and GPU processes too: they write to ``work`` until they end
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 30
        while session_processes(proc.pid) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)


def with_page(path: Path, steps: Any) -> Any:
    """Open ``path`` in a fresh headless Chromium and return what ``await steps(page)`` returns."""
    with tempfile.TemporaryDirectory(prefix="shaberi-chromium-") as work:
        return asyncio.run(_open(path.as_uri(), Path(work), steps))
