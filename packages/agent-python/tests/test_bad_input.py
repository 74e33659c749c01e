"""What a real Steward never sends, from a fake one: malformed frames and certificates that do not
verify are reported clearly and survived; no secret reaches the log."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from datetime import datetime, timezone
from typing import Any

import pytest
from conftest import until

from steward_agent import CertificateRefused, ProtocolError, Reconnect, StewardAgent, canonical_bytes, generate_key_pair
from steward_agent.did import KeyPair

SERVER = generate_key_pair()


def certificate(agent: KeyPair, **changes: Any) -> dict[str, Any]:
    cert = {
        "version": 1,
        "serial": secrets.token_hex(16),
        "subject": agent.did,
        "subjectPublicKey": agent.public_key,
        "issuer": SERVER.did,
        "issuedAt": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"),
        "capabilities": ["api_call"],
        "resourceLimits": None,
        "policyId": None,
        "policyExpiresAt": None,
        "nonce": secrets.token_urlsafe(18),
    }
    cert.update(changes)
    return cert


async def handshake(ws: Any, keys: KeyPair, cert: dict[str, Any], signer: KeyPair = SERVER, before_offer: list[Any] | None = None) -> dict[str, Any] | None:
    """Plays Steward's side up to ready; returns the certificate_accept (None when the socket closed)."""
    hello = json.loads(await ws.recv())
    assert hello["type"] == "hello" and hello["did"] == keys.did
    await ws.send(json.dumps({"type": "challenge", "nonce": "n" * 24, "serverDid": SERVER.did}))
    assert json.loads(await ws.recv())["type"] == "auth"
    for raw in before_offer or []:
        await ws.send(raw)
    await ws.send(json.dumps({"type": "certificate_offer", "certificate": cert, "serverSignature": signer.sign(canonical_bytes(cert))}))
    try:
        accept: dict[str, Any] = json.loads(await ws.recv())
    except Exception:
        return None
    return accept


def test_malformed_frames_are_reported_and_the_agent_carries_on(fake_steward: Any, caplog: pytest.LogCaptureFixture) -> None:
    keys = generate_key_pair()

    async def main() -> None:
        accepted: list[dict[str, Any]] = []

        async def conn(ws: Any) -> None:
            cert = certificate(keys)
            garbage = [
                "this is not JSON",
                b"\x00\x01 binary",
                "[1, 2, 3]",
                '{"no": "type"}',
                '{"type": "intent", "action": "api_call"}',
                '{"type": "heartbeat_ack", "seq": "one"}',
                '{"type": "a_frame_from_the_future", "x": 1}',
            ]
            accept = await handshake(ws, keys, cert, before_offer=garbage)
            assert accept is not None
            accepted.append(accept)
            await ws.send(json.dumps({"type": "ready", "agentId": keys.did, "certificate": cert, "serverSignature": SERVER.sign(canonical_bytes(cert)), "agentSignature": accept["agentSignature"], "session": {"token": "t" * 43, "expiresAt": "2099-01-01T00:00:00Z"}, "heartbeatIntervalMs": 3_600_000, "lastHeartbeatSeq": None}))
            await ws.send(json.dumps({"type": "intent", "intentId": "i1", "action": "api_call", "params": {"q": 1}, "requestedBy": "did:key:zSomeone"}))
            accepted.append(json.loads(await ws.recv()))
            await ws.wait_closed()

        url, server = await fake_steward(conn)
        agent = StewardAgent(url=url, keys=keys, name="x", capabilities=["api_call"], on_intent=lambda i: {"echo": i.params})
        errors: list[Exception] = []
        agent.on("error", errors.append)
        task = agent.start()
        await agent.wait_for("ready")
        await until(lambda: len(accepted) == 2)
        assert accepted[1] == {"type": "intent_result", "intentId": "i1", "ok": True, "output": {"echo": {"q": 1}}}
        assert all(isinstance(e, ProtocolError) for e in errors)
        assert [str(e) for e in errors] == [
            "malformed frame from Steward: not JSON (Expecting value: line 1 column 1 (char 0)); ignored",
            "malformed frame from Steward: a binary frame (ignored)",
            "malformed frame from Steward: a JSON list, not an object; ignored",
            "malformed frame from Steward: no 'type'; ignored",
            "malformed frame from Steward: intent without a valid 'intentId'; ignored",
            "malformed frame from Steward: heartbeat_ack without a valid 'seq'; ignored",
        ]
        assert "malformed frame from Steward: a JSON list" in caplog.text
        await agent.stop()
        assert await task is None
        server.close()
        await server.wait_closed()

    caplog.set_level(logging.WARNING, "steward_agent")
    asyncio.run(main())


