"""Views several use cases build alike: small shapes shared between :mod:`app.services`
modules and the routes that return them (each module's own views sit beside it)."""

from __future__ import annotations

from typing import TypedDict


class LedgerHead(TypedDict):
    """A dataset's ledger head as its views show it."""

    last_seq: int
    head_hash: str
