"""The write path's seams are live, and the rendering rule of recorded bodies.

The deliberately broken builds (``tests/concurrency/broken_builds.py``) replace the module-level
seams of the write path (:mod:`app.services.idempotency`, :mod:`app.services.reservations`).
They fail loudly if a seam is renamed; this checks the other half: the service really calls
through each seam, so replacing it changes behaviour.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from app.db import driver
from app.db.uow import UnitOfWork
from app.schemas.common import BudgetExceededBody, render
from app.schemas.invocations import InvocationFinished
from app.services import idempotency, invocations, reservations
from app.services.principals import Principal, Role
from app.services.registration import InvocationRequest
from odometer_core.accounting import parse_declaration
from tests.concurrency import broken_builds
from tests.support import service_dataset

ADMIN = Principal("admin", Role.ADMIN, None)
#: seam → the module whose name it is
SEAMS = {
    "stored_response": idempotency,
    "commit": idempotency,
    "accounting_settle": reservations,
    "accounting_cancel": reservations,
}
ODP = {
    "type": "odp",
    "cells": [{"name": "a", "epsilon": "0.1"}, {"name": "b", "epsilon": "0.2"}],
    "delta": "0.0000001",
}


def _spy(monkeypatch: pytest.MonkeyPatch, calls: list[str], name: str) -> None:
    real: Callable[..., Any] = getattr(SEAMS[name], name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return real(*args, **kwargs)

    monkeypatch.setattr(SEAMS[name], name, spy)


def test_the_service_calls_through_every_seam(
    uow: UnitOfWork, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = {"id": service_dataset(uow, "seams")}
    calls: list[str] = []
    for name in SEAMS:
        _spy(monkeypatch, calls, name)

    def register(key: str) -> str:
        request = InvocationRequest(parse_declaration(ODP))
        body = invocations.register_invocation(uow, ADMIN, ds["id"], request, key).body
        inv_id: str = json.loads(body)["id"]
        return inv_id

    first, second = register("k1"), register("k2")
    assert calls.count("stored_response") == 2 and calls.count("commit") == 2
    reservations.settle_invocation(uow, ADMIN, ds["id"], first, "a")
    reservations.cancel_invocation(uow, ADMIN, ds["id"], second)
    assert {"accounting_settle", "accounting_cancel"} <= set(calls)


def test_a_broken_build_refuses_a_missing_seam(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(idempotency, "commit")
    with pytest.raises(broken_builds.MissingSeam, match="commit"):
        broken_builds.create_ack_before_commit_app()


def test_rendering_omits_absent_fields_only_at_the_top_level() -> None:
    body = InvocationFinished(
        id="inv_1",
        dataset_id="ds_1",
        status="cancelled",
        cell=None,
        charge={"epsilon": "0", "delta": None},
        refund={"epsilon": "0.2", "delta": "0"},
        remaining={"epsilon": "1", "delta": "0.00001"},
        levels=None,
        ledger_seq=3,
        updated_at="2024-01-01T00:00:00.000000Z",
    )
    assert render(body) == (
        '{"id":"inv_1","dataset_id":"ds_1","status":"cancelled",'
        '"charge":{"epsilon":"0","delta":null},"refund":{"epsilon":"0.2","delta":"0"},'
        '"remaining":{"epsilon":"1","delta":"0.00001"},"ledger_seq":3,'
        '"updated_at":"2024-01-01T00:00:00.000000Z"}'
    )


def test_rendering_writes_what_the_standard_encoder_writes() -> None:
    """Bodies are encoded by orjson (the standard library's encoder cost ≈ 20× more on an
    ``rdp`` entry's curves); what a client receives and an idempotent replay sends back is the
    same compact UTF-8 text as ``json.dumps(..., separators=(",", ":"), ensure_ascii=False)``
    gave, non-ASCII text and escapes included."""
    body = BudgetExceededBody(
        error="BudgetExceeded",
        detail='quota level: budget exceeded for "Zoë" \\ ε\n\t\x01',
        id="inv_1",
        level="quota",
        requested={"orders": ["2.0", "1e-05"], "rdp": ["0.25", "inf"], "delta": "0"},
        remaining={"epsilon": "0.5", "delta": None},
        ledger_seq=2**40,
    )
    fields = {k: v for k, v in body.model_dump().items() if v is not None}
    expected = json.dumps(fields, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    assert render(body) == expected
    assert "Zoë" in render(body) and "\\u0001" in render(body)


def test_json_columns_are_written_as_the_standard_encoder_reads_them() -> None:
    """A JSON column's text (orjson) reads back to the value written; keys that are not
    strings are written as text, as ``json.dumps`` wrote them."""
    value = {"a": ["x", 1, None, True], 7: {"ε": "1e-05"}, "n": 2**62}
    text = driver.dump(value)
    assert text is not None and json.loads(text) == json.loads(json.dumps(value))
    assert driver.dump(None) is None
