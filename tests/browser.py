"""A real headless Chromium driven over the Chrome DevTools Protocol, for the web page's tests.

:func:`chromium` starts the machine's Chromium (a fresh profile, no network but what the page asks for)
and yields a :class:`Browser`; without Chromium the test is skipped with the reason printed, unless
``STREAMFOLD_REQUIRE_BROWSER`` is set (CI), where it fails. No polling: the page exposes a promise
(``window.streamfoldDone``) that :meth:`Page.evaluate` awaits.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from websockets.asyncio.client import ClientConnection, connect

__all__ = ["Browser", "Page", "chromium", "find_chromium"]

_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
)
_LISTENING = re.compile(rb"DevTools listening on (ws://\S+)")


def find_chromium() -> str | None:
    """The path of Chromium (or Chrome) on this machine, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path is not None:
            return path
    return None


def require_chromium() -> str:
    """Chromium's path; skips the test (fails it under ``STREAMFOLD_REQUIRE_BROWSER``) without it."""
    path = find_chromium()
    if path is None:
        reason = "Chromium is not installed (apt-get install -y chromium; .ci/run installs it)"
        if os.environ.get("STREAMFOLD_REQUIRE_BROWSER"):
            pytest.fail(reason)
        print(f"skipped: {reason}")
        pytest.skip(reason)
    return path


class Page:
    """One tab: commands go to its CDP session."""

    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        return await self.browser.send(method, session=self.session, **params)

    async def navigate(self, url: str) -> None:
        """Open ``url`` and return once its load event fired (its scripts have run)."""
        await self.send("Page.enable")
        await self.send("Page.navigate", url=url)
        await self.browser.wait_event("Page.loadEventFired", session=self.session)

    async def evaluate(self, expression: str) -> Any:
        """The JSON value of ``expression`` in the page (a promise is awaited)."""
        answer = await self.send(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in answer:
            raise AssertionError(f"{expression!r} raised in the page: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    async def screenshot(self, width: int = 1000, height: int = 1040) -> bytes:
        """A PNG of the page as a person sees it at ``width`` x ``height`` CSS pixels."""
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        answer = await self.send("Page.captureScreenshot", format="png")
        return base64.b64decode(answer["data"])


class Browser:
    """A CDP connection to a browser; replies are matched to commands by id."""

    def __init__(self, connection: ClientConnection) -> None:
        self.connection = connection
        self._ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        """CDP events received so far (the tests' browsers live for one page load or two)."""

    async def send(self, method: str, *, session: str | None = None, **params: Any) -> dict[str, Any]:
        command_id = next(self._ids)
        message: dict[str, Any] = {"id": command_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        await self.connection.send(json.dumps(message))
        async for raw in self.connection:
            reply = json.loads(raw)
            if "method" in reply:
                self.events.append(reply)
                continue
            if reply.get("id") != command_id:
                continue
            if "error" in reply:
                raise AssertionError(f"CDP {method} failed: {reply['error']}")
            result: dict[str, Any] = reply.get("result", {})
            return result
        raise AssertionError(f"the browser closed the connection during {method}")

    async def wait_event(self, method: str, *, session: str | None = None) -> dict[str, Any]:
        """The first event ``method`` (of ``session``) not yet taken, waiting for it if need be."""
        while True:
            for index, event in enumerate(self.events):
                if event["method"] == method and event.get("sessionId") == session:
                    del self.events[index]
                    return event
            raw = await self.connection.recv()
            reply = json.loads(raw)
            if "method" in reply:
                self.events.append(reply)

    async def new_page(self) -> Page:
        target = await self.send("Target.createTarget", url="about:blank")
        attached = await self.send("Target.attachToTarget", targetId=target["targetId"], flatten=True)
        return Page(self, attached["sessionId"])


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """A fresh headless Chromium, stopped (and its profile removed) when the block ends."""
    path = require_chromium()
    # Chromium's helper processes may still write to the profile as the browser exits: they are killed
    # with its process group, and what one wrote last does not fail the test.
    with tempfile.TemporaryDirectory(prefix="streamfold-chromium-", ignore_cleanup_errors=True) as profile:
        process = await anyio.open_process(
            [path, *_FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            assert process.stderr is not None
            seen = bytearray()
            url: str | None = None
            with anyio.fail_after(60):
                async for piece in process.stderr:
                    seen += piece
                    found = _LISTENING.search(seen)
                    if found is not None:
                        url = found.group(1).decode()
                        break
            if url is None:
                raise AssertionError(f"Chromium did not start: {bytes(seen[-2000:])!r}")
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_drain, process.stderr)
                async with connect(url, max_size=None) as connection:
                    yield Browser(connection)
                tasks.cancel_scope.cancel()
        finally:
            if process.returncode is None:
                process.terminate()
                with anyio.move_on_after(10):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.aclose()


async def _drain(stream: Any) -> None:
    """Read Chromium's log so that it never blocks on a full pipe."""
    async for _ in stream:
        pass
