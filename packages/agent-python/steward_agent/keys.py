"""Agent key files: one Ed25519 key per file, JSON, mode 0600, the shape of the TypeScript SDK's
(``{"version": 1, "did", "publicKey", "privateKey", "createdAt"}``), so one file works in both."""

from __future__ import annotations

import json
import os
import stat
from datetime import datetime, timezone
from pathlib import Path

from .did import KeyPair, generate_key_pair


class KeyFileError(Exception):
    """A key file that cannot be used: not a key file, or readable by others. Says which and why."""


def load_keys(path: str | os.PathLike[str]) -> KeyPair:
    """Reads a key file. Raises FileNotFoundError when it is missing, KeyFileError when it is not a
    key file or when group or others may read it (it holds a private key)."""
    file = Path(path)
    mode = stat.S_IMODE(file.stat().st_mode)
    if mode & 0o077:
        raise KeyFileError(
            f"{file} has mode {mode:04o}: it holds the agent's private key, so only its owner may read it (chmod 600 {file})"
        )
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise KeyFileError(f"{file} is not a key file: not JSON ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("privateKey"), str) or not isinstance(data.get("publicKey"), str):
        raise KeyFileError(f"{file} is not a key file: it needs the string fields publicKey and privateKey")
    try:
        keys = KeyPair.from_private_key(data["privateKey"])
    except ValueError:
        raise KeyFileError(f"{file} is not a key file: privateKey is not a base64url Ed25519 key") from None
    if keys.public_key != data["publicKey"].rstrip("="):
        raise KeyFileError(f"{file} is not a key file: publicKey is not the public half of privateKey")
    if "did" in data and data["did"] != keys.did:
        raise KeyFileError(f"{file} is not a key file: did is not the did:key of publicKey")
    return keys


def load_or_create_keys(path: str | os.PathLike[str]) -> tuple[KeyPair, bool]:
    """Reads the key file, or creates it (its folder too) with a new key when it does not exist.
    Returns ``(keys, created)``. Any other problem is raised, never replaced by a new key."""
    file = Path(path)
    try:
        return load_keys(file), False
    except FileNotFoundError:
        pass
    keys = generate_key_pair()
    data = {
        "version": 1,
        "did": keys.did,
        "publicKey": keys.public_key,
        "privateKey": keys.private_key,
        "createdAt": datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }
    file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(json.dumps(data, indent=2) + "\n")
    os.chmod(file, 0o600)
    return keys, True
