"""The behaviour the two SDKs share, checked against schemas/agent/sdk-shared.json (which a
TypeScript test checks against the TypeScript SDK), and RFC 8785 against the server's vectors."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import SHARED

from steward_agent import CAPABILITIES, FATAL_CLOSE_CODES, GateMessages, canonicalize, close_meaning
from steward_agent.did import AGENT_AUTH_PURPOSE, KeyPair, did_key_from_public_key, b64url_decode, public_key_from_did_key, verify_signature
from steward_agent.protocol import BACKOFF_INITIAL_S, BACKOFF_MAX_S, backoff_delay

VECTORS = json.loads((Path(__file__).parent / "vectors" / "jcs.json").read_text(encoding="utf-8"))["vectors"]


def test_close_codes_match_the_shared_table() -> None:
    for row in SHARED["closeCodes"]:
        m = close_meaning(row["code"])
        assert (m.code, m.reconnect, m.meaning) == (row["code"], row["reconnect"], row["meaning"])
    assert FATAL_CLOSE_CODES == {r["code"] for r in SHARED["closeCodes"] if not r["reconnect"]}
    unknown = close_meaning(4999)
    assert (unknown.reconnect, unknown.meaning) == (SHARED["unknownCloseCode"]["reconnect"], SHARED["unknownCloseCode"]["meaning"])


def test_refusal_messages_capabilities_and_auth_prefix_match_the_shared_table() -> None:
    g = SHARED["gateMessages"]
    assert GateMessages.capability("<action>") == g["capability"]
    assert GateMessages.expired("<policyId>", "<action>") == g["expired"]
    assert GateMessages.budget == g["budget"]
    assert GateMessages.rate == g["rate"]
    assert list(CAPABILITIES) == SHARED["capabilities"]
    assert AGENT_AUTH_PURPOSE == SHARED["authPurpose"]


def test_backoff_doubles_to_the_cap_with_equal_jitter() -> None:
    b = SHARED["backoff"]
    assert (BACKOFF_INITIAL_S, BACKOFF_MAX_S) == (b["initialDelayMs"] / 1000, b["maxDelayMs"] / 1000)
    bases = [min(b["maxDelayMs"], b["initialDelayMs"] * b["factor"] ** n) / 1000 for n in range(8)]
    assert bases == [0.5, 1, 2, 4, 8, 8, 8, 8]
    for n, base in enumerate(bases):
        assert backoff_delay(n, BACKOFF_INITIAL_S, BACKOFF_MAX_S, 0.0) == base / 2
        assert backoff_delay(n, BACKOFF_INITIAL_S, BACKOFF_MAX_S, 0.999999) < base
        assert backoff_delay(n, BACKOFF_INITIAL_S, BACKOFF_MAX_S, 0.999999) > base * 0.99
    assert backoff_delay(10_000, BACKOFF_INITIAL_S, BACKOFF_MAX_S, 0.5) == 6.0


def test_canonical_json_matches_the_servers_canonicalizer() -> None:
    assert len(VECTORS) >= 8
    for v in VECTORS:
        assert canonicalize(json.loads(v["input"])) == v["canonical"], v["input"]


def test_did_key_and_signatures() -> None:
    # From docs/agent-protocol.md: the key and the DID of the example certificate.
    raw = b64url_decode("4QRw4PFAvP5ieDK34g3lv4Qu6-cKHjJjNeAAK6GVE6Y")
    did = did_key_from_public_key(raw)
    assert did == "did:key:z6Mkubdhr56f4ePkxxmfYfFG1UvPLbKtfqdMmxgwreBEjXqo"
    assert public_key_from_did_key(did) == raw
    assert public_key_from_did_key("did:key:zNotBase58!") is None
    assert public_key_from_did_key("did:web:example.com") is None
    # RFC 8032, test 1: the seed, its public key and the signature of the empty message.
    seed = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    import base64

    keys = KeyPair.from_private_key(base64.urlsafe_b64encode(seed).rstrip(b"=").decode())
    assert b64url_decode(keys.public_key).hex() == "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    sig = keys.sign(b"")
    assert b64url_decode(sig).hex() == (
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
        "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
    )
    assert verify_signature(b64url_decode(keys.public_key), b"", sig)
    assert not verify_signature(b64url_decode(keys.public_key), b"x", sig)
    assert not verify_signature(b64url_decode(keys.public_key), b"", "not a signature")
    assert "privateKey" not in repr(keys) and keys.private_key not in repr(keys)
