"""The proxy's upstream HTTP/1.1 transport on aiohttp, behind httpx's client API.

httpx's own transport parses each upstream response with h11 in Python: on a streamed answer that is most
of the proxy's CPU time per chunk, and it grows with the number of open streams. aiohttp parses with
llhttp in C and hands over whatever one socket read brought, so `AiohttpTransport` costs less per
chunk and stays flat from one stream to fifty (``python -m benchmarks.bench_proxy`` measures both).
The proxy keeps speaking httpx (requests, responses, timeouts, limits, errors); this module maps aiohttp's
errors onto httpx's, so that the proxy reports them the same way:

======================================================= =============================
aiohttp                                                  httpx
======================================================= =============================
``ClientConnectorError`` (refused, unresolvable)         ``ConnectError``
``ConnectionTimeoutError`` (connecting, waiting a slot)  ``ConnectTimeout``
``SocketTimeoutError`` / other ``ServerTimeoutError``    ``ReadTimeout``
``ServerDisconnectedError``, ``ClientPayloadError``,     ``RemoteProtocolError``
``ClientResponseError`` (a broken or cut-off response)
any other ``ClientError`` or ``OSError``                 ``ReadError``
======================================================= =============================

It is used when aiohttp is installed (the ``server`` extra installs it); otherwise the proxy uses httpx's
own transport.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import aiohttp
import httpx

__all__ = ["AiohttpTransport"]

_SKIP_AUTO_HEADERS = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")
"""Headers aiohttp would add to a request without them: the proxy sends what it chose, nothing more."""


@contextmanager
def _httpx_errors(request: httpx.Request) -> Iterator[None]:
    """aiohttp's (and the socket's) errors raised as the httpx errors they correspond to (module doc)."""
    try:
        yield
    except aiohttp.ClientConnectorError as exc:
        raise httpx.ConnectError(str(exc), request=request) from exc
    except aiohttp.ConnectionTimeoutError as exc:
        raise httpx.ConnectTimeout(str(exc) or "timed out connecting", request=request) from exc
    except (aiohttp.ServerTimeoutError, TimeoutError) as exc:
        raise httpx.ReadTimeout(str(exc) or "timed out reading", request=request) from exc
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientResponseError) as exc:
        raise httpx.RemoteProtocolError(str(exc) or type(exc).__name__, request=request) from exc
    except (aiohttp.ClientError, OSError) as exc:
        raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc


class _ResponseBody(httpx.AsyncByteStream):
    """A response body as aiohttp reads it: each piece is what one socket read brought."""

    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _httpx_errors(self._request):
            async for data in self._response.content.iter_any():
                yield data

    async def aclose(self) -> None:
        response = self._response
        if response.content.at_eof():
            response.release()  # read to the end: the connection goes back to the pool
        else:
            response.close()  # given up (a client gone, an error): the connection is closed at once


class AiohttpTransport(httpx.AsyncBaseTransport):
    """An httpx transport that sends requests with one aiohttp session (its own connection pool).

    ``limits`` caps the connections (``max_connections``) and how long an idle one is kept
    (``keepalive_expiry``); each request's httpx timeouts apply: ``connect`` to connecting, ``pool`` to
    waiting for a connection and connecting, ``read`` to the gap between two reads. Redirects are not
    followed and bodies are not decompressed, as the proxy's httpx client is set up. Credentials in the
    URL arrive as the Authorization header httpx's client made of them (Basic auth), and are left out of
    the URL aiohttp is given.
    """

    def __init__(self, limits: httpx.Limits | None = None) -> None:
        self._limits = limits or httpx.Limits()
        self._session: aiohttp.ClientSession | None = None

    def _new_session(self) -> aiohttp.ClientSession:
        limits = self._limits
        connector = aiohttp.TCPConnector(
            limit=limits.max_connections or 0,
            keepalive_timeout=limits.keepalive_expiry if limits.keepalive_expiry is not None else 15.0,
        )
        return aiohttp.ClientSession(connector=connector, auto_decompress=False)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._session
        if session is None:
            session = self._session = self._new_session()
        timeouts: dict[str, Any] = request.extensions.get("timeout", {})
        body = await request.aread()
        headers = [
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in request.headers.raw
            if name.lower() != b"transfer-encoding"
        ]
        url = request.url
        if url.userinfo:  # httpx made the Authorization header of them; aiohttp refuses both at once
            url = url.copy_with(userinfo=b"")
        with _httpx_errors(request):
            response = await session.request(
                request.method,
                str(url),
                headers=headers,
                data=body or None,
                allow_redirects=False,
                compress=None,
                skip_auto_headers=_SKIP_AUTO_HEADERS,
                timeout=aiohttp.ClientTimeout(
                    total=None,
                    connect=timeouts.get("pool"),
                    sock_connect=timeouts.get("connect"),
                    sock_read=timeouts.get("read"),
                ),
            )
        extensions: dict[str, Any] = {"http_version": b"HTTP/1.1"}
        if response.reason:
            extensions["reason_phrase"] = response.reason.encode("latin-1", "replace")
        return httpx.Response(
            status_code=response.status,
            headers=response.raw_headers,
            stream=_ResponseBody(response, request),
            request=request,
            extensions=extensions,
        )

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()
