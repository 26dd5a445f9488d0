"""Receipts signed by libsodium (PyNaCl) are the bytes ``cryptography`` signs
(app.services.signing)."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.services.signing import signing_function
from odometer_core.ledger.receipts import LogSigner, open_receipt

#: RFC 8032, section 7.1, TEST 1, 2 and 3: secret key, message, signature (hex).
VECTORS = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e3970"
        "1cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613"
        "d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760"
        "984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
]


@pytest.mark.parametrize(("secret", "message", "signature"), VECTORS)
def test_rfc8032_vectors(secret: str, message: str, signature: str) -> None:
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(secret))
    sign = signing_function(key)
    assert sign != key.sign  # libsodium's, not the key's own
    assert sign(bytes.fromhex(message)).hex() == signature
    assert key.sign(bytes.fromhex(message)).hex() == signature


def test_receipts_are_the_same_bytes() -> None:
    key = Ed25519PrivateKey.generate()
    fast = LogSigner(key, "ds-1", signing_function(key))
    slow = LogSigner(key, "ds-1")
    for seq in (1, 2, 1000):
        a = fast.receipt(seq, "ab" * 32, "2026-11-29T22:00:00.000000Z")
        b = slow.receipt(seq, "ab" * 32, "2026-11-29T22:00:00.000000Z")
        assert a == b
        assert open_receipt(a.to_json(), key.public_key()) == a


def test_without_sodium_the_keys_own() -> None:
    key = Ed25519PrivateKey.generate()
    assert signing_function(key, sodium=False) == key.sign
