"""The agent-side enforcement gates (docs/agent-protocol.md, "Enforcing the certificate"), run in
this order when an intent arrives; the first that fails refuses it with its message:

1. the action is one of the certificate's capabilities;
2. the policy has not expired (policyExpiresAt);
3. today's (UTC) prompt + completion tokens are below maxTokensPerDay;
4. intents executed in the last 60 minutes are below maxRequestsPerHour (only those that passed
   the gates count).

The counters live in memory; give a GateStateStore (FileGateState keeps them in a JSON file, in
the TypeScript SDK's format) and they survive a restart of the agent's process.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Mapping, Protocol

from .protocol import GateMessages

HOUR_MS = 3_600_000

#: Milliseconds since the epoch (injectable for tests).
Clock = Callable[[], float]


def _now_ms() -> float:
    return time.time() * 1000


@dataclass(frozen=True)
class Terms:
    """What a certificate grants: the policy part of it."""

    capabilities: tuple[str, ...]
    resource_limits: Mapping[str, Any] | None
    policy_id: str | None
    policy_expires_at: str | None

    @staticmethod
    def of(frame: Mapping[str, Any]) -> Terms:
        """From a certificate or an update_capabilities frame (camelCase fields)."""
        return Terms(
            capabilities=tuple(frame["capabilities"]),
            resource_limits=frame["resourceLimits"],
            policy_id=frame["policyId"],
            policy_expires_at=frame["policyExpiresAt"],
        )


@dataclass(frozen=True)
class GateResult:
    ok: bool
    gate: int | None = None
    error: str | None = None


class GateStateStore(Protocol):
    def load(self) -> dict[str, Any] | None: ...

    def save(self, state: dict[str, Any]) -> None: ...


class FileGateState:
    """Gate counters in a JSON file (``{day, tokensToday, executions}``), written aside and renamed
    so a crash leaves the old counters or the new ones. A missing file is a fresh start."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)

    def load(self) -> dict[str, Any] | None:
        try:
            with open(self.path, encoding="utf-8") as f:
                s = json.load(f)
        except FileNotFoundError:
            return None
        except (ValueError, UnicodeDecodeError):
            raise ValueError(f"{self.path} does not hold gate state") from None
        if (
            not isinstance(s, dict)
            or not isinstance(s.get("day"), str)
            or not isinstance(s.get("tokensToday"), (int, float))
            or not isinstance(s.get("executions"), list)
            or not all(isinstance(t, (int, float)) for t in s["executions"])
        ):
            raise ValueError(f"{self.path} does not hold gate state")
        return s

    def save(self, state: dict[str, Any]) -> None:
        tmp = f"{self.path}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(state, f)
        os.replace(tmp, self.path)


def _parse_time_ms(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000


class Gates:
    """The four gates and their counters (safe to use from a handler's thread)."""

    def __init__(self, clock: Clock | None = None, store: GateStateStore | None = None) -> None:
        self._clock = clock or _now_ms
        self._store = store
        self._lock = threading.Lock()
        self._day = ""
        self._tokens_today = 0
        self._executions: list[float] = []
        saved = store.load() if store else None
        if saved:
            self._day = saved["day"]
            self._tokens_today = int(saved["tokensToday"])
            self._executions = sorted(saved["executions"])

    def state(self) -> dict[str, Any]:
        return {"day": self._day, "tokensToday": self._tokens_today, "executions": list(self._executions)}

    def admit(self, action: str, terms: Terms) -> GateResult:
        """Checks an intent against the terms; when it passes, counts it as an execution."""
        with self._lock:
            if action not in terms.capabilities:
                return GateResult(False, 1, GateMessages.capability(action))
            now = self._clock()
            if terms.policy_expires_at is not None and _parse_time_ms(terms.policy_expires_at) <= now:
                return GateResult(False, 2, GateMessages.expired(terms.policy_id or "unknown", action))
            limits = terms.resource_limits or {}
            budget = limits.get("maxTokensPerDay")
            if budget is not None and self._todays_tokens(now) >= budget:
                return GateResult(False, 3, GateMessages.budget)
            self._drop_old(now)
            rate = limits.get("maxRequestsPerHour")
            if rate is not None and len(self._executions) >= rate:
                return GateResult(False, 4, GateMessages.rate)
            self._executions.append(now)
            self._save()
            return GateResult(True)

    def record_tokens(self, prompt_tokens: int, completion_tokens: int) -> None:
        with self._lock:
            self._todays_tokens(self._clock())
            self._tokens_today += prompt_tokens + completion_tokens
            self._save()

    def todays_tokens(self) -> int:
        with self._lock:
            return self._todays_tokens(self._clock())

    def executions_this_hour(self) -> int:
        with self._lock:
            self._drop_old(self._clock())
            return len(self._executions)

    def _todays_tokens(self, now: float) -> int:
        day = datetime.fromtimestamp(now / 1000, timezone.utc).strftime("%Y-%m-%d")
        if day != self._day:
            self._day = day
            self._tokens_today = 0
        return self._tokens_today

    def _drop_old(self, now: float) -> None:
        while self._executions and self._executions[0] <= now - HOUR_MS:
            self._executions.pop(0)

    def _save(self) -> None:
        if self._store:
            self._store.save(self.state())
