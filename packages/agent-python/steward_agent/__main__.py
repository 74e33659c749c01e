"""``python3 -m steward_agent``: the demo agent, like ``steward agent``. It keeps its key in a file
(created when missing), prints its DID and every change of status, answers intents by echoing
their parameters, sends heartbeats, keeps trying to reach Steward whatever goes wrong, and stops
only on a close that means stop.

Exit codes: 0 stopped (Ctrl-C, SIGTERM), 1 refused or failed (rejected, replaced, key refused).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import CAPABILITIES, CLOSE, ChannelMessage, Disconnection, FileGateState, Intent, KeyFileError, StewardAgent, load_or_create_keys
from .runner import run_until_signal

DESCRIPTION = """Runs a demo agent that registers with a Steward server, waits for approval, co-signs its
certificate, sends heartbeats and answers intents by echoing their parameters. It keeps trying
to reach Steward whatever goes wrong, saying why, and exits 1 only when Steward tells it to stop
(registration rejected, replaced by another instance with the same key, key refused)."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m steward_agent", description=DESCRIPTION)
    p.add_argument("--url", help="Steward's address (default $STEWARD_URL, else http://localhost:8080)")
    p.add_argument(
        "--key",
        default="steward-agent.json",
        help="the agent's key file, created when missing (default ./steward-agent.json); the gates' counters are kept beside it (FILE without .json + .gates.json)",
    )
    p.add_argument("--name", default="demo-agent", help="the agent's name (default demo-agent)")
    p.add_argument("--capabilities", default="api_call,file_access", help="capabilities to request (default api_call,file_access)")
    p.add_argument("--workspace", help="workspace id or slug to register into (default: the default workspace)")
    return p


def _say(text: str) -> None:
    # Every line says when (UTC, as `steward agent` does): an agent runs for days.
    at = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    print("\n".join(f"{at}Z {line}" if i == 0 else line for i, line in enumerate(text.split("\n"))), flush=True)


def _stop_advice(code: int | None) -> str:
    if code == CLOSE["rejected"]:
        return ". Steward will not take this key back; an admin can delete the agent (DELETE /api/agents/{did}) so that it registers anew"
    if code == CLOSE["replaced"]:
        return ". Is another instance running with the same key file?"
    if code == CLOSE["bad_signature"]:
        return ". This key is not the one the agent is registered with"
    return ""


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    capabilities = [c.strip() for c in args.capabilities.split(",") if c.strip()]
    unknown = [c for c in capabilities if c not in CAPABILITIES]
    if unknown:
        print(f"steward_agent: unknown capabilities {', '.join(unknown)}; expected some of {', '.join(CAPABILITIES)}", file=sys.stderr)
        return 1
    url = args.url or os.environ.get("STEWARD_URL") or "http://localhost:8080"
    key_file = Path(args.key).resolve()
    try:
        keys, created = load_or_create_keys(key_file)
    except (KeyFileError, OSError) as err:
        print(f"steward_agent: {err}", file=sys.stderr)
        return 1
    _say(f"{'created' if created else 'using'} key {key_file}")
    _say(f"DID {keys.did}")
    gates_file = str(key_file)[: -len(".json")] if str(key_file).endswith(".json") else str(key_file)

    def on_intent(intent: Intent) -> Any:
        _say(f"intent {intent.action} from {intent.requested_by}: answering with an echo")
        return {"echo": intent.params, "action": intent.action, "at": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")}

    async def on_channel_message(msg: ChannelMessage) -> None:
        _say(f"channel message: {msg.message.get('content')}")
        try:
            await msg.reply(f"echo: {msg.message.get('content')}")
        except Exception as err:
            print(f"reply failed: {err}", file=sys.stderr, flush=True)

    try:
        agent = StewardAgent(
            url=url,
            keys=keys,
            name=args.name,
            version="1.0.0",
            capabilities=capabilities,
            workspace=args.workspace,
            gate_state=FileGateState(gates_file + ".gates.json"),
            on_intent=on_intent,
            on_llm_config=lambda c: _say(f"llm_config: {(c.get('provider', '') + ' ' + c['model']) if c.get('model') else '(none)'}"),
            on_skills_config=lambda s: _say(f"skills_config: {', '.join(x.get('name', '?') for x in s) or '(none)'}"),
            on_channel_message=on_channel_message,
        )
    except ValueError as err:
        print(f"steward_agent: {err}", file=sys.stderr)
        return 1

    def on_status(s: str) -> None:
        if s in ("connecting", "reconnecting"):
            return  # the connection lines below say it
        if s == "pending":
            _say(
                f"status pending: registration {agent.registration_id} awaits approval.\n"
                f"  approve it on the dashboard's Registrations page, or with the Steward CLI:\n"
                f"    steward registrations approve {agent.registration_id} --capabilities {','.join(capabilities)}\n"
                f"    npm run steward -- registrations approve {agent.registration_id} --capabilities {','.join(capabilities)}   (from a Steward checkout)"
            )
        else:
            _say(f"status {s}")

    def on_disconnected(d: Disconnection) -> None:
        if d.will_retry:
            _say(f"{'cannot connect' if d.code is None else 'disconnected'}: {d.message}; retrying in {d.retry_in or 0:.1f} s (attempt {d.attempt})")
        else:
            print(f"steward_agent: stopped: {d.message}{_stop_advice(d.code)}", file=sys.stderr, flush=True)

    agent.on("status", on_status)
    agent.on("disconnected", on_disconnected)
    agent.on(
        "certificate",
        lambda c: _say(f"certificate {c.certificate['serial']}: capabilities {', '.join(c.certificate['capabilities']) or '(none)'}; policy {c.certificate['policyId'] or 'none'}"),
    )
    agent.on("intent_refused", lambda f: _say(f"intent {f['action']} refused: {f['error']}"))
    agent.on("heartbeat_ack", lambda seq: _say(f"heartbeat {seq} stored"))
    _say(f"connecting to {url}")
    return asyncio.run(run_until_signal(agent))


if __name__ == "__main__":
    sys.exit(main())
