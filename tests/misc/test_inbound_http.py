"""The body cap (``bot.web.BodyLimit``) in front of every route, served by uvicorn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from bot.commands.serve_cmd import build_app
from bot.engine.core import Engine
from bot.settings import ConfigError, Settings, load_file
from bot.web import DEFAULT_MAX_BODY_BYTES, create_app
from storage import Database
from tests.fakes.asgi_server import serve_in_loop
from tests.fakes.log_capture import captured_logs

LIMIT = DEFAULT_MAX_BODY_BYTES


class Echo:
    """An endpoint that reports how many body bytes it got, and counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def endpoint(self, request: Request) -> Response:
        self.calls += 1
        body = await request.body()
        return PlainTextResponse(f"{len(body)}:{body[:1].decode()}{body[-1:].decode()}")


async def _boom(request: Request) -> Response:
    raise RuntimeError("boom")


@pytest.fixture
async def echo_app() -> AsyncIterator[tuple[str, Echo, httpx.AsyncClient]]:
    echo = Echo()
    app = create_app([("/echo", echo.endpoint), ("/boom", _boom)])
    async with serve_in_loop(app) as url, httpx.AsyncClient(timeout=30) as http:
        yield url, echo, http


async def _chunks(total: int, size: int = 65536) -> AsyncIterator[bytes]:
    sent = 0
    while sent < total:
        part = min(size, total - sent)
        sent += part
        yield b"a" * part
        await asyncio.sleep(0)


async def test_bodies_up_to_the_cap_arrive_whole(
    echo_app: tuple[str, Echo, httpx.AsyncClient],
) -> None:
    url, echo, http = echo_app
    body = b"<" + b"x" * (LIMIT - 2) + b">"
    response = await http.post(url + "/echo", content=body)
    assert (response.status_code, response.text) == (200, f"{LIMIT}:<>")
    chunked = await http.post(url + "/echo", content=_chunks(LIMIT))
    assert (chunked.status_code, chunked.text) == (200, f"{LIMIT}:aa")
    empty = await http.post(url + "/echo")
    assert (empty.status_code, empty.text) == (200, "0:")
    assert echo.calls == 3


async def test_one_byte_over_the_cap_is_413_and_the_endpoint_never_runs(
    echo_app: tuple[str, Echo, httpx.AsyncClient],
) -> None:
    url, echo, http = echo_app
    with captured_logs() as logs:
        for content in (b"x" * (LIMIT + 1), _chunks(LIMIT + 1), _chunks(50 * LIMIT)):
            response = await http.post(url + "/echo", content=content)
            assert response.status_code == 413
            assert response.text == f"request body too large (limit {LIMIT} bytes)"
    assert echo.calls == 0
    assert logs.messages("askhuman.web") == ["http request refused"] * 3
    assert logs.tracebacks() == []
    assert (await http.get(url + "/healthz")).status_code == 200


async def test_log_capture_sees_uvicorn_tracebacks(
    echo_app: tuple[str, Echo, httpx.AsyncClient],
) -> None:
    """The "no traceback" checks of the endpoint tests can fail: here one is caught."""
    url, _, http = echo_app
    with captured_logs() as logs:
        response = await http.post(url + "/boom", content=b"{}")
    assert response.status_code == 500
    assert any("RuntimeError: boom" in line for line in logs.tracebacks())


async def test_serve_applies_the_configured_cap_to_every_route(tmp_path: Path) -> None:
    """``http.max_body_bytes`` reaches ``serve``'s app; the cap runs before routing."""
    settings = Settings.model_validate({
        "database_url": f"sqlite:///{tmp_path / 'a.db'}",
        "agents": {}, "routes": {}, "http": {"max_body_bytes": 2048},
    })
    database = Database(settings.database_url)
    database.upgrade()
    app = build_app(Engine(database, settings), [])
    async with serve_in_loop(app) as url, httpx.AsyncClient(timeout=30) as http:
        assert (await http.post(url + "/healthz", content=b"x" * 2049)).status_code == 413
        assert (await http.post(url + "/anything", content=b"x" * 2049)).status_code == 413
        assert (await http.post(url + "/healthz", content=b"x" * 2048)).status_code == 405
    database.dispose()


def test_cap_setting_is_validated_with_its_key(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("agents: {}\nroutes: {}\nhttp:\n  max_body_bytes: 10\n")
    with pytest.raises(ConfigError) as info:
        load_file(path)
    assert any(p.startswith("http.max_body_bytes:") for p in info.value.problems)
    path.write_text("agents: {}\nroutes: {}\n")
    assert load_file(path).http.max_body_bytes == LIMIT
