"""Key files (mode 0600, the TypeScript SDK's format, clear errors for a bad one) and the four
gates with their refusal messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from steward_agent import FileGateState, GateMessages, Gates, KeyFileError, Terms, load_keys, load_or_create_keys
from steward_agent.did import public_key_from_did_key, b64url_decode

PACKAGE = Path(__file__).resolve().parents[1]


def test_a_key_file_is_created_with_mode_0600_in_the_shared_format_and_read_back(tmp_path: Path) -> None:
    file = tmp_path / "nested" / "agent.json"
    keys, created = load_or_create_keys(file)
    assert created
    assert oct(file.stat().st_mode & 0o777) == "0o600"
    data = json.loads(file.read_text())
    assert set(data) == {"version", "did", "publicKey", "privateKey", "createdAt"}
    assert data["version"] == 1 and data["did"] == keys.did and data["publicKey"] == keys.public_key
    assert public_key_from_did_key(keys.did) == b64url_decode(keys.public_key)
    assert datetime.fromisoformat(data["createdAt"].replace("Z", "+00:00")).tzinfo is not None
    again, created_again = load_or_create_keys(file)
    assert (again, created_again) == (keys, False)


def test_a_key_file_readable_by_others_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    file = tmp_path / "agent.json"
    load_or_create_keys(file)
    os.chmod(file, 0o644)
    with pytest.raises(KeyFileError, match=r"has mode 0644: it holds the agent's private key.*chmod 600"):
        load_keys(file)
    with pytest.raises(KeyFileError):
        load_or_create_keys(file)  # never replaced by a new key
    assert oct(file.stat().st_mode & 0o777) == "0o644"


@pytest.mark.parametrize(
    "content, message",
    [
        ("not json at all", "not JSON"),
        ("[1, 2]", "needs the string fields publicKey and privateKey"),
        ('{"publicKey": "abc", "privateKey": "!!"}', "privateKey is not a base64url Ed25519 key"),
        ('{"publicKey": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "privateKey": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}', "publicKey is not the public half"),
    ],
)
def test_a_key_file_with_the_wrong_content_is_refused_with_a_clear_error(tmp_path: Path, content: str, message: str) -> None:
    file = tmp_path / "agent.json"
    file.write_text(content)
    os.chmod(file, 0o600)
    with pytest.raises(KeyFileError, match=message):
        load_or_create_keys(file)
    assert file.read_text() == content, "left as it was"


def test_the_demo_agent_says_what_is_wrong_with_its_key_file_and_exits_1(tmp_path: Path) -> None:
    file = tmp_path / "agent.json"
    file.write_text("{}")
    os.chmod(file, 0o600)
    env = {**os.environ, "PYTHONPATH": str(PACKAGE)}
    r = subprocess.run([sys.executable, "-m", "steward_agent", "--url", "http://127.0.0.1:9", "--key", str(file)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert f"steward_agent: {file} is not a key file" in r.stderr
    assert "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-m", "steward_agent", "--capabilities", "api_call,fly"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "unknown capabilities fly" in r.stderr


class Clock:
    def __init__(self, iso: str) -> None:
        self.ms = datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000

    def __call__(self) -> float:
        return self.ms


def terms(caps: tuple[str, ...] = ("api_call",), limits: dict[str, int] | None = None, policy: str | None = None, expires: str | None = None) -> Terms:
    return Terms(caps, limits, policy, expires)


def test_the_four_gates_in_order_with_the_typescript_sdks_messages(tmp_path: Path) -> None:
    clock = Clock("2026-11-28T23:45:00Z")
    g = Gates(clock)
    assert g.admit("file_access", terms()).error == GateMessages.capability("file_access") == "Capability 'file_access' is not granted"
    expired = terms(policy="p1", expires="2026-11-28T23:00:00.000Z", limits={"maxTokensPerDay": 1})
    r = g.admit("api_call", expired)
    assert (r.ok, r.gate, r.error) == (False, 2, "Policy 'p1' has expired; action 'api_call' is blocked")
    g.record_tokens(60, 40)
    assert g.admit("api_call", terms(limits={"maxTokensPerDay": 100})).error == "Daily token budget exhausted"
    assert g.admit("api_call", terms(limits={"maxTokensPerDay": 101})).ok
    clock.ms += 1_800_000  # past UTC midnight: a new day's budget
    assert g.todays_tokens() == 0
    assert g.admit("api_call", terms(limits={"maxTokensPerDay": 100, "maxRequestsPerHour": 2})).ok
    r = g.admit("api_call", terms(limits={"maxRequestsPerHour": 2}))
    assert (r.ok, r.gate, r.error) == (False, 4, "Hourly request limit reached")
    assert g.executions_this_hour() == 2
    clock.ms += 1_800_000  # the first execution (23:45) leaves the rolling hour
    assert g.executions_this_hour() == 1
    assert g.admit("api_call", terms(limits={"maxRequestsPerHour": 2})).ok


def test_gate_counters_survive_a_restart_in_their_file(tmp_path: Path) -> None:
    clock = Clock("2026-11-28T10:00:00Z")
    store = FileGateState(tmp_path / "a.gates.json")
    g = Gates(clock, store)
    g.record_tokens(5, 5)
    assert g.admit("api_call", terms()).ok
    assert oct((tmp_path / "a.gates.json").stat().st_mode & 0o777) == "0o600"
    again = Gates(clock, FileGateState(tmp_path / "a.gates.json"))
    assert (again.todays_tokens(), again.executions_this_hour()) == (10, 1)
    (tmp_path / "bad.json").write_text('{"day": 1}')
    with pytest.raises(ValueError, match="does not hold gate state"):
        Gates(clock, FileGateState(tmp_path / "bad.json"))
    assert datetime.now(timezone.utc).year >= 2024
