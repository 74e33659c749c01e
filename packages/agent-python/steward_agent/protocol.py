"""The agent protocol's vocabulary for the SDK: close codes and what each tells an agent, the
capabilities, the gates' refusal messages and the reconnect back-off. The same values as the
TypeScript SDK's; schemas/agent/sdk-shared.json in Steward's repository holds them for both SDKs'
tests, so the two cannot drift apart."""

from __future__ import annotations

from dataclasses import dataclass

#: The version of docs/agent-protocol.md this SDK speaks.
AGENT_PROTOCOL_VERSION = 1

AGENT_WS_PATH = "/ws/agent"

CAPABILITIES: tuple[str, ...] = (
    "file_access",
    "internet_access",
    "browser_control",
    "api_call",
    "mail_send",
    "code_execution",
    "system_command",
    "agent_communication",
    "knowledge_search",
)


@dataclass(frozen=True)
class CloseMeaning:
    code: int
    #: Whether the agent reconnects on its own; False: it stops and a person must act.
    reconnect: bool
    meaning: str


_TABLE = (
    CloseMeaning(1001, True, "Steward is shutting down"),
    CloseMeaning(1006, True, "the connection was lost"),
    CloseMeaning(1008, False, "Steward refused the frames or the registration of this agent (a protocol error: fix the agent)"),
    CloseMeaning(1011, True, "a fault inside Steward"),
    CloseMeaning(4000, True, "the agent refused Steward's certificate or DID"),
    CloseMeaning(4202, True, "the registration still awaits an admin; reconnect to keep waiting"),
    CloseMeaning(4401, False, "Steward refused this agent's key or signature"),
    CloseMeaning(4403, False, "the registration was rejected, or the agent was decommissioned"),
    CloseMeaning(4408, True, "the handshake did not finish in time"),
    CloseMeaning(4409, False, "another connection of this agent (the same key) replaced this one"),
    CloseMeaning(4429, True, "too many connection attempts or pending registrations; try again later"),
)

#: Close codes of /ws/agent by name.
CLOSE = {
    "going_away": 1001,
    "abnormal": 1006,
    "policy_violation": 1008,
    "internal_error": 1011,
    "certificate_refused": 4000,
    "still_pending": 4202,
    "bad_signature": 4401,
    "rejected": 4403,
    "handshake_timeout": 4408,
    "replaced": 4409,
    "try_later": 4429,
}

CLOSE_TABLE: dict[int, CloseMeaning] = {c.code: c for c in _TABLE}

#: Close codes after which the agent stops: a person must act.
FATAL_CLOSE_CODES: frozenset[int] = frozenset(c.code for c in _TABLE if not c.reconnect)


def close_meaning(code: int) -> CloseMeaning:
    """What a close code means to an agent; a code not in the table means: reconnect."""
    return CLOSE_TABLE.get(code) or CloseMeaning(code, True, "the connection was closed")


class GateMessages:
    """The gates' refusals, worded as the interface and the TypeScript SDK word them."""

    @staticmethod
    def capability(action: str) -> str:
        return f"Capability '{action}' is not granted"

    @staticmethod
    def expired(policy_id: str, action: str) -> str:
        return f"Policy '{policy_id}' has expired; action '{action}' is blocked"

    budget = "Daily token budget exhausted"
    rate = "Hourly request limit reached"


#: Reconnect back-off: the first delay, doubled after each failure up to the cap, each wait a
#: random time between half and all of it ("equal jitter").
BACKOFF_INITIAL_S = 0.5
BACKOFF_MAX_S = 8.0


def backoff_delay(failures: int, initial: float, maximum: float, rand: float) -> float:
    """Seconds to wait after ``failures`` failed attempts in a row (0 for the first failure);
    ``rand`` is uniform in [0, 1)."""
    base = min(maximum, initial * (1 << min(failures, 30)))
    return base / 2 + rand * base / 2
