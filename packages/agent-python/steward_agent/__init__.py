"""Steward's agent SDK for Python: connect an agent to Steward, wait out its registration,
co-sign its certificate, enforce its policy on every intent, send heartbeats with the model
tokens used, and reconnect by itself until Steward says stop. See docs/sdk-python.md."""

from .agent import (
    STATUSES,
    CertificateRefused,
    ChannelMessage,
    CurrentCertificate,
    Intent,
    ProtocolError,
    Reconnect,
    StewardAgent,
)
from .canonical import canonical_bytes, canonicalize
from .did import KeyPair, generate_key_pair
from .disconnection import Disconnection
from .gates import FileGateState, Gates, GateStateStore, Terms
from .keys import KeyFileError, load_keys, load_or_create_keys
from .protocol import (
    AGENT_PROTOCOL_VERSION,
    CAPABILITIES,
    CLOSE,
    FATAL_CLOSE_CODES,
    CloseMeaning,
    GateMessages,
    close_meaning,
)
from .runner import run, run_until_signal

__version__ = "0.1.0"

__all__ = [
    "AGENT_PROTOCOL_VERSION",
    "CAPABILITIES",
    "CLOSE",
    "FATAL_CLOSE_CODES",
    "STATUSES",
    "CertificateRefused",
    "ChannelMessage",
    "CloseMeaning",
    "CurrentCertificate",
    "Disconnection",
    "FileGateState",
    "GateMessages",
    "GateStateStore",
    "Gates",
    "Intent",
    "KeyFileError",
    "KeyPair",
    "ProtocolError",
    "Reconnect",
    "StewardAgent",
    "Terms",
    "canonical_bytes",
    "canonicalize",
    "close_meaning",
    "generate_key_pair",
    "load_keys",
    "load_or_create_keys",
    "run",
    "run_until_signal",
]
