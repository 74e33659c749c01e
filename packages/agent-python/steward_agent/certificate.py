"""The certificate's shape (schemas/certificate.schema.json), checked before co-signing."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from .protocol import CAPABILITIES

_FIELDS = ("version", "serial", "subject", "subjectPublicKey", "issuer", "issuedAt", "capabilities", "resourceLimits", "policyId", "policyExpiresAt", "nonce")
_SERIAL = re.compile(r"^[0-9a-f]{32}$")
_NONCE = re.compile(r"^[A-Za-z0-9_-]{22,64}$")
_DID = re.compile(r"^did:[a-z0-9]+:[A-Za-z0-9._:%-]+$")
_KEY = re.compile(r"^[A-Za-z0-9_-]{43}$")
_LIMITS = {"maxTokensPerDay", "maxRequestsPerHour", "allowedDomains"}


def _is_time(value: Any) -> bool:
    if not isinstance(value, str) or not re.match(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$", value, re.I):
        return False
    try:
        datetime.fromisoformat(re.sub(r"[zZ]$", "+00:00", value))
        return True
    except ValueError:
        return False


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def certificate_problem(cert: Any) -> str | None:
    """None when ``cert`` has the certificate's shape, else what is wrong."""
    if not isinstance(cert, dict):
        return "the certificate is not an object"
    missing = [f for f in _FIELDS if f not in cert]
    if missing:
        return f"the certificate has no '{missing[0]}'"
    extra = sorted(set(cert) - set(_FIELDS))
    if extra:
        return f"the certificate has an unknown field '{extra[0]}'"
    if cert["version"] != 1 or isinstance(cert["version"], bool):
        return "version is not 1"
    if not isinstance(cert["serial"], str) or not _SERIAL.match(cert["serial"]):
        return "serial is not 32 hex characters"
    for name in ("subject", "issuer"):
        if not isinstance(cert[name], str) or not _DID.match(cert[name]) or len(cert[name]) > 512:
            return f"{name} is not a DID"
    if not isinstance(cert["subjectPublicKey"], str) or not _KEY.match(cert["subjectPublicKey"]):
        return "subjectPublicKey is not a base64url Ed25519 key"
    if not _is_time(cert["issuedAt"]):
        return "issuedAt is not a date-time"
    caps = cert["capabilities"]
    if not isinstance(caps, list) or any(c not in CAPABILITIES for c in caps) or len(set(caps)) != len(caps):
        return "capabilities is not a list of distinct capabilities"
    limits = cert["resourceLimits"]
    if limits is not None:
        if not isinstance(limits, dict) or set(limits) - _LIMITS:
            return "resourceLimits is not null or {maxTokensPerDay?, maxRequestsPerHour?, allowedDomains?}"
        for name in ("maxTokensPerDay", "maxRequestsPerHour"):
            if name in limits and not _positive_int(limits[name]):
                return f"resourceLimits.{name} is not a positive integer"
        domains = limits.get("allowedDomains", [])
        if not isinstance(domains, list) or not all(isinstance(d, str) and d for d in domains):
            return "resourceLimits.allowedDomains is not a list of host names"
    if cert["policyId"] is not None and (not isinstance(cert["policyId"], str) or not cert["policyId"]):
        return "policyId is not null or a string"
    if cert["policyExpiresAt"] is not None and not _is_time(cert["policyExpiresAt"]):
        return "policyExpiresAt is not null or a date-time"
    if not isinstance(cert["nonce"], str) or not _NONCE.match(cert["nonce"]):
        return "nonce is not 22 to 64 base64url characters"
    return None
