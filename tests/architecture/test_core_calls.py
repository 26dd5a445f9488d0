"""One registration passes from the accounting core back into the app at most three times.

A registration's path is traced through the ASGI app with a profiler (``sys.setprofile`` in
this thread and ``threading.setprofile`` for every thread started after it: the test client's
event loop, the group commit lines, the threads the route hands work to), installed before the
app is made. A *passage back into the app* is a frame of ``odometer_core`` returning into a
frame of ``app``, or a frame of ``odometer_core`` calling one of ``app`` (a callback); a call
from ``app`` into the core, and whatever the core does inside itself, are not counted.

The app calls the core once before the lock (the request prepared: the declaration parsed, its
fingerprint, its selection resolved, :func:`odometer_core.ledger.admission.prepare`) and once
under it (the decision, the ledger entry, the new states and the response's fields:
:func:`odometer_core.ledger.admission.admit`). The third passage is taken by a declaration whose
charge may be expensive (DP-SGD, a subsampled or a composed mechanism:
:attr:`~odometer_core.ledger.admission.Prepared.expensive`): its charges computed before the
lock (:func:`odometer_core.ledger.admission.charges`), here in the request's thread (the tests
run no charge worker processes). The request schema's amounts are read by the core's reader,
which the validator calls itself (:func:`odometer_core.accounting.exact.read_amount`): no
passage. Traced: a whole dataset, and a partitioned one (by day, a year open) with a seven-day
selection, each after one registration that taught the process the dataset (the caches of the
write path filled, as in a running service); then each other kind of declaration the same two
ways (:data:`KINDS`).

Shown able to fail: on the tree before the one-call decision (the app calling the core for each
step: the declaration parsed by the request model, the fingerprint's ``to_json``, the upper
levels' filters loaded by ``config_from_json`` and ``state_from_json``, ``decide_levels``,
``state_to_json`` and ``to_json`` for every amount, ``next_entry``, …) the whole dataset passed
back into the app 31 times and the partitioned one 40 (the failure lists each passage). The
other kinds, on the tree where the schema's validator called the core once per amount: a DP-SGD
job and a subsampled Gaussian 5 times (two amounts, the charges), a composition of three and an
approx_dp 4, whole or on a selection.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.db.uow import Database
from app.main import create_app
from app.settings import Settings
from tests.support import AUTH

#: the most passages from the core back into the app one registration may take
LIMIT = 3
DAILY = {"kind": "day", "unit": "record", "timezone": "UTC"}
WEEK = {"from": "2026-06-01", "to": "2026-06-07"}
CHARGE = {"type": "pure_dp", "epsilon": "0.001"}
#: Declarations of the other shapes: charges computed before the lock (a training job, a
#: subsampled and a composed mechanism) and a closed form of two amounts.
KINDS: dict[str, dict[str, Any]] = {
    "dp_sgd": {"type": "dp_sgd", "noise_multiplier": "1.1", "sample_rate": "0.01", "steps": 100},
    "subsampled": {
        "type": "subsampled",
        "scheme": "poisson",
        "rate": "0.01",
        "mechanism": {"type": "gaussian", "sigma": "1.1"},
    },
    "composed": {"type": "composed", "mechanism": CHARGE, "count": 3},
    "approx_dp": {"type": "approx_dp", "epsilon": "0.001", "delta": "1e-9"},
}


def _package(frame: FrameType | None) -> str | None:
    if frame is None:
        return None
    name = frame.f_globals.get("__name__", "")
    if not isinstance(name, str):
        return None
    if name == "odometer_core" or name.startswith("odometer_core."):
        return "core"
    if name == "app" or name.startswith("app."):
        return "app"
    return None


def _where(frame: FrameType) -> str:
    return f"{frame.f_globals.get('__name__')}.{frame.f_code.co_qualname}"


class Passages:
    """The core's passages back into the app, recorded by a profile function while on."""

    def __init__(self) -> None:
        self.on = False
        self.seen: list[str] = []
        self._lock = threading.Lock()

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if not self.on or event not in ("call", "return"):
            return
        caller = frame.f_back
        if event == "return" and _package(frame) == "core" and _package(caller) == "app":
            assert caller is not None
            seen = f"return {_where(frame)} -> {_where(caller)}"
        elif event == "call" and _package(frame) == "app" and _package(caller) == "core":
            assert caller is not None
            seen = f"callback {_where(caller)} -> {_where(frame)}"
        else:
            return
        with self._lock:
            self.seen.append(seen)


