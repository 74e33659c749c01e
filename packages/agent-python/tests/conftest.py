"""Shared pieces of the tests: the repository's shared table, a fake Steward (a websockets
server) for what a real one never sends, and, for tests/test_live.py, a real Steward started by
test/sdk-python.test.ts (STEWARD_URL, STEWARD_ADMIN_TOKEN, STEWARD_CONTROL_URL)."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

REPO = Path(__file__).resolve().parents[3]
SHARED = json.loads((REPO / "schemas" / "agent" / "sdk-shared.json").read_text(encoding="utf-8"))


def http(method: str, url: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    """One JSON request; returns (status, parsed body)."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"content-type": "application/json"} if body is not None else {}
    if token:
        headers["authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as res:
            raw = res.read()
            return res.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as err:
        raw = err.read()
        return err.code, json.loads(raw) if raw else None


async def until(check: Callable[[], Any], timeout: float = 20.0, step: float = 0.02) -> Any:
    """Waits for ``check()`` to be truthy (it may be a coroutine function); returns its value."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if loop.time() > end:
            raise AssertionError(f"not true within {timeout} s: {getattr(check, '__name__', check)}")
        await asyncio.sleep(step)


class Steward:
    """The real Steward of the TypeScript runner: the admin's API and the runner's controls."""

    def __init__(self) -> None:
        self.url = os.environ["STEWARD_URL"]
        self.token = os.environ["STEWARD_ADMIN_TOKEN"]
        self.control_url = os.environ["STEWARD_CONTROL_URL"]

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return http(method, self.url + path, body, self.token)

    async def api_async(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return await asyncio.to_thread(self.api, method, path, body)

    async def control(self, what: str, body: Any = None) -> Any:
        status, answer = await asyncio.to_thread(http, "POST", f"{self.control_url}/{what}", body or {})
        assert status == 200, f"control {what}: {status} {answer}"
        if isinstance(answer, dict) and "token" in answer:
            self.token = answer["token"]
        return answer

    async def approve(self, registration_id: str | None, capabilities: list[str]) -> None:
        assert registration_id
        status, body = await self.api_async("POST", f"/api/registrations/{registration_id}/approve", {"capabilities": capabilities})
        assert status == 200, body


@pytest.fixture
def steward() -> Steward:
    if not os.environ.get("STEWARD_URL"):
        pytest.skip("needs a real Steward: run these through `npm test -- sdk-python`")
    return Steward()


FakeHandler = Callable[[Any], Awaitable[None]]


@pytest.fixture
def fake_steward() -> Callable[[FakeHandler], Awaitable[tuple[str, Any]]]:
    """Starts a websockets server on an ephemeral port running ``handler`` per connection;
    returns (http url, server). Closed at the end of the test by its event loop."""
    import websockets

    async def start(handler: FakeHandler) -> tuple[str, Any]:
        async def serve(ws: Any, path: str = "") -> None:
            await handler(ws)

        server = await websockets.serve(serve, "127.0.0.1", 0)  # type: ignore[attr-defined]
        port = next(iter(server.sockets)).getsockname()[1]
        return f"http://127.0.0.1:{port}", server

    return start
