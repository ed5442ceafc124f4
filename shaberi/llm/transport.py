"""The transport seam under the client: one HTTP request in, a ``Response`` out, as httpx's transports are. The
network's errors are converted by type here, where they enter (``ConnectError``, ``RequestTimeout``);
``MockTransport`` answers from a function, for tests that need no server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from .. import errors

if TYPE_CHECKING:  # imported by the first request (~0.1 s): a command that never calls a model does not pay it
    import aiohttp

__all__ = ["AiohttpTransport", "MockTransport", "Response", "Transport"]


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes
    batch_id: str | None = None  # the provider batch it came from (``llm.batch_api``): never set by the network


class Transport(Protocol):
    """Sends one HTTP request. Raises ``errors.ConnectError`` or ``errors.RequestTimeout``."""

    async def request(
        self, method: str, url: str, body: bytes | None, headers: Mapping[str, str], timeout: float
    ) -> Response: ...

    async def aclose(self) -> None: ...


class AiohttpTransport:
    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}

    async def request(
        self, method: str, url: str, body: bytes | None, headers: Mapping[str, str], timeout: float
    ) -> Response:
        import aiohttp

        if self._session is None:
            # No connector limit: the Controller decides how many requests are in flight.
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0), cookie_jar=aiohttp.DummyCookieJar()
            )
        if timeout not in self._timeouts:
            self._timeouts[timeout] = aiohttp.ClientTimeout(total=timeout)
        try:
            async with self._session.request(
                method, url, data=body, headers=headers, timeout=self._timeouts[timeout]
            ) as resp:
                return Response(resp.status, resp.headers, await resp.read())
        except TimeoutError:
            raise errors.RequestTimeout(f"no answer within {timeout:g} s") from None
        except aiohttp.ClientError as exc:
            raise errors.ConnectError(f"{type(exc).__name__}: {exc}") from None

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


class MockTransport:
    """Answers from a function instead of the network, as httpx's MockTransport does."""

    def __init__(self, handler: Callable[[str, str, bytes | None], Awaitable[Response] | Response]) -> None:
        self.handler = handler

    async def request(
        self, method: str, url: str, body: bytes | None, headers: Mapping[str, str], timeout: float
    ) -> Response:
        result = self.handler(method, url, body)
        return await result if asyncio.iscoroutine(result) else result  # type: ignore[return-value]

    async def aclose(self) -> None:
        pass
