"""Small helpers shared by the services: ids, clock, fingerprints."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import Final

from odometer_core.ledger.admission import fingerprint as fingerprint  # one digest, the core's

#: A version 4 UUID's fixed bits (RFC 4122: the variant ``10``, the version ``0100``), as
#: :func:`uuid.uuid4` sets them: cleared by the mask, set by the bits.
_UUID4_MASK: Final = ~((0xC000 << 48) | (0xF000 << 64))
_UUID4_BITS: Final = (0x8000 << 48) | (4 << 76)


def new_id(prefix: str) -> str:
    """``<prefix>_<32 hex>``: random, unguessable, URL-safe; the hex of a version 4 UUID, as
    ``uuid.uuid4().hex`` writes it, without building the ``UUID`` (every registration makes
    one: ``tests/services/test_new_id.py``)."""
    n = int.from_bytes(os.urandom(16)) & _UUID4_MASK | _UUID4_BITS
    return f"{prefix}_{n:032x}"


def utc_now() -> str:
    """UTC time as fixed-width ISO 8601 text with microseconds (string order = time order):
    ``2026-11-29T19:00:00.123456Z``, the text of ``datetime.now(UTC).isoformat(timespec=
    "microseconds")`` with its ``+00:00`` written ``Z`` (:func:`utc_text` of the clock)."""
    return utc_text(time.time_ns())


#: The last second :func:`utc_text` wrote, and its text up to the seconds.
_second: tuple[int, str] = (-1, "")


def utc_text(ns: int) -> str:
    """:func:`utc_now`'s text of ``ns`` nanoseconds since the epoch (floored to microseconds,
    as ``datetime.now`` floors the clock). The text up to the seconds is written once a second
    and kept: ``datetime.isoformat`` formatted every field and the UTC offset through
    ``PyUnicode_FromFormat`` on each call, about 17,000 instructions, 1 % of a registration
    (``tests/services/test_utc_text.py`` holds the two texts equal)."""
    global _second
    us = ns // 1000
    second = us // 1_000_000
    known = _second
    if known[0] != second:
        known = _second = (
            second,
            datetime.fromtimestamp(second, UTC).isoformat(timespec="seconds")[:-6],
        )
    return f"{known[1]}.{us % 1_000_000:06d}Z"
