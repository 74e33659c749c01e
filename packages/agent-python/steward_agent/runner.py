"""Running an agent as a program: until SIGINT or SIGTERM (a clean stop) or a close that means
stop. ``run(agent)`` is the blocking form for plain scripts."""

from __future__ import annotations

import asyncio
import signal

from .agent import StewardAgent


async def run_until_signal(agent: StewardAgent) -> int:
    """Runs the agent; SIGINT and SIGTERM close its socket (1000) and end it. Returns the exit
    code: 0 after a signal, 1 when Steward told the agent to stop (rejected, replaced, key
    refused, protocol error)."""
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(agent.stop()))
    try:
        ended = await agent.run()
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
    return 0 if ended is None else 1


def run(agent: StewardAgent) -> int:
    """Blocks running the agent in its own event loop until a signal or a close that means stop;
    returns the exit code (see ``run_until_signal``)."""
    return asyncio.run(run_until_signal(agent))
