"""Ed25519 signatures for the write path's receipts, by libsodium through PyNaCl.

Every 201 carries a receipt signed with the checkpoint key (:mod:`app.services.receipts`). An
Ed25519 signature by OpenSSL (through ``cryptography``) is about 460,000 user-space
instructions, a quarter of a whole registration's; libsodium's (PyNaCl, the Python Cryptographic
Authority's binding, which ships its own libsodium in its wheels) makes the same signature in
about 250,000 (``benchmarks/RESULTS.md``, *The write path's CPU per registration, second
round*; 24 µs against 39 µs a signature in a loop on this project's benchmark machine). Ed25519
is deterministic (RFC 8032, section 5.1.6): both libraries give the same 64 bytes for the same
key and message, so a receipt's bytes do not depend on which signed it.

:func:`signing_function` hands the receipts libsodium's signature once its signature of a check
message is the one ``cryptography`` makes with the same key; otherwise (never seen) the key's
own ``sign``. Nothing else changes: the key is read, verified and used for checkpoints and heads
by ``cryptography`` as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)
from nacl.bindings import crypto_sign, crypto_sign_BYTES

#: A message signed by both libraries with the key before libsodium is trusted with it.
_CHECK: Final = b"odometer: libsodium and cryptography give the same Ed25519 signature\n"

Sign = Callable[[bytes], bytes]


def _libsodium_sign(key: Ed25519PrivateKey) -> Sign:
    seed = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    # libsodium's secret key: the RFC 8032 seed, then the public key (64 bytes)
    secret = seed + key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    def sign(message: bytes) -> bytes:
        # crypto_sign answers signature || message (libsodium's combined mode)
        return crypto_sign(message, secret)[:crypto_sign_BYTES]

    return sign


def signing_function(key: Ed25519PrivateKey, *, sodium: bool = True) -> Sign:
    """A function signing a message with ``key`` (RFC 8032 Ed25519): libsodium's when it agrees
    with ``cryptography`` on a check message (and ``sodium``), else ``key.sign``."""
    if not sodium:
        return key.sign
    sign = _libsodium_sign(key)
    if sign(_CHECK) != key.sign(_CHECK):  # pragma: no cover - two RFC 8032 implementations
        return key.sign
    return sign
