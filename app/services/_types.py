"""Views several use cases build alike: small shapes shared between :mod:`app.services`
modules and the routes that return them (each module's own views sit beside it); and
:data:`JSONObject`, what a JSON object whose shape is another's (the accounting core's, a
ledger entry's as stored) is typed as where it passes through (defined with the wire models,
``app/schemas/_types.py``, the lowest floor that uses it)."""

from __future__ import annotations

from typing import TypedDict

from app.schemas._types import JSONObject

__all__ = ["JSONObject", "LedgerHead"]


class LedgerHead(TypedDict):
    """A dataset's ledger head as its views show it."""

    last_seq: int
    head_hash: str
