"""Why a connection attempt failed or a socket closed, in words a person can act on: what the
agent reports with every ``disconnected`` event (the TypeScript SDK's wording)."""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass, replace
from http import HTTPStatus
from urllib.parse import urlsplit

from .protocol import close_meaning


@dataclass(frozen=True)
class Disconnection:
    #: What happened: "connection refused by 127.0.0.1:8080 (is Steward running there?)".
    message: str
    #: refused, dns, tls, http, timeout, network, or closed (a socket was open; see code).
    cause: str
    #: The close code once a socket was open, else None.
    code: int | None = None
    reason: str = ""
    http_status: int | None = None
    error_code: str | None = None
    #: Whether the agent tries again; False: it has stopped (status rejected or stopped).
    will_retry: bool = False
    #: Seconds until the next attempt when it tries again.
    retry_in: float | None = None
    #: Attempts that failed in a row (reset at ready and at a registration pending).
    attempt: int = 0

    def but(self, **changes: object) -> Disconnection:
        return replace(self, **changes)


def describe_error(err: BaseException, url: str) -> Disconnection:
    """A connection error of an attempt to reach ``url`` (a ws:// address)."""
    parts = urlsplit(url)
    at = parts.netloc
    if isinstance(err, ConnectionRefusedError):
        return Disconnection(f"connection refused by {at} (is Steward running there?)", "refused", error_code="ECONNREFUSED")
    if isinstance(err, socket.gaierror):
        return Disconnection(f"DNS lookup of {parts.hostname} failed ({err.strerror or err})", "dns", error_code="ENOTFOUND")
    if isinstance(err, (ssl.SSLError, ssl.CertificateError)):
        return Disconnection(f"TLS with {at} failed: {err}", "tls")
    if isinstance(err, (asyncio.TimeoutError, TimeoutError)):
        return Disconnection(f"no answer from {at} in time", "timeout", error_code="ETIMEDOUT")
    return Disconnection(f"cannot reach {at}: {err or type(err).__name__}", "network")


def describe_http_status(status: int, url: str) -> Disconnection:
    """An HTTP answer where the WebSocket upgrade was expected."""
    try:
        words = " " + HTTPStatus(status).phrase
    except ValueError:
        words = ""
    hint = ""
    if status == 404:
        hint = " (is the address right? the agent endpoint is /ws/agent)"
    elif status >= 500:
        hint = " (Steward, or a proxy in front of it, is not answering)"
    return Disconnection(f"HTTP {status}{words} from {url} instead of a WebSocket{hint}", "http", http_status=status)


def describe_close(code: int, reason: str) -> Disconnection:
    """A socket that was open and closed with ``code``."""
    meaning = close_meaning(code).meaning
    said = f' ("{reason}")' if reason and reason != meaning else ""
    return Disconnection(f"closed with {code}: {meaning}{said}", "closed", code=code, reason=reason)
