"""A registration's 201 body is rendered without building its model
(:func:`app.services.responses.created_text`): the same bytes as
``render(InvocationCreated(**fields))`` for every shape the core gives, and the model itself
(its conversion or its error) for any other."""

from __future__ import annotations

import contextlib
import itertools
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from app.schemas.common import render
from app.schemas.invocations import InvocationCreated
from app.services.responses import created_text

BASE: dict[str, Any] = {
    "id": "inv_0123456789abcdef0123456789abcdef",
    "dataset_id": "ds_0123456789abcdef0123456789abcdef",
    "status": "accepted",
    "mechanism": {"type": "gaussian", "sigma": "1.5", "sensitivity": "1"},
    "charge": {"epsilon": "0.25", "delta": "0.000001"},
    "requested": {"epsilon": "0.25", "delta": "0.000001"},
    "remaining": {"epsilon": "9.75", "delta": "0.000009"},
    "ledger_seq": 42,
    "created_at": "2026-11-29T19:00:00.123456Z",
}
#: each optional field: absent, null, and values the core gives
OPTIONAL: dict[str, list[Any]] = {
    "sub_budget": ["training"],
    "conversion_delta": ["0.00001"],
    "contribution": ["record", "person"],
    "neighbours": ["zero_out"],
    "reservation": [{"epsilon": "1", "delta": "0"}],
    "levels": [{"organisation": {"charge": {"epsilon": "0.25"}, "remaining": {"epsilon": "1"}}}],
    "blocks": [[], [{"from": "2026-06-01", "to": "2026-06-07"}]],
    "receipt": [
        {
            "type": "odometer.receipt.v1",
            "dataset_id": "ds_1",
            "seq": 42,
            "entry_hash": "ab" * 32,
            "at": "2026-11-29T19:00:00.123456Z",
            "note": "odometer.receipt/v1\nodometer/ledger/ds_1\n42\n…\n\n— key AAAA\n",
        }
    ],
}
_ABSENT = object()


def _shapes() -> list[dict[str, Any]]:
    names = list(OPTIONAL)
    shapes: list[dict[str, Any]] = []
    for present in itertools.product([_ABSENT, None, "value"], repeat=len(names)):
        fields = dict(BASE)
        for name, how in zip(names, present, strict=True):
            if how is None:
                fields[name] = None
            elif how == "value":
                fields[name] = OPTIONAL[name][len(shapes) % len(OPTIONAL[name])]
        shapes.append(fields)
    return shapes


def test_every_shape_renders_the_models_bytes() -> None:
    shapes = _shapes()
    assert len(shapes) == 3**8
    for status in ("accepted", "reserved"):
        for fields in shapes[:: 7 if status == "reserved" else 1]:
            fields = {**fields, "status": status}
            assert created_text(fields) == render(InvocationCreated(**fields)), fields


@pytest.mark.parametrize(
    "change",
    [
        {"status": "rejected"},  # not a 201 status: the model refuses it
        {"ledger_seq": True},  # bool: the model's int would refuse or convert
        {"ledger_seq": "42"},  # text: the model converts it
        {"conversion_delta": Decimal("0.00001")},  # the model refuses it
        {"contribution": "everyone"},
        {"blocks": [("2026-06-01", "2026-06-07")]},
        {"unknown": 1},  # the model ignores it
    ],
)
def test_any_other_shape_is_left_to_the_model(change: dict[str, Any]) -> None:
    fields = {**BASE, **change}
    assert created_text(fields) is None
    with contextlib.suppress(ValidationError):  # the model's answer, as before
        render(InvocationCreated(**fields))


@pytest.mark.parametrize("missing", ["id", "status", "charge", "ledger_seq", "created_at"])
def test_a_missing_required_field_is_left_to_the_model(missing: str) -> None:
    fields = {k: v for k, v in BASE.items() if k != missing}
    assert created_text(fields) is None
    with pytest.raises(ValidationError):
        InvocationCreated(**fields)
