"""Ed25519 signatures for the write path's receipts, by libsodium when the system has it.

Every 201 carries a receipt signed with the checkpoint key (:mod:`app.services.receipts`). An
Ed25519 signature by OpenSSL (through ``cryptography``) is about 460,000 user-space
instructions, a quarter of a whole registration's; libsodium's ``crypto_sign_ed25519_detached``
makes the same signature in about 250,000 (``benchmarks/RESULTS.md``, *The write path's CPU per
registration, second round*). Ed25519 is deterministic (RFC 8032, section 5.1.6): both libraries
give the same 64 bytes for the same key and message, so a receipt's bytes do not depend on which
signed it.

:func:`signing_function` hands the receipts libsodium's signature when the shared library loads
(``libsodium.so.23``, Debian's ``libsodium23``, or what ``ctypes.util.find_library`` finds) and
its signature of a check message is the one ``cryptography`` makes with the same key; otherwise
the key's own ``sign``. Nothing else changes: the key is read and verified by ``cryptography``
as before.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from functools import lru_cache
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

#: A message signed by both libraries with the key before libsodium is trusted with it.
_CHECK: Final = b"odometer: libsodium and cryptography give the same Ed25519 signature\n"
_NAMES: Final = ("libsodium.so.23", "libsodium.so")

Sign = Callable[[bytes], bytes]


@lru_cache(maxsize=1)
def _sodium() -> ctypes._NamedFuncPointer | None:
    """libsodium's ``crypto_sign_ed25519_detached``, its argument types declared; ``None`` when
    no libsodium loads or it does not initialise."""
    names = [*_NAMES, ctypes.util.find_library("sodium")]
    for name in names:
        if name is None:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        if lib.sodium_init() < 0:
            return None
        fn = lib.crypto_sign_ed25519_detached
        fn.argtypes = [
            ctypes.c_char_p,  # the signature, 64 bytes
            ctypes.c_void_p,  # its length (NULL: not asked)
            ctypes.c_char_p,  # the message
            ctypes.c_ulonglong,  # its length
            ctypes.c_char_p,  # the secret key: seed || public key, 64 bytes
        ]
        fn.restype = ctypes.c_int
        return fn
    return None


def _libsodium_sign(key: Ed25519PrivateKey) -> Sign | None:
    fn = _sodium()
    if fn is None:
        return None
    seed = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    secret = seed + key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    def sign(message: bytes) -> bytes:
        out = ctypes.create_string_buffer(64)
        if fn(out, None, message, len(message), secret) != 0:
            raise RuntimeError("libsodium refused to sign")
        return out.raw

    return sign


def signing_function(key: Ed25519PrivateKey, *, sodium: bool = True) -> Sign:
    """A function signing a message with ``key`` (RFC 8032 Ed25519): libsodium's when it is
    present and agrees with ``cryptography`` on a check message (and ``sodium``), else
    ``key.sign``."""
    sign = _libsodium_sign(key) if sodium else None
    if sign is None or sign(_CHECK) != key.sign(_CHECK):
        return key.sign
    return sign
