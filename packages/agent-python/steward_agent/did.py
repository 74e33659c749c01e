"""Ed25519 keys as ``did:key`` identifiers (multicodec 0xed01, base58btc, ``did:key:z6Mk...``),
base64url without padding, and signing and verifying with the ``cryptography`` package."""

from __future__ import annotations

import base64
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

#: The prefix of what an agent signs to answer a ``challenge`` (docs/agent-protocol.md, ``auth``).
AGENT_AUTH_PURPOSE = "steward-agent-auth:"

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_MULTICODEC = b"\xed\x01"


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Decodes base64url with or without padding; raises ValueError on anything else."""
    if not isinstance(text, str) or not all(c.isalnum() or c in "-_=" for c in text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b58encode(data: bytes) -> str:
    n = int.from_bytes(data, "big")
    out = ""
    while n > 0:
        n, r = divmod(n, 58)
        out = _B58[r] + out
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + out


def _b58decode(text: str) -> bytes:
    n = 0
    for c in text:
        i = _B58.find(c)
        if i < 0:
            raise ValueError("not base58")
        n = n * 58 + i
    body = n.to_bytes((n.bit_length() + 7) // 8, "big") if n else b""
    return b"\0" * (len(text) - len(text.lstrip("1"))) + body


def did_key_from_public_key(raw: bytes) -> str:
    if len(raw) != 32:
        raise ValueError("an Ed25519 public key has 32 bytes")
    return "did:key:z" + _b58encode(_MULTICODEC + raw)


def public_key_from_did_key(did: str) -> bytes | None:
    """The raw key inside an Ed25519 ``did:key``, or None when the DID is not one."""
    if not isinstance(did, str) or not did.startswith("did:key:z"):
        return None
    try:
        data = _b58decode(did[len("did:key:z") :])
    except ValueError:
        return None
    if len(data) != 34 or data[:2] != _MULTICODEC:
        return None
    return data[2:]


@dataclass(frozen=True)
class KeyPair:
    """An agent's Ed25519 key: its DID and the raw keys, base64url (the key file's fields).

    ``repr`` leaves the private key out, so a key pair printed or logged by mistake shows none.
    """

    did: str
    public_key: str
    private_key: str

    def __repr__(self) -> str:
        return f"KeyPair(did={self.did!r})"

    @staticmethod
    def from_private_key(private_key: str) -> KeyPair:
        seed = b64url_decode(private_key)
        if len(seed) != 32:
            raise ValueError("an Ed25519 private key has 32 bytes")
        pub = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return KeyPair(did=did_key_from_public_key(pub), public_key=b64url_encode(pub), private_key=private_key)

    def sign(self, message: bytes | str) -> str:
        """Signs the bytes (a string: its UTF-8 bytes); base64url signature."""
        data = message.encode("utf-8") if isinstance(message, str) else message
        key = Ed25519PrivateKey.from_private_bytes(b64url_decode(self.private_key))
        return b64url_encode(key.sign(data))


def generate_key_pair() -> KeyPair:
    """A new Ed25519 key in memory."""
    key = Ed25519PrivateKey.generate()
    seed = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    return KeyPair.from_private_key(b64url_encode(seed))


def verify_signature(public_key: bytes, message: bytes, signature: str) -> bool:
    """Whether a base64url Ed25519 signature over ``message`` verifies with the raw key."""
    try:
        sig = b64url_decode(signature)
        if len(sig) != 64:
            return False
        Ed25519PublicKey.from_public_bytes(public_key).verify(sig, message)
        return True
    except (ValueError, InvalidSignature):
        return False