@pytest.mark.parametrize(
    "variant, problem",
    [
        ("wrong signer", "the server signature does not verify"),
        ("not about this agent", "subject is not this agent"),
        ("tampered", "the server signature does not verify"),
        ("bad shape", "serial is not 32 hex characters"),
    ],
)
def test_a_certificate_that_does_not_verify_is_refused_with_4000_and_the_agent_tries_again(fake_steward: Any, variant: str, problem: str) -> None:
    keys = generate_key_pair()

    async def main() -> None:
        offers: list[dict[str, Any] | None] = []
        closes: list[int] = []

        async def conn(ws: Any) -> None:
            cert = certificate(keys, subject=generate_key_pair().did) if variant == "not about this agent" else certificate(keys)
            signer = generate_key_pair() if variant == "wrong signer" else SERVER
            if variant == "bad shape":
                cert["serial"] = "XYZ"
            if variant == "tampered":
                signed = dict(cert)
                cert["capabilities"] = ["api_call", "system_command"]
                hello = json.loads(await ws.recv())
                assert hello["type"] == "hello"
                await ws.send(json.dumps({"type": "challenge", "nonce": "n" * 24, "serverDid": SERVER.did}))
                await ws.recv()
                await ws.send(json.dumps({"type": "certificate_offer", "certificate": cert, "serverSignature": SERVER.sign(canonical_bytes(signed))}))
                try:
                    offers.append(json.loads(await ws.recv()))
                except Exception:
                    offers.append(None)
            else:
                offers.append(await handshake(ws, keys, cert, signer=signer))
            await ws.wait_closed()
            closes.append(ws.close_code)

        url, server = await fake_steward(conn)
        agent = StewardAgent(url=url, keys=keys, name="x", capabilities=["api_call"], reconnect=Reconnect(initial_delay=0.01, max_delay=0.02))
        errors: list[Exception] = []
        agent.on("error", errors.append)
        reports: list[Any] = []
        agent.on("disconnected", reports.append)
        task = agent.start()
        await until(lambda: len(closes) >= 2)  # refused, and tried again
        await agent.stop()
        await task
        assert offers[:2] == [None, None], "nothing was co-signed"
        assert closes[:2] == [4000, 4000]
        assert isinstance(errors[0], CertificateRefused)
        assert str(errors[0]) == f"certificate refused: {problem}"
        assert reports[0].code == 4000 and reports[0].will_retry
        assert reports[0].message == f"the agent refused Steward's certificate: {problem}"
        assert agent.certificate is None
        server.close()
        await server.wait_closed()

    asyncio.run(main())


def test_no_secret_is_logged_even_at_debug(fake_steward: Any, caplog: pytest.LogCaptureFixture) -> None:
    keys = generate_key_pair()
    token = "SESSION" + secrets.token_urlsafe(30)
    api_key = "sk-" + secrets.token_urlsafe(30)

    async def main() -> None:
        async def conn(ws: Any) -> None:
            cert = certificate(keys)
            accept = await handshake(ws, keys, cert)
            assert accept is not None
            await ws.send(json.dumps({"type": "ready", "agentId": keys.did, "certificate": cert, "serverSignature": SERVER.sign(canonical_bytes(cert)), "agentSignature": accept["agentSignature"], "session": {"token": token, "expiresAt": "2099-01-01T00:00:00Z"}, "heartbeatIntervalMs": 3_600_000, "lastHeartbeatSeq": None}))
            await ws.send(json.dumps({"type": "llm_config", "config": {"apiKey": api_key, "provider": "openai", "model": "m"}}))
            await ws.wait_closed()

        url, server = await fake_steward(conn)
        seen: list[dict[str, Any]] = []
        agent = StewardAgent(url=url, keys=keys, name="x", capabilities=["api_call"], on_llm_config=seen.append)
        task = agent.start()
        await until(lambda: seen)
        assert agent.llm_config is not None and agent.llm_config["apiKey"] == api_key, "kept in memory"
        await agent.stop()
        await task
        server.close()
        await server.wait_closed()

    caplog.set_level(logging.DEBUG)
    asyncio.run(main())
    # Everything the agent's side logged (the fake server's own log is not the agent's).
    mine = [r for r in caplog.records if r.name.startswith("steward_agent")]
    text = "\n".join(r.getMessage() + repr(r.args) for r in mine)
    assert "status ready" in text and "llm_config: m" in text
    for secret in (token, api_key, keys.private_key):
        assert secret not in text
