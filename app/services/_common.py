"""Small helpers shared by the services: ids, clock, fingerprints."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from odometer_core.ledger.admission import fingerprint as fingerprint  # one digest, the core's


def new_id(prefix: str) -> str:
    """``<prefix>_<32 hex>``: random, unguessable, URL-safe."""
    return f"{prefix}_{uuid.uuid4().hex}"


def utc_now() -> str:
    """UTC time as fixed-width ISO 8601 text with microseconds (string order = time order):
    ``2026-11-29T19:00:00.123456Z`` (``isoformat``'s text, its ``+00:00`` written ``Z``: a
    third less CPU than ``strftime``, on every write)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")[:-6] + "Z"
