"""The write path's entry (:func:`odometer_core.ledger.entry.next_exported`, a dict built once)
is :func:`~odometer_core.ledger.entry.next_entry`'s entry exported
(:meth:`~odometer_core.ledger.entry.Entry.to_export`): the same fields in the same order, the
same hash, checked by the chain's own verification.

Shown able to fail: with ``next_exported`` keeping ``kind`` as the enum member (equal to its
string, so the entries compared equal), the three cases failed on its type."""

from __future__ import annotations

from typing import Any

import pytest

from odometer_core.ledger.chain import GENESIS_HASH, PAYLOAD_FIELDS, entry_hash
from odometer_core.ledger.entry import EntryKind, next_entry, next_exported

CASES: list[dict[str, Any]] = [
    {"head_seq": 0, "head_hash": None, "kind": EntryKind.DATASET_CREATED},
    {
        "head_seq": 41, "head_hash": "ab" * 32, "kind": EntryKind.INVOCATION_ACCEPTED,
        "invocation_id": "inv_1", "declaration": {"type": "pure_dp", "epsilon": "0.5"},
        "request": {"sub_budget": None}, "charge": {"epsilon": "0.5", "delta": "0"},
        "requested": {"epsilon": "0.5", "delta": "0"},
    },
    {
        "head_seq": 7, "head_hash": "cd" * 32, "kind": EntryKind.INVOCATION_REJECTED,
        "reason": "budget exceeded: ε", "org": {"state": {"spent_epsilon": "1"}},
        "quota": {"state": {"spent_epsilon": "2"}}, "reservation": {"epsilon": "1"},
    },
]  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_the_exported_entry_is_the_entrys_export(case: dict[str, Any]) -> None:
    common: dict[str, Any] = {
        "dataset_id": "ds_1", "actor": "admin", "at": "2026-11-30T02:00:00.000000Z",
        "accounting_version": "1.9.0", "state": {"spent_epsilon": "0.5", "spent_delta": "0"},
    }  # fmt: skip
    exported = next_exported(**common, **case)
    entry = next_entry(**common, **case)
    assert exported == entry.to_export()
    assert list(exported) == [*PAYLOAD_FIELDS, "hash"]
    assert exported["hash"] == entry_hash(exported)
    assert exported["prev_hash"] == (case["head_hash"] or GENESIS_HASH)
    assert type(exported["kind"]) is str and exported["kind"] == str(case["kind"])
