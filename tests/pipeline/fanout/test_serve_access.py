"""``streamfold serve`` and who it serves: a token (header, or the cookie the page gets from
``/?token=``), local host names only without one, no public ``--host`` without one; the page still works
in a real headless Chromium with a token."""

from __future__ import annotations

import anyio
import httpx
import pytest

from pipeline.cli.main import main, serve_app
from pipeline.cli.serve import TOKEN_COOKIE, TOKEN_ENV, is_loopback_host
from tests.browser import chromium
from tests.pipeline.fanout.test_serve_page import GUARD, READ_VIEW, expected_view, serve_arguments
from tests.proxy_upstream import serving

pytestmark = pytest.mark.anyio

TOKEN = "t0k-en/+="


async def test_the_page_opened_with_the_token_shows_the_response() -> None:
    app = serve_app(serve_arguments("--demo", "--speed", "0", "--token", TOKEN))
    want = await expected_view("coding-agent")
    async with serving(app) as address, chromium() as browser:
        with anyio.fail_after(GUARD):
            stranger = await browser.new_page()
            await stranger.navigate(f"{address}/")
            refused = await stranger.evaluate(READ_VIEW)
            page = await browser.new_page()
            await page.navigate(f"{address}/?{httpx.QueryParams(token=TOKEN)}")
            view = await page.evaluate(READ_VIEW)
            where = await page.evaluate("location.pathname + location.search")
    assert (refused["state"], refused["badge"]) == ("failed", "refused")
    assert view["state"] == "done"
    assert [{"type": s["type"], "body": s["body"]} for s in view["segments"]] == want["segments"]
    assert where.startswith("/?response=")  # the token is not left in the address bar


async def test_with_a_token_only_its_holders_are_served() -> None:
    app = serve_app(serve_arguments("--demo", "--speed", "0", "--token", TOKEN))
    async with serving(app) as address, httpx.AsyncClient(base_url=address) as client:
        refused = await client.get("/config")
        assert refused.status_code == 403
        assert refused.json() == {
            "type": "ERROR",
            "error": "AccessDenied",
            "message": "not allowed to list responses",
        }
        assert (await client.post("/responses", json={})).status_code == 403
        bearer = {"authorization": f"Bearer {TOKEN}"}
        assert (await client.get("/config", headers=bearer)).json() == {
            "mode": "demo",
            "label": "demo: coding-agent",
        }

        wrong = await client.get("/", params={"token": "guess"})
        assert (wrong.status_code, wrong.text) == (403, "not the token streamfold serve was given\n")
        entered = await client.get("/", params={"response": "abc", "token": TOKEN})
        assert entered.status_code == 303
        assert entered.headers["location"] == "./?response=abc"
        assert entered.headers["set-cookie"] == (
            f'{TOKEN_COOKIE}="{TOKEN}"; HttpOnly; Path=/; SameSite=strict'
        )
        assert client.cookies[TOKEN_COOKIE] == f'"{TOKEN}"'
        started = await client.post("/responses", json={})  # the cookie is enough now
        assert started.status_code == 201
        events = await client.get(started.json()["events"])
        assert events.status_code == 200
        assert events.text.rstrip().endswith('"type":"END"}')


async def test_without_a_token_only_local_host_names_are_answered() -> None:
    """A page of another site whose name resolves to 127.0.0.1 (DNS rebinding) is refused."""
    app = serve_app(serve_arguments("--demo", "--speed", "0"))
    async with serving(app) as address, httpx.AsyncClient(base_url=address) as client:
        port = address.rsplit(":", 1)[1]
        for host in [f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "app.localhost"]:
            assert (await client.get("/config", headers={"host": host})).status_code == 200, host
        for method, url in [("GET", "/config"), ("POST", "/responses"), ("GET", "/")]:
            rebound = await client.request(method, url, json={}, headers={"host": f"evil.example:{port}"})
            assert (rebound.status_code, rebound.text) == (
                403,
                "streamfold serve without --token answers only requests to localhost, 127.0.0.1 or [::1],"
                " not to evil.example\n",
            )


def test_a_public_host_needs_a_token(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    assert main(["serve", "--demo", "--host", "0.0.0.0"]) == 2
    assert capsys.readouterr().err == (
        "streamfold: serve: --host 0.0.0.0 is not a loopback address; without a token only clients on this"
        f" machine are served: pass --token TOKEN (or set {TOKEN_ENV}) to serve others\n"
    )
    serve_app(serve_arguments("--demo", "--host", "0.0.0.0", "--token", TOKEN))
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    serve_app(serve_arguments("--demo", "--host", "::"))


async def test_the_token_may_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    app = serve_app(serve_arguments("--demo"))
    async with serving(app) as address, httpx.AsyncClient(base_url=address) as client:
        assert (await client.get("/config")).status_code == 403
        assert (await client.get("/config", headers={"authorization": f"Bearer {TOKEN}"})).status_code == 200


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("example.com", False),
    ],
)
def test_is_loopback_host(host: str, local: bool) -> None:
    assert is_loopback_host(host) is local
