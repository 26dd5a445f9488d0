"""Reading what earlier accounting versions wrote.

Every ledger entry records the accounting version it was written with, and entries are
append-only: an entry keeps the JSON it was hashed with forever. When a version renames a stored
field, the replay upgrades older entries with the functions here before re-running them, so a
ledger that spans versions still verifies end to end.

Version 1.1.0 renamed one field so that each name says one thing: in ``zcdp`` and ``rdp`` the
share δ_c of δ_B that pays for converting the filter's total into (ε, δ) is
``final_conversion_delta``; version 1.0.0 called it ``delta_conversion``, one transposition
away from ``basic`` mode's unrelated per-invocation ``conversion_delta``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

VERSION_1_0: Final = "1.0.0"

_RENAMED_1_0: Final = {"delta_conversion": "final_conversion_delta"}


def _renamed(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {_RENAMED_1_0.get(k, k): v for k, v in obj.items()}


def upgrade_config(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A configuration as written by version 1.0.0, in today's form (sub-ledgers included)."""
    if obj is None:
        return None
    out = _renamed(obj)
    if isinstance(out.get("ledgers"), list):
        out["ledgers"] = [_renamed(item) for item in out["ledgers"]]
    return out


def upgrade_request(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The request extras of an entry (a budget change names the conversion share)."""
    return None if obj is None else _renamed(obj)


def upgrade_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A version 1.0.0 ledger entry with today's field names (its hash is left as written:
    the chain is checked on the entry as stored, before it is upgraded)."""
    out = dict(entry)
    out["config"] = upgrade_config(entry.get("config"))
    out["request"] = upgrade_request(entry.get("request"))
    quota = entry.get("quota")
    if isinstance(quota, Mapping) and quota.get("config") is not None:
        out["quota"] = {**quota, "config": upgrade_config(quota["config"])}
    return out
