"""StewardAgent: an agent's side of the agent protocol (docs/agent-protocol.md) on asyncio and
the ``websockets`` package, with the TypeScript SDK's behaviour (docs/sdk.md):

- connects to /ws/agent and keeps trying, with jittered exponential back-off, whatever goes
  wrong, until ``stop()`` or a close that means stop (FATAL_CLOSE_CODES); each failure is
  reported in words (``disconnected`` event, ``last_disconnect``);
- hello, the signed challenge, the registration wait (a 4202 close brings it back at once);
- verifies each certificate offer (shape, its own DID and key, the server's DID and signature),
  co-signs it, and keeps the certificate in force;
- heartbeats with the tokens recorded, kept under their seq until acknowledged, sent again after
  a reconnect unless ``ready`` says they were stored;
- intents through the four gates, then the handler; llm_config, skills_config and channel
  messages.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import random
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Union
from urllib.parse import quote, urlsplit

import websockets
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatusCode

from .canonical import canonical_bytes
from .certificate import certificate_problem
from .did import AGENT_AUTH_PURPOSE, KeyPair, public_key_from_did_key, verify_signature
from .disconnection import Disconnection, describe_close, describe_error, describe_http_status
from .gates import Clock, Gates, GateStateStore, Terms
from .protocol import AGENT_WS_PATH, BACKOFF_INITIAL_S, BACKOFF_MAX_S, CLOSE, FATAL_CLOSE_CODES, backoff_delay

log = logging.getLogger("steward_agent")
# The WebSocket library logs frames at DEBUG, and frames carry the session token and model keys:
# its logger for our connections stays at INFO, whatever the application's level.
_socket_log = logging.getLogger("steward_agent.socket")
_socket_log.setLevel(logging.INFO)

#: How long an attempt may take to get the WebSocket upgrade answered.
CONNECT_TIMEOUT_S = 30.0

STATUSES = ("idle", "connecting", "authenticating", "pending", "certifying", "ready", "reconnecting", "rejected", "stopped")

JsonObject = dict[str, Any]


class ProtocolError(Exception):
    """A frame from Steward that the agent cannot use (not JSON, not an object, a field missing)."""


class CertificateRefused(Exception):
    """A certificate offer that failed the agent's checks; the agent closed the socket (4000)."""


@dataclass(frozen=True)
class Intent:
    """An intent that passed the gates, as the handler gets it."""

    intent_id: str
    action: str
    params: JsonObject
    requested_by: str


@dataclass(frozen=True)
class CurrentCertificate:
    certificate: JsonObject
    server_signature: str
    agent_signature: str


@dataclass
class ChannelMessage:
    """A channel message that mentions the agent."""

    channel_id: str
    message: JsonObject
    mention: str | None
    _agent: StewardAgent = field(repr=False)
    _loop: asyncio.AbstractEventLoop = field(repr=False)

    async def reply(self, content: str, thread_id: str | None = None) -> Any:
        """Posts the agent's answer to the channel, in the message's thread unless another is given."""
        thread = thread_id if thread_id is not None else (self.message.get("threadId") or self.message.get("id"))
        return await self._agent.reply(self.channel_id, content, thread)

    def reply_blocking(self, content: str, thread_id: str | None = None) -> Any:
        """``reply`` for a handler that is a plain function (it runs in a worker thread)."""
        return asyncio.run_coroutine_threadsafe(self.reply(content, thread_id), self._loop).result()


@dataclass(frozen=True)
class Reconnect:
    """Back-off: ``initial_delay`` seconds, doubled after each failure up to ``max_delay``."""

    initial_delay: float = BACKOFF_INITIAL_S
    max_delay: float = BACKOFF_MAX_S


Handler = Callable[..., Union[Any, Awaitable[Any]]]

# Required fields of each frame from Steward and their types (docs/agent-protocol.md); a frame
# without them is reported and ignored.
_NEEDS: dict[str, dict[str, Any]] = {
    "challenge": {"nonce": str, "serverDid": str},
    "registration": {"status": str},
    "certificate_offer": {"certificate": dict, "serverSignature": str},
    "ready": {"certificate": dict, "serverSignature": str, "agentSignature": str, "session": dict, "heartbeatIntervalMs": int},
    "heartbeat_ack": {"seq": int},
    "update_capabilities": {"capabilities": list, "resourceLimits": (dict, type(None)), "policyId": (str, type(None)), "policyExpiresAt": (str, type(None))},
    "llm_config": {"config": dict},
    "skills_config": {"skills": list},
    "channel_message_send": {"channelId": str, "message": dict},
    "intent": {"intentId": str, "action": str, "params": dict, "requestedBy": str},
    "error": {"code": str, "message": str},
}


