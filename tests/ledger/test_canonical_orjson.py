"""The ledger's canonical bytes written by orjson (:func:`odometer_core.ledger.chain._dumps`)
are the standard encoder's (:func:`~odometer_core.ledger.chain._standard`, the form
``docs`` and every export were written in), character by character, and what the standard
encoder refuses is still refused, with its own error.

Shown able to fail: with ``canonical_bytes`` handing every value to orjson (the type check's
answer ignored), a ``datetime`` and a ``UUID`` in an entry were written (orjson encodes them)
where the standard encoder raises ``TypeError``; with ``OPT_SORT_KEYS`` left out, the
key-order case failed."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import sys
import uuid
from decimal import Decimal
from typing import Any

import pytest

from odometer_core.ledger.chain import _dumps, _standard, canonical_bytes, entry_hash

#: every code point but the surrogates, in runs of 4,096
_RUNS = [
    "".join(
        chr(c)
        for c in range(start, min(start + 4096, sys.maxunicode + 1))
        if c < 0xD800 or c >= 0xE000
    )
    for start in range(0, sys.maxunicode + 1, 4096)
]


def test_every_character_is_written_alike_in_values_and_keys() -> None:
    for run in _RUNS:
        value = {"v": run, run[:64]: [run[64:128], {run[128:192]: run[192:]}]}
        assert _dumps(value) == _standard(value) == canonical_bytes(value)


@pytest.mark.parametrize(
    "number",
    [0, 1, -1, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1, 2**64, -(2**63) - 1, 10**40, True, False],
)
def test_integers_and_booleans_are_written_alike(number: int) -> None:
    value = {"n": number, "list": [number, None]}
    assert canonical_bytes(value) == _standard(value)


class _Colour(enum.StrEnum):
    RED = "red\n"


class _Size(enum.IntEnum):
    BIG = 7


class _Dict(dict[str, Any]):
    pass


def test_keys_sorted_by_code_point_and_containers_written_alike() -> None:
    value = {
        "b": 1, "a": 2, "B": 3, "é": 4, "e\u0301": 5, "\U0001f600": 6, "ÿ": 7, "": 8,
        "t": (1, "two", (3,)), "d": _Dict(z=1, y=2), "s": _Colour.RED, "i": _Size.BIG,
        "deep": [[[[{"k": [{}]}]]]], "empty": [[], {}, ""],
    }  # fmt: skip
    assert canonical_bytes(value) == _standard(value)
    assert canonical_bytes(value).startswith(b'{"":8,"B":3,"a":2,"b":1,"d":{"y":2,"z":1}')


def test_nesting_past_orjsons_limit_is_written_by_the_standard_encoder() -> None:
    value: Any = "leaf"
    for _ in range(300):
        value = {"k": [value]}
    assert canonical_bytes(value) == _standard(value)


class _Plain(enum.Enum):
    A = 1


@dataclasses.dataclass
class _Point:
    x: int


@pytest.mark.parametrize(
    "odd",
    [
        datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
        datetime.date(2026, 1, 1),
        uuid.UUID(int=1),
        _Point(1),
        Decimal("0.1"),
        _Plain.A,
        {1, 2},
        b"bytes",
    ],
)
def test_what_the_standard_encoder_refuses_is_refused_alike(odd: object) -> None:
    value = {"entry": {"odd": [odd]}}
    with pytest.raises(TypeError) as standard:
        _standard(value)
    with pytest.raises(TypeError) as ours:
        canonical_bytes(value)
    assert str(ours.value) == str(standard.value)


def test_floats_and_lone_surrogates_are_refused_as_before() -> None:
    with pytest.raises(TypeError, match="binary float"):
        canonical_bytes({"a": [{"b": 0.5}]})
    with pytest.raises(UnicodeEncodeError):
        canonical_bytes({"a": "\ud800"})


def test_an_entry_hash_is_unchanged() -> None:
    """A registration's entry as the write path builds it, hashed (the digest the standard
    encoder gave before this change)."""
    entry = {
        "accounting_version": "1.9.0", "actor": "admin", "at": "2026-11-30T01:59:47.896428Z",
        "charge": {"delta": "0", "epsilon": "0.001"}, "config": None,
        "dataset_id": "ds_a5ecf52afea54ecf83b31bb94e29b64d",
        "declaration": {"epsilon": "0.001", "type": "pure_dp"},
        "invocation_id": "inv_14778bb6a78b4d33a0865ca7562a5b01", "kind": "invocation_accepted",
        "prev_hash": "1173259ca7965b46f626a432324fa4b7324876c75f6ac085692b66ecb88d7c3e",
        "reason": None, "refund": None, "request": {"conversion_delta": None, "sub_budget": None},
        "requested": {"delta": "0", "epsilon": "0.001"}, "reservation": None, "seq": 211,
        "state": {"open_reservations": 0, "reserved_epsilon": "0", "spent_delta": "0",
                  "spent_epsilon": "0.21"},
        "org": None, "quota": None,
    }  # fmt: skip
    assert entry_hash(entry) == EXPECTED_HASH


EXPECTED_HASH = "5b70d35ee09dc959e1bcf3fbf13e6dd256052008ae9c91b983b364429c6760b1"
