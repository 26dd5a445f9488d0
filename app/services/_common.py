"""Small helpers shared by the services: ids, clock, fingerprints."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any

from odometer_core.ledger.chain import canonical_bytes


def new_id(prefix: str) -> str:
    """``<prefix>_<32 hex>``: random, unguessable, URL-safe."""
    return f"{prefix}_{uuid.uuid4().hex}"


def utc_now() -> str:
    """UTC time as fixed-width ISO 8601 text with microseconds (string order = time order)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def fingerprint(operation: str, **request: Any) -> str:
    """A digest of a request's meaning, for idempotency-key reuse detection."""
    return hashlib.sha256(canonical_bytes({"op": operation, **request})).hexdigest()
