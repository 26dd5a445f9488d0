"""TEST ONLY: deliberately broken builds for the reliability tests.

A reliability test that never fails proves nothing, so each one was run once against a build
broken in the way it is meant to catch. The build is chosen with the environment variable
``ODOMETER_TEST_BROKEN_BUILD`` (read here, in the test helpers, and nowhere in ``app/``): the
tests ask :func:`server_factory` for the uvicorn factory to start, and get one of these
instead of ``app.main:create_app`` when the variable names it::

    ODOMETER_TEST_BROKEN_BUILD=forget_refunds pytest tests/concurrency/test_mixed_lifecycle.py

Each factory patches the service in the worker process that calls it, then builds the app.
It patches only the seams the write path's modules name as such (module-level names their
steps call through the module: :mod:`app.services.reservations`,
:mod:`app.services.idempotency`), through :func:`_break`, which fails loudly when the seam is gone
or is no longer what the build expects to replace: a renamed seam must break the build's
start, never silently leave a "broken" build working.

``forget_refunds``  settling or cancelling an ODP reservation returns nothing: the worst-case
                    ε stays reserved (a filter that forgets refunds).
``no_idempotency``  the stored-response lookup is skipped: a resent key runs again.
``no_fingerprint``  a reused key with a different body is answered with the stored response
                    (the request fingerprint is not compared).
``ack_before_commit`` the response is built and sent while the transaction commits 0.2 s
                    later on a background thread (a write-behind "optimisation").
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from types import ModuleType
from typing import Any, cast

from fastapi import FastAPI

import app.services.idempotency as idempotency
import app.services.reservations as reservations
import app.writepath.stored as kept
from app.db.uow import UnitOfWork
from app.main import create_app
from odometer_core.accounting import filters

GOOD = "app.main:create_app"
ENV = "ODOMETER_TEST_BROKEN_BUILD"
BUILDS = ("forget_refunds", "no_idempotency", "no_fingerprint", "ack_before_commit")


def server_factory() -> str:
    """The uvicorn factory a reliability test starts: the real app unless ``$ENV`` names a
    broken build (only ever set by hand, to show the test fails)."""
    name = os.environ.get(ENV, "")
    if not name:
        return GOOD
    if name not in BUILDS:
        raise ValueError(f"{ENV}={name!r}: expected one of {BUILDS}")
    return f"tests.concurrency.broken_builds:create_{name}_app"


class MissingSeam(RuntimeError):
    """A broken build's seam no longer exists in the service (renamed or removed)."""


_ANY = object()


def _break(
    module: ModuleType, name: str, replacement: Callable[..., Any], *, expected: object = _ANY
) -> Callable[..., Any]:
    """Replace the seam ``module.name`` with ``replacement`` and return the real one. The seam
    must exist and, when ``expected`` is given, still be that function."""
    real = getattr(module, name, None)
    if not callable(real) or (expected is not _ANY and real is not expected):
        raise MissingSeam(
            f"{module.__name__}.{name} is {real!r}, expected {expected!r}: the seam this broken "
            "build patches was renamed or changed; update tests/concurrency/broken_builds.py"
        )
    setattr(module, name, replacement)
    return cast(Callable[..., Any], real)


# ---------------------------------------------------------------------------- forget_refunds
def _keep_reservation(decision: filters.Decision, state: filters.FilterState) -> Any:
    """The decision with the ledger's reserved ε left as before (nothing refunded)."""
    old = state
    if isinstance(decision.state, filters.SplitState):
        assert isinstance(old, filters.SplitState) and decision.sub_budget is not None
        leaf = old.get(decision.sub_budget)
        new_leaf = decision.state.get(decision.sub_budget)
        assert isinstance(leaf, filters.BasicState) and isinstance(new_leaf, filters.BasicState)
        fixed = replace(new_leaf, reserved_epsilon=leaf.reserved_epsilon)
        return replace(decision, state=decision.state.put(decision.sub_budget, fixed))
    assert isinstance(old, filters.BasicState) and isinstance(decision.state, filters.BasicState)
    return replace(decision, state=replace(decision.state, reserved_epsilon=old.reserved_epsilon))


def create_forget_refunds_app() -> FastAPI:
    real_settle, real_cancel = filters.settle, filters.cancel

    def settle(config: Any, state: Any, reservation: Any, cell: str) -> Any:
        return _keep_reservation(real_settle(config, state, reservation, cell), state)

    def cancel(config: Any, state: Any, reservation: Any) -> Any:
        return _keep_reservation(real_cancel(config, state, reservation), state)

    # the service's own references (``from odometer_core.accounting import settle as ...``): the
    # dataset
    # level's settle / cancel
    _break(reservations, "accounting_settle", settle, expected=real_settle)
    _break(reservations, "accounting_cancel", cancel, expected=real_cancel)
    return create_app()


# ---------------------------------------------------------------------------- idempotency
def create_no_idempotency_app() -> FastAPI:
    def never_stored(*args: Any, **kwargs: Any) -> None:
        return None

    _break(idempotency, "stored_response", never_stored)
    return create_app()


def create_no_fingerprint_app() -> FastAPI:
    def stored(uow: UnitOfWork, owner: str, key: str | None, digest: str) -> Any:
        if key is None:
            return None
        record = kept.stored(uow).get(owner, key)
        return None if record is None else real_stored(uow, owner, key, record.fingerprint)

    real_stored = _break(idempotency, "stored_response", stored)
    return create_app()


# ---------------------------------------------------------------------------- ack_before_commit
def create_ack_before_commit_app() -> FastAPI:
    def commit_later(uow: UnitOfWork) -> None:
        conn = uow._core
        assert conn is not None, "the write path runs in a Core unit of work"
        uow._core = uow._database.engine.connect()  # an unused connection for the block's close()

        def finish() -> None:
            time.sleep(0.2)
            try:
                conn.commit()
            finally:
                conn.close()

        threading.Thread(target=finish, daemon=True).start()

    _break(idempotency, "commit", commit_later)
    return create_app()
