"""Failed attempts, said in words and tried again (or not, with reconnect=False)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from conftest import until

from steward_agent import Disconnection, Reconnect, StewardAgent, generate_key_pair


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_nobody_listening_is_said_and_with_reconnect_false_the_agent_stops() -> None:
    port = free_port()

    async def main() -> None:
        agent = StewardAgent(url=f"http://127.0.0.1:{port}", keys=generate_key_pair(), name="x", capabilities=["api_call"], reconnect=False)
        ended = await agent.run()
        assert ended is not None
        assert (ended.cause, ended.code, ended.will_retry) == ("refused", None, False)
        assert ended.message == f"connection refused by 127.0.0.1:{port} (is Steward running there?)"
        assert agent.status == "stopped"

    asyncio.run(main())


def test_a_socket_closed_before_the_hello_is_reported_and_tried_again(fake_steward: Any) -> None:
    async def main() -> None:
        async def conn(ws: Any) -> None:
            await ws.close(1011, "boom")

        url, server = await fake_steward(conn)
        agent = StewardAgent(url=url, keys=generate_key_pair(), name="x", capabilities=["api_call"], reconnect=Reconnect(initial_delay=0.01, max_delay=0.02))
        reports: list[Disconnection] = []
        agent.on("disconnected", reports.append)
        task = agent.start()
        await until(lambda: len(reports) >= 3)
        assert all((r.code, r.will_retry) == (1011, True) for r in reports[:3])
        assert reports[0].message == 'closed with 1011: a fault inside Steward ("boom")'
        assert [r.attempt for r in reports[:3]] == [1, 2, 3]
        await agent.stop()
        assert await task is None
        server.close()
        await server.wait_closed()

    asyncio.run(main())