def _frame_problem(frame: Any) -> str | None:
    if not isinstance(frame, dict):
        return f"a JSON {type(frame).__name__}, not an object"
    kind = frame.get("type")
    if not isinstance(kind, str):
        return "no 'type'"
    for name, kinds in _NEEDS.get(kind, {}).items():
        value = frame.get(name)
        if not isinstance(value, kinds) or (kinds is int and isinstance(value, bool)):
            return f"{kind} without a valid '{name}'"
    return None


class StewardAgent:
    """An agent connected to Steward. Create it, register handlers and listeners, then
    ``await agent.run()`` (or ``agent.start()`` for a task, or ``steward_agent.run(agent)`` from
    a plain script)."""

    def __init__(
        self,
        *,
        url: str,
        keys: KeyPair,
        name: str,
        capabilities: list[str],
        version: str = "1.0.0",
        workspace: str | None = None,
        on_intent: Handler | None = None,
        on_llm_config: Handler | None = None,
        on_skills_config: Handler | None = None,
        on_channel_message: Handler | None = None,
        heartbeat_interval: float | None = None,
        reconnect: Reconnect | bool = True,
        clock: Clock | None = None,
        gate_state: GateStateStore | None = None,
        server_did: str | None = None,
        ssl: Any = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https", "ws", "wss") or not parts.netloc:
            raise ValueError(f"url must be an http(s):// or ws(s):// address, not {url!r}")
        if parts.scheme in ("http", "https"):
            self._http_base = f"{parts.scheme}://{parts.netloc}"
            self._ws_url = f"{'wss' if parts.scheme == 'https' else 'ws'}://{parts.netloc}{AGENT_WS_PATH}"
        else:
            self._http_base = f"{'https' if parts.scheme == 'wss' else 'http'}://{parts.netloc}"
            path = parts.path if parts.path not in ("", "/") else AGENT_WS_PATH
            self._ws_url = f"{parts.scheme}://{parts.netloc}{path}"
        self.keys = keys
        self.did = keys.did
        self.name = name
        self.version = version
        self.capabilities = list(capabilities)
        self.workspace = workspace
        self.on_intent = on_intent
        self.on_llm_config = on_llm_config
        self.on_skills_config = on_skills_config
        self.on_channel_message = on_channel_message
        self.heartbeat_interval = heartbeat_interval
        self.reconnect: Reconnect | None = (Reconnect() if reconnect is True else reconnect) or None
        self.pinned_server_did = server_did
        self._ssl = ssl
        self.gates = Gates(clock, gate_state)

        self.status = "idle"
        self.registration_id: str | None = None
        #: The co-signed certificate in force.
        self.certificate: CurrentCertificate | None = None
        #: The terms the gates enforce (from the certificate, or a newer update_capabilities).
        self.terms: Terms | None = None
        #: True between update_capabilities and the ready of the certificate that carries it.
        self.reauth_pending = False
        #: The agent's HTTP session from ready ({token, expiresAt}); never logged.
        self.session: JsonObject | None = None
        #: The latest llm_config (kept in memory only: it may hold a model key).
        self.llm_config: JsonObject | None = None
        self.skills: list[JsonObject] = []
        self.last_close: tuple[int, str] | None = None
        self.last_disconnect: Disconnection | None = None

        self._listeners: dict[str, list[Callable[..., Any]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ws: Any = None
        self._connecting: asyncio.Future[Any] | None = None
        self._wake = asyncio.Event()
        self._server_did: str | None = None
        self._offered: JsonObject | None = None
        self._failure: Disconnection | None = None
        self._attempt = 0
        self._stopped = False
        self._heartbeats: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._seq = 0
        self._fresh = [0, 0]
        self._unacked: dict[int, tuple[int, int]] = {}
        self._usage_lock = threading.Lock()

    # -- events ------------------------------------------------------------------------------

    def on(self, event: str, listener: Callable[..., Any]) -> Callable[..., Any]:
        """Calls ``listener`` on each ``event`` (status, registration, certificate, capabilities,
        heartbeat_ack, intent_refused, llm_config, skills_config, channel_message, server_error,
        close, disconnected, error). Returns the listener (for ``off``)."""
        self._listeners.setdefault(event, []).append(listener)
        return listener

    def off(self, event: str, listener: Callable[..., Any]) -> None:
        if listener in self._listeners.get(event, []):
            self._listeners[event].remove(listener)

    def _emit(self, event: str, *args: Any) -> None:
        for listener in list(self._listeners.get(event, [])):
            try:
                listener(*args)
            except Exception:
                log.exception("a listener of %r failed", event)

    def _report(self, err: Exception) -> None:
        """A problem the agent survives: logged, and the ``error`` event."""
        log.warning("%s", err)
        self._emit("error", err)

    def _set_status(self, status: str) -> None:
        if self.status == status:
            return
        self.status = status
        log.info("status %s", status)
        self._emit("status", status)

    # -- running -----------------------------------------------------------------------------

    def start(self) -> asyncio.Task[Disconnection | None]:
        """Starts ``run()`` as a task of the running loop."""
        return asyncio.get_running_loop().create_task(self.run())

    async def run(self) -> Disconnection | None:
        """Connects and keeps reconnecting until ``stop()`` (returns None) or a close that means
        stop (returns why: ``last_disconnect``, ``will_retry`` False)."""
        self._loop = asyncio.get_running_loop()
        self._stopped = False
        self._wake = asyncio.Event()
        while not self._stopped:
            found, opened = await self._connect_once()
            if self._stopped:
                break
            if (opened and found.code in FATAL_CLOSE_CODES) or self.reconnect is None:
                self._stopped = True
                self.last_disconnect = found.but(will_retry=False, retry_in=None, attempt=self._attempt + 1)
                log.error("stopped: %s", self.last_disconnect.message)
                self._set_status("rejected" if opened and found.code == CLOSE["rejected"] else "stopped")
                self._emit("disconnected", self.last_disconnect)
                return self.last_disconnect
            delay = backoff_delay(self._attempt, self.reconnect.initial_delay, self.reconnect.max_delay, random.random())
            self._attempt += 1
            self.last_disconnect = found.but(will_retry=True, retry_in=delay, attempt=self._attempt)
            log.warning("%s; retrying in %.1f s (attempt %d)", found.message, delay, self._attempt)
            self._set_status("reconnecting")
            self._emit("disconnected", self.last_disconnect)
            try:
                await asyncio.wait_for(self._wake.wait(), delay)
            except asyncio.TimeoutError:
                pass
        self._set_status("stopped")
        return None

    async def stop(self) -> None:
        """Closes the socket (1000) and stops reconnecting; status ``stopped``."""
        self._stopped = True
        self._wake.set()
        self._set_status("stopped")
        self._stop_heartbeats()
        if self._connecting and not self._connecting.done():
            self._connecting.cancel()
        ws = self._ws
        if ws is not None:
            await ws.close(1000, "agent stopping")

    async def wait_for(self, status: str, timeout: float = 10.0) -> None:
        """Returns when the agent reaches ``status``; raises RuntimeError when it ends rejected or
        stopped first, TimeoutError after ``timeout`` seconds."""
        if self.status == status:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_status(s: str) -> None:
            if done.done():
                return
            if s == status:
                done.set_result(None)
            elif s in ("rejected", "stopped"):
                why = f": {self.last_disconnect.message}" if self.last_disconnect and not self.last_disconnect.will_retry else ""
                done.set_exception(RuntimeError(f"agent ended '{s}' while waiting for '{status}'{why}"))

        self.on("status", on_status)
        try:
            await asyncio.wait_for(done, timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"agent did not reach '{status}' within {timeout} s (now '{self.status}')") from None
        finally:
            self.off("status", on_status)

    # -- usage and heartbeats ----------------------------------------------------------------

    def record_usage(self, prompt_tokens: int, completion_tokens: int) -> None:
        """Reports model tokens: counted at once by the daily budget gate, sent with the next
        heartbeat. Safe to call from a handler's thread."""
        for n in (prompt_tokens, completion_tokens):
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise ValueError("token counts are non-negative integers")
        with self._usage_lock:
            self._fresh[0] += prompt_tokens
            self._fresh[1] += completion_tokens
        self.gates.record_tokens(prompt_tokens, completion_tokens)

    def heartbeat(self) -> None:
        """Sends a heartbeat now (normally sent on the interval); nothing unless ready."""
        if self.status != "ready" or self._ws is None:
            return
        with self._usage_lock:
            self._seq += 1
            seq, delta = self._seq, (self._fresh[0], self._fresh[1])
            self._fresh = [0, 0]
            self._unacked[seq] = delta
        self._send_threadsafe(self._heartbeat_frame(seq, delta))

    def unacknowledged_usage(self) -> dict[str, int]:
        """Tokens recorded and not yet acknowledged by Steward."""
        with self._usage_lock:
            p, c = self._fresh
            for dp, dc in self._unacked.values():
                p, c = p + dp, c + dc
        return {"promptTokens": p, "completionTokens": c}

    @staticmethod
    def _heartbeat_frame(seq: int, delta: tuple[int, int]) -> JsonObject:
        return {"type": "heartbeat", "seq": seq, "sinceLastSync": {"promptTokens": delta[0], "completionTokens": delta[1]}}

    async def _beat(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.heartbeat()

    def _stop_heartbeats(self) -> None:
        if self._heartbeats:
            self._heartbeats.cancel()
            self._heartbeats = None

    def _resend_unacknowledged(self, stored: int | None) -> None:
        """After a connection's first ready: drop the unacknowledged heartbeats Steward says it
        stored, send the others again under their own seq; new ones are numbered above both."""
        with self._usage_lock:
            if stored is not None:
                for seq in [s for s in self._unacked if s <= stored]:
                    del self._unacked[seq]
                self._seq = max(self._seq, stored)
            resend = sorted(self._unacked.items())
        for seq, delta in resend:
            log.info("heartbeat %d sent again (not acknowledged before the connection closed)", seq)
            self._send(self._heartbeat_frame(seq, delta))

    # -- the connection ----------------------------------------------------------------------

    def _send(self, frame: JsonObject) -> None:
        ws = self._ws
        if ws is not None and ws.open:
            self._spawn(ws.send(json.dumps(frame)))

    def _send_threadsafe(self, frame: JsonObject) -> None:
        loop = self._loop
        if loop is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._send(frame)
        else:
            loop.call_soon_threadsafe(self._send, frame)

    def _spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._spawned_done)
        return task

    def _spawned_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        err = None if task.cancelled() else task.exception()
        # A send on a socket that closed meanwhile: the close is reported on its own.
        if err is not None and not isinstance(err, ConnectionClosed):
            log.warning("%s", err)
            self._emit("error", err)

    async def _connect_once(self) -> tuple[Disconnection, bool]:
        """One attempt: connect, run the connection until it closes; returns why it ended and
        whether a socket was open."""
        self._set_status("connecting")
        self._failure = None
        connecting = self._connecting = asyncio.ensure_future(
            websockets.connect(  # type: ignore[attr-defined]
                self._ws_url,
                open_timeout=CONNECT_TIMEOUT_S,
                max_size=None,
                # Steward pings the socket and the library answers; the agent does not ping, as
                # the TypeScript SDK does not (a slow pong would read as a server fault, 1011).
                ping_interval=None,
                ssl=self._ssl,
                logger=_socket_log,
            )
        )
        try:
            ws = await connecting
        except asyncio.CancelledError:
            if not self._stopped:
                raise
            return describe_close(1000, "agent stopping"), False
        except InvalidStatusCode as err:
            return describe_http_status(err.status_code, self._ws_url), False
        except (OSError, asyncio.TimeoutError, InvalidHandshake) as err:
            return describe_error(err, self._ws_url), False
        except Exception as err:  # anything else the library raises: said, and tried again
            return describe_error(err, self._ws_url), False
        finally:
            self._connecting = None
        self._ws = ws
        try:
            if self._stopped:
                await ws.close(1000, "agent stopping")
            else:
                self._set_status("authenticating")
                hello: JsonObject = {
                    "type": "hello",
                    "did": self.did,
                    "publicKey": self.keys.public_key,
                    "name": self.name,
                    "version": self.version,
                    "capabilities": self.capabilities,
                }
                if self.workspace:
                    hello["workspace"] = self.workspace
                await ws.send(json.dumps(hello))
            async for data in ws:
                await self._on_message(ws, data)
        except ConnectionClosed:
            pass
        finally:
            self._ws = None
            self._stop_heartbeats()
            self._offered = None
        # Heartbeats not acknowledged stay under their seq: after the next ready they are
        # dropped when Steward says it stored them, sent again otherwise.
        code = ws.close_code if ws.close_code is not None else 1006
        reason = ws.close_reason or ""
        self.last_close = (code, reason)
        self._emit("close", code, reason)
        found = self._failure or describe_close(code, reason)
        return found.but(code=code, reason=reason), True

    async def _refuse(self, ws: Any, reason: str, message: str) -> None:
        """Closes the socket from the agent's side (4000), recording why."""
        self._failure = describe_close(CLOSE["certificate_refused"], reason).but(message=message)
        await ws.close(CLOSE["certificate_refused"], reason)

    async def _on_message(self, ws: Any, data: str | bytes) -> None:
        if isinstance(data, bytes):
            self._report(ProtocolError("malformed frame from Steward: a binary frame (ignored)"))
            return
        try:
            frame = json.loads(data)
        except ValueError as err:
            self._report(ProtocolError(f"malformed frame from Steward: not JSON ({err}); ignored"))
            return
        problem = _frame_problem(frame)
        if problem:
            self._report(ProtocolError(f"malformed frame from Steward: {problem}; ignored"))
            return
        try:
            await self._on_frame(ws, frame)
        except Exception as err:  # a bug or a frame this code did not expect: said, and survived
            log.exception("handling a %s frame failed", frame["type"])
            self._emit("error", err)

    async def _on_frame(self, ws: Any, f: JsonObject) -> None:
        kind = f["type"]
        if kind == "challenge":
            if self.pinned_server_did and f["serverDid"] != self.pinned_server_did:
                await self._refuse(ws, "unexpected server DID", f"Steward's DID is {f['serverDid']}, not the pinned {self.pinned_server_did}")
                return
            self._server_did = f["serverDid"]
            self._send({"type": "auth", "signature": self.keys.sign(AGENT_AUTH_PURPOSE + f["nonce"])})
        elif kind == "registration":
            self._emit("registration", f)
            if f["status"] == "pending":
                self.registration_id = f.get("registrationId")
                self._attempt = 0  # Steward answered: a later 4202 is no failure to back off from
                log.info("registration %s awaits an admin's decision", self.registration_id)
                self._set_status("pending")
            elif f["status"] == "rejected":
                self._failure = describe_close(CLOSE["rejected"], "").but(
                    message=f"registration rejected by an admin: {f.get('reason') or '(no reason given)'}"
                )
        elif kind == "update_capabilities":
            self.terms = Terms.of(f)
            self.reauth_pending = True
            log.info("new terms: %s; policy %s (the certificate follows)", ", ".join(self.terms.capabilities), self.terms.policy_id)
            self._emit("capabilities", self.terms)
        elif kind == "certificate_offer":
            await self._on_offer(ws, f["certificate"], f["serverSignature"])
        elif kind == "ready":
            self._on_ready(f)
        elif kind == "heartbeat_ack":
            with self._usage_lock:
                self._unacked.pop(f["seq"], None)
            log.debug("heartbeat %d stored", f["seq"])
            self._emit("heartbeat_ack", f["seq"])
        elif kind == "llm_config":
            self.llm_config = f["config"]
            log.info("llm_config: %s", f["config"].get("model") or "(none)")
            self._spawn(self._call(self.on_llm_config, "on_llm_config", f["config"]))
            self._emit("llm_config", f["config"])
        elif kind == "skills_config":
            self.skills = f["skills"]
            log.info("skills_config: %d skill(s)", len(f["skills"]))
            self._spawn(self._call(self.on_skills_config, "on_skills_config", f["skills"]))
            self._emit("skills_config", f["skills"])
        elif kind == "channel_message_send":
            assert self._loop is not None
            ctx = ChannelMessage(f["channelId"], f["message"], f.get("mention"), self, self._loop)
            self._emit("channel_message", ctx)
            self._spawn(self._call(self.on_channel_message, "on_channel_message", ctx))
        elif kind == "intent":
            self._spawn(self._on_intent(f))
        elif kind == "error":
            log.warning("Steward refused a frame: %s: %s", f["code"], f["message"])
            self._emit("server_error", f)
        else:
            log.debug("ignored a frame of an unknown type %r", kind)

    async def _call(self, handler: Handler | None, name: str, *args: Any) -> None:
        """Runs a push handler (async, or a plain function in a worker thread); a failure is reported."""
        if handler is None:
            return
        try:
            await self._invoke(handler, *args)
        except Exception as err:
            log.exception("%s failed", name)
            self._emit("error", err)

    @staticmethod
    async def _invoke(handler: Handler, *args: Any) -> Any:
        if inspect.iscoroutinefunction(handler):
            return await handler(*args)
        result = await asyncio.to_thread(handler, *args)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _on_offer(self, ws: Any, cert: JsonObject, server_signature: str) -> None:
        problem = self._certificate_problem(cert, server_signature)
        if problem:
            self._report(CertificateRefused(f"certificate refused: {problem}"))
            await self._refuse(ws, "certificate refused", f"the agent refused Steward's certificate: {problem}")
            return
        if self.status != "ready":
            self._set_status("certifying")
        self._offered = cert
        self._send({"type": "certificate_accept", "agentSignature": self.keys.sign(canonical_bytes(cert)), "serial": cert["serial"]})

    def _certificate_problem(self, cert: JsonObject, server_signature: str) -> str | None:
        shape = certificate_problem(cert)
        if shape:
            return shape
        if cert["subject"] != self.did:
            return "subject is not this agent"
        if cert["subjectPublicKey"] != self.keys.public_key:
            return "subjectPublicKey is not this agent's key"
        if not self._server_did or cert["issuer"] != self._server_did:
            return "issuer is not the server"
        server_key = public_key_from_did_key(cert["issuer"])
        if server_key is None:
            return "the issuer is not an Ed25519 did:key"
        if not verify_signature(server_key, canonical_bytes(cert), server_signature):
            return "the server signature does not verify"
        return None

    def _on_ready(self, f: JsonObject) -> None:
        if self._offered is None or f["certificate"].get("serial") != self._offered["serial"]:
            return  # not the certificate co-signed last
        self.certificate = CurrentCertificate(f["certificate"], f["serverSignature"], f["agentSignature"])
        self.terms = Terms.of(f["certificate"])
        self.reauth_pending = False
        self.session = f["session"]
        self._offered = None
        self._attempt = 0
        first = self.status != "ready"
        if first:
            self._set_status("ready")
            stored = f.get("lastHeartbeatSeq")
            self._resend_unacknowledged(stored if isinstance(stored, int) else None)
            interval = self.heartbeat_interval if self.heartbeat_interval is not None else f["heartbeatIntervalMs"] / 1000
            self._stop_heartbeats()
            self._heartbeats = asyncio.ensure_future(self._beat(interval))
        c = self.certificate.certificate
        log.info("certificate %s: %s; policy %s", c["serial"], ", ".join(c["capabilities"]) or "(none)", c["policyId"] or "none")
        self._emit("certificate", self.certificate)

    async def _on_intent(self, f: JsonObject) -> None:
        def answer(ok: bool, **extra: Any) -> None:
            self._send({"type": "intent_result", "intentId": f["intentId"], "ok": ok, **extra})

        terms = self.terms
        if terms is None:
            return answer(False, error="no certificate in force")
        gate = self.gates.admit(f["action"], terms)
        if not gate.ok:
            log.info("intent %s refused: %s", f["action"], gate.error)
            self._emit("intent_refused", {**f, "error": gate.error})
            return answer(False, error=gate.error)
        if self.on_intent is None:
            return answer(False, error="this agent does not handle intents")
        intent = Intent(f["intentId"], f["action"], f["params"], f["requestedBy"])
        try:
            output = await self._invoke(self.on_intent, intent)
        except Exception as err:
            return answer(False, error=str(err) or type(err).__name__)
        if output is None:
            answer(True)
        else:
            try:
                json.dumps(output)
            except (TypeError, ValueError) as err:
                return answer(False, error=f"the intent's output is not JSON: {err}")
            answer(True, output=output)

    async def reply(self, channel_id: str, content: str, thread_id: str | None = None) -> Any:
        """Posts to /api/channels/{channel_id}/messages/agent-response with the agent's session."""
        if not self.session:
            raise RuntimeError("no session yet: the agent is not ready")
        token = self.session["token"]
        url = f"{self._http_base}/api/channels/{quote(channel_id, safe='')}/messages/agent-response"
        body = json.dumps({"content": content, "threadId": thread_id}).encode("utf-8")

        def post() -> Any:
            req = urllib.request.Request(url, data=body, method="POST", headers={"content-type": "application/json", "authorization": f"Bearer {token}"})
            try:
                with urllib.request.urlopen(req, timeout=30, context=self._ssl if self._ssl is not True else None) as res:
                    return json.loads(res.read() or b"null")
            except urllib.error.HTTPError as err:
                raise RuntimeError(f"reply failed with {err.code}: {err.read().decode('utf-8', 'replace')}") from None

        return await asyncio.to_thread(post)

