"""Against a real Steward (started by test/sdk-python.test.ts, with pending sockets closed after
one second): registration and approval, intents, a gate refusal, a policy change, a mention,
heartbeats across a restart, and the closes that end an agent."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from conftest import SHARED, Steward, until

from steward_agent import ChannelMessage, Disconnection, Intent, Reconnect, StewardAgent, generate_key_pair

PACKAGE = Path(__file__).resolve().parents[1]
FAST = Reconnect(initial_delay=0.05, max_delay=0.2)


def new_agent(steward: Steward, name: str, **options: Any) -> StewardAgent:
    options.setdefault("reconnect", FAST)
    return StewardAgent(url=steward.url, keys=options.pop("keys", None) or generate_key_pair(), name=name, capabilities=["api_call"], **options)


async def ready_agent(steward: Steward, name: str, **options: Any) -> tuple[StewardAgent, asyncio.Task[Any]]:
    agent = new_agent(steward, name, **options)
    task = agent.start()
    await agent.wait_for("pending", 30)
    await steward.approve(agent.registration_id, ["api_call"])
    await agent.wait_for("ready", 30)
    return agent, task


async def intent(steward: Steward, agent: StewardAgent, params: dict[str, Any]) -> dict[str, Any]:
    status, body = await steward.api_async("POST", f"/api/agents/{quote(agent.did, safe='')}/intents", {"action": "api_call", "params": params})
    assert status == 200, body
    return body  # type: ignore[no-any-return]


def test_registration_approval_certificate_intent_and_heartbeat(steward: Steward) -> None:
    async def main() -> None:
        seen: list[str] = []

        async def on_intent(i: Intent) -> Any:
            agent.record_usage(120, 30)
            await asyncio.sleep(0)
            return {"echo": i.params, "by": i.requested_by}

        agent = new_agent(steward, "py-first", on_intent=on_intent, heartbeat_interval=3600)
        agent.on("status", seen.append)
        registrations: list[dict[str, Any]] = []
        agent.on("registration", registrations.append)
        task = agent.start()
        await agent.wait_for("pending", 30)
        assert registrations[0]["status"] == "pending" and registrations[0]["registrationId"] == agent.registration_id
        status, body = await steward.api_async("GET", "/api/registrations")
        assert [r["agentDid"] for r in body["registrations"]] == [agent.did]
        await steward.approve(agent.registration_id, ["api_call"])
        await agent.wait_for("ready", 30)
        assert seen[:3] == ["connecting", "authenticating", "pending"] and seen[-2:] == ["certifying", "ready"]
        # The certificate kept: about this agent, issued by the server whose DID the challenge named.
        assert agent.certificate is not None
        cert = agent.certificate.certificate
        assert (cert["subject"], cert["subjectPublicKey"], cert["capabilities"], cert["policyId"]) == (agent.did, agent.keys.public_key, ["api_call"], None)
        status, detail = await steward.api_async("GET", f"/api/agents/{quote(agent.did, safe='')}")
        assert status == 200 and detail["agent"]["isOnline"] is True
        answer = await intent(steward, agent, {"q": 1})
        assert answer["ok"] is True and answer["output"]["echo"] == {"q": 1}
        assert answer["output"]["by"].startswith("did:key:")
        acks: list[int] = []
        agent.on("heartbeat_ack", acks.append)
        agent.heartbeat()
        await until(lambda: acks)
        assert agent.unacknowledged_usage() == {"promptTokens": 0, "completionTokens": 0}
        tokens = await steward.control("tokens", {"did": agent.did})
        assert tokens["allTime"] == {"promptTokens": 120, "completionTokens": 30}
        await agent.stop()
        assert await task is None
        assert agent.status == "stopped"

    asyncio.run(main())


def test_a_policy_change_recertifies_and_the_gates_refuse_with_the_shared_messages(steward: Steward) -> None:
    async def main() -> None:
        agent, task = await ready_agent(steward, "py-policy", on_intent=lambda i: {"ok": 1})
        first = agent.certificate
        assert first is not None
        certificates: list[Any] = []
        agent.on("certificate", certificates.append)
        terms: list[Any] = []
        agent.on("capabilities", terms.append)
        refused: list[dict[str, Any]] = []
        agent.on("intent_refused", refused.append)
        status, body = await steward.api_async("POST", "/api/policies", {"agentDid": agent.did, "capabilities": ["api_call"], "resourceLimits": {"maxRequestsPerHour": 1}})
        assert status == 201, body
        policy_id = body["policy"]["id"]
        assert body["sentTo"] == [agent.did]
        await until(lambda: certificates)
        assert terms[0].policy_id == policy_id and terms[0].resource_limits == {"maxRequestsPerHour": 1}
        cert = certificates[0].certificate
        assert cert["policyId"] == policy_id and cert["serial"] != first.certificate["serial"]
        assert agent.status == "ready" and not agent.reauth_pending
        assert (await intent(steward, agent, {"n": 1}))["ok"] is True
        second = await intent(steward, agent, {"n": 2})
        assert second["ok"] is False
        assert second["error"] == SHARED["gateMessages"]["rate"] == "Hourly request limit reached"
        assert refused[0]["error"] == second["error"]
        await agent.stop()
        await task

    asyncio.run(main())


def test_a_mention_reaches_the_agent_and_its_reply_lands_in_the_thread(steward: Steward) -> None:
    async def main() -> None:
        got: list[ChannelMessage] = []

        async def on_channel_message(msg: ChannelMessage) -> None:
            got.append(msg)
            await msg.reply(f"echo: {msg.message['content']}")

        agent, task = await ready_agent(steward, "pyhelper", on_channel_message=on_channel_message)
        status, body = await steward.api_async("POST", "/api/channels", {"name": "Python agents"})
        assert status == 201, body
        channel = body["channel"]["id"]
        status, body = await steward.api_async("POST", f"/api/channels/{channel}/members", {"memberDid": agent.did, "memberType": "agent"})
        assert status == 201, body
        status, body = await steward.api_async("POST", f"/api/channels/{channel}/messages", {"content": "hello @pyhelper, there?"})
        assert status == 201, body
        question = body["message"]
        await until(lambda: got)
        assert got[0].channel_id == channel and got[0].message["id"] == question["id"]

        async def replies() -> Any:
            s, b = await steward.api_async("GET", f"/api/channels/{channel}/messages?threadId={question['id']}")
            return b["messages"] if s == 200 and b["messages"] else None

        answer = (await until(replies))[0]
        assert (answer["content"], answer["authorType"], answer["authorDid"]) == ("echo: hello @pyhelper, there?", "agent", agent.did)
        await agent.stop()
        await task

    asyncio.run(main())


def test_a_pending_agent_whose_socket_times_out_comes_back_and_waits_on(steward: Steward) -> None:
    async def main() -> None:
        agent = new_agent(steward, "py-waiting", reconnect=Reconnect())  # the default back-off
        reports: list[Disconnection] = []
        agent.on("disconnected", reports.append)
        ids: list[str] = []
        agent.on("registration", lambda f: ids.append(f.get("registrationId")))
        task = agent.start()
        await until(lambda: len(ids) >= 3)  # closed with 4202 after a second, pending again, twice
        assert [(r.code, r.will_retry, r.attempt) for r in reports[:2]] == [(4202, True, 1), (4202, True, 1)]
        assert all(r.retry_in is not None and r.retry_in <= 0.5 for r in reports[:2]), "reset by each pending registration: the first delay"
        assert reports[0].message == f"closed with 4202: {SHARED['closeCodes'][5]['meaning']} (\"still pending: reconnect to keep waiting\")"
        assert ids[0] == ids[1] == ids[2]
        await agent.wait_for("pending", 30)
        await steward.approve(agent.registration_id, ["api_call"])
        await agent.wait_for("ready", 30)
        await agent.stop()
        await task

    asyncio.run(main())


def test_heartbeats_are_counted_once_across_a_restart_and_the_agent_comes_back_by_itself(steward: Steward) -> None:
    async def main() -> None:
        agent, task = await ready_agent(steward, "py-restart", heartbeat_interval=3600, on_intent=lambda i: i.params)
        reports: list[Disconnection] = []
        agent.on("disconnected", reports.append)
        # Heartbeat 1: Steward's write of it is held until its sockets are closed, so it is stored
        # at shutdown and its acknowledgement lost.
        await steward.control("hold-ledger")
        agent.record_usage(10, 5)
        agent.heartbeat()
        async def held() -> bool:
            return bool((await steward.control("held"))["writes"] >= 1)

        await until(held)
        # Heartbeat 2: lost on the way (never reaches Steward).
        send = agent._send

        def lose_heartbeats(frame: dict[str, Any]) -> None:
            if frame["type"] != "heartbeat":
                send(frame)

        agent._send = lose_heartbeats  # type: ignore[assignment]
        agent.record_usage(20, 10)
        agent.heartbeat()
        agent._send = send  # type: ignore[assignment]
        await steward.control("stop-begin")
        await until(lambda: agent.status != "ready")
        await steward.control("release")  # the held write lands; Steward is down
        agent.record_usage(3, 2)  # while Steward is away
        assert agent.unacknowledged_usage() == {"promptTokens": 33, "completionTokens": 17}
        await until(lambda: any(r.cause == "refused" for r in reports))
        await steward.control("start")
        await agent.wait_for("ready", 60)
        assert reports[0].code == 1001 and reports[0].message.startswith("closed with 1001: Steward is shutting down")
        assert all(r.will_retry for r in reports)
        # After ready: heartbeat 1 dropped (stored), heartbeat 2 sent again under its seq; now 3.
        agent.heartbeat()
        await until(lambda: agent.unacknowledged_usage() == {"promptTokens": 0, "completionTokens": 0})
        tokens = await steward.control("tokens", {"did": agent.did})
        assert tokens["allTime"] == {"promptTokens": 33, "completionTokens": 17}
        assert (await intent(steward, agent, {"after": "restart"}))["output"] == {"after": "restart"}
        await agent.stop()
        await task

    asyncio.run(main())


def test_replaced_by_a_second_process_with_the_same_key_the_first_stops(steward: Steward) -> None:
    async def main() -> None:
        first, task = await ready_agent(steward, "py-twice")
        second = new_agent(steward, "py-twice", keys=first.keys)
        task2 = second.start()
        ended = await task
        assert ended is not None and ended.code == 4409 and not ended.will_retry
        assert first.status == "stopped"
        assert ended.message.startswith("closed with 4409: another connection of this agent (the same key) replaced this one")
        await second.wait_for("ready", 30)
        await second.stop()
        await task2

    asyncio.run(main())


TIME_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ ")


def test_the_demo_agent_ends_with_exit_1_when_decommissioned(steward: Steward, tmp_path: Path) -> None:
    key = tmp_path / "demo.json"
    env = {**os.environ, "PYTHONPATH": str(PACKAGE), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "steward_agent", "--url", steward.url, "--name", "py-demo", "--capabilities", "api_call", "--key", str(key)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        for raw in proc.stdout:
            # Each line starts with its UTC time, as `steward agent`'s do; continuation lines do not.
            stamped = TIME_PREFIX.match(raw)
            assert stamped or raw.startswith(" "), raw
            line = raw[stamped.end() :] if stamped else raw
            lines.append(line.rstrip("\n"))
            if line.startswith("status pending"):
                registration = line.split("registration ")[1].split(" ")[0]
                status, body = steward.api("POST", f"/api/registrations/{registration}/approve", {"capabilities": ["api_call"]})
                assert status == 200, body
            if line.startswith("    npm run steward -- registrations approve "):
                assert line.split()[6] == registration, line
            if line.startswith("certificate "):
                break
        did = next(x for x in lines if x.startswith("DID "))[4:]
        assert lines[0] == f"created key {key}"
        assert oct(key.stat().st_mode & 0o777) == "0o600"
        answer = steward.api("POST", f"/api/agents/{quote(did, safe='')}/intents", {"action": "api_call", "params": {"x": 1}})
        assert answer[0] == 200 and answer[1]["output"]["echo"] == {"x": 1}
        status, body = steward.api("DELETE", f"/api/agents/{quote(did, safe='')}")
        assert status == 200, body
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    assert "status rejected" in out
    assert "steward_agent: stopped: closed with 4403: the registration was rejected, or the agent was decommissioned" in err
    assert "an admin can delete the agent" in err
    assert "Traceback" not in err
    assert json.loads(key.read_text())["did"] == did


def test_a_wrong_path_is_said_with_its_http_status(steward: Steward) -> None:
    async def main() -> None:
        url = steward.url.replace("http://", "ws://") + "/ws/agnet"
        agent = StewardAgent(url=url, keys=generate_key_pair(), name="x", capabilities=["api_call"], reconnect=False)
        ended = await agent.run()
        assert ended is not None and (ended.cause, ended.http_status) == ("http", 404)
        assert ended.message == f"HTTP 404 Not Found from {url} instead of a WebSocket (is the address right? the agent endpoint is /ws/agent)"

    asyncio.run(main())