@pytest.fixture
def traced(settings: Settings, database: Database) -> Iterator[tuple[TestClient, Passages]]:
    """The app, every thread it starts profiled by a :class:`Passages` (off until a test turns
    it on)."""
    passages = Passages()
    previous = sys.getprofile()
    threading.setprofile(passages.profile)
    sys.setprofile(passages.profile)
    try:
        with TestClient(create_app(settings, database)) as client:
            yield client, passages
    finally:
        sys.setprofile(previous)
        threading.setprofile(None)


def _dataset(client: TestClient, name: str, **extra: Any) -> str:
    body = {"name": name, "budget": {"epsilon": "10", "delta": "0.000001"}, **extra}
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _register(client: TestClient, dataset_id: str, body: dict[str, Any], key: str) -> None:
    r = client.post(
        f"/v1/datasets/{dataset_id}/invocations",
        json=body,
        headers={**AUTH, "Idempotency-Key": key},
    )
    assert r.status_code == 201, r.text


def _traced(
    client: TestClient, passages: Passages, dataset_id: str, body: dict[str, Any], key: str
) -> list[str]:
    _register(client, dataset_id, body, f"{key}-first")  # the process learns the dataset
    passages.seen.clear()
    passages.on = True
    try:
        _register(client, dataset_id, body, key)
    finally:
        passages.on = False
    return list(passages.seen)


def _registration(
    traced: tuple[TestClient, Passages], mechanism: dict[str, Any], *, week: bool, name: str
) -> list[str]:
    """The passages of registering ``mechanism`` on a whole dataset or (``week``) with a
    seven-day selection on a dataset partitioned by day (``basic``, its blocks of 2026 open)."""
    client, passages = traced
    if not week:
        ds = _dataset(client, f"traced whole {name}")
        return _traced(client, passages, ds, {"mechanism": mechanism}, f"whole-{name}")
    ds = _dataset(client, f"traced week {name}", accounting={"mode": "basic"}, partition=DAILY)
    opened = {"open": {"from": "2026-01-01", "to": "2026-12-31"}}
    r = client.post(f"/v1/datasets/{ds}/blocks", json=opened, headers=AUTH)
    assert r.status_code == 200, r.text
    body = {"mechanism": mechanism, "blocks": WEEK}
    return _traced(client, passages, ds, body, f"week-{name}")


def _report(seen: list[str]) -> str:
    counted = Counter(seen)
    return f"{len(seen)} passages back into the app:\n" + "\n".join(
        f"  {n} x {what}" for what, n in counted.most_common()
    )


def test_a_whole_dataset_registration_passes_back_into_the_app_at_most_three_times(
    traced: tuple[TestClient, Passages],
) -> None:
    seen = _registration(traced, CHARGE, week=False, name="pure_dp")
    assert len(seen) <= LIMIT, _report(seen)


def test_a_seven_day_selection_passes_back_into_the_app_at_most_three_times(
    traced: tuple[TestClient, Passages],
) -> None:
    seen = _registration(traced, CHARGE, week=True, name="pure_dp")
    assert len(seen) <= LIMIT, _report(seen)


@pytest.mark.parametrize("week", [False, True], ids=["whole", "week"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_passes_back_into_the_app_at_most_three_times(
    traced: tuple[TestClient, Passages], kind: str, week: bool
) -> None:
    seen = _registration(traced, KINDS[kind], week=week, name=kind)
    assert len(seen) <= LIMIT, _report(seen)
