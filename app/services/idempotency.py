"""Recorded responses: the Idempotency-Key rule of the write path, and its commit.

A write (register, settle, cancel) renders its response inside its transaction and stores the
bytes under the caller's key in that same transaction (:func:`record_response`), so a retry
with the same key and request is answered the same bytes (:func:`stored_response`) and a retry
with another request is 422 (Stripe's semantics). The unique constraints behind the store and
the ledger are the backstop: a concurrent writer that won shows here as a 409
(:func:`commit`, :func:`write_rows`).

Seams: the reliability tests' deliberately broken builds replace :func:`stored_response` and
:func:`commit` of this module, so the use cases call them through the module.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError

from app.db.rows import DatasetRow, GrantRow, OrgRow
from app.db.uow import UnitOfWork
from app.db.writes import Writes, write
from app.services._common import utc_now
from app.services.errors import ConcurrentUpdate, IdempotencyConflict, IdempotencyKeyReused
from app.writepath import write_path
from app.writepath.admission import StoredResponse
from app.writepath.stored import stored

#: Outcome codes of recorded responses that are not errors (the API maps them to 201 / 200).
CREATED = "created"
OK = "ok"
#: The outcome code of a refused registration (an error code: 409).
BUDGET_EXCEEDED = "BudgetExceeded"


@dataclass(frozen=True, slots=True)
class RecordedResponse:
    """A response rendered inside the transaction and stored verbatim under an idempotency key.

    ``outcome`` is :data:`CREATED`, :data:`OK` or an error code (``BudgetExceeded``);
    ``decision`` is the accounting outcome of a fresh request (``None`` for a replay).
    """

    outcome: str
    body: str
    decision: str | None
    replayed: bool = False


def stored_response(
    uow: UnitOfWork, owner: str, key: str | None, digest: str
) -> RecordedResponse | None:
    """The stored response for ``owner``'s ``key`` (same request), or None; a different
    request → 422."""
    if key is None:
        return None
    record = stored(uow).get(owner, key)
    if record is None:
        return None
    if not hmac.compare_digest(record.fingerprint, digest):
        raise IdempotencyKeyReused("this Idempotency-Key was already used with a different request")
    witness = write_path(uow.database).witness
    if witness is not None:  # a recorded answer obeys the witness's bound too
        witness.acknowledge(time.monotonic())
    return RecordedResponse(record.outcome, record.response_body, None, replayed=True)


def record_response(
    uow: UnitOfWork,
    writes: Writes,
    owner: str,
    key: str | None,
    digest: str,
    dataset_id: str,
    response: RecordedResponse,
) -> None:
    """Store the answered bytes under ``key`` (in the transaction that did the work)."""
    if key is None:
        return
    writes.idempotency.append(
        {
            "principal_id": owner,
            "key": key,
            "fingerprint": digest,
            "dataset_id": dataset_id,
            "outcome": response.outcome,
            "response_body": response.body,
            "created_at": utc_now(),
        }
    )
    stored(uow).remember(owner, key, StoredResponse(digest, response.outcome, response.body))


def _conflict(exc: IntegrityError) -> ConcurrentUpdate | IdempotencyConflict:
    """A unique-constraint backstop fired: a concurrent writer won (→ 409)."""
    if "idempotency_keys" in str(exc.orig):
        return IdempotencyConflict(
            "a request with this Idempotency-Key is being processed; retry to get its response"
        )
    return ConcurrentUpdate("the dataset changed concurrently; retry the request")


def write_rows(
    uow: UnitOfWork,
    writes: Writes,
    datasets: Sequence[DatasetRow],
    org: OrgRow | None,
    grants: Sequence[GrantRow | None],
) -> None:
    """Write the transaction's rows and the new states of its datasets, organisation and grants
    (PostgreSQL raises a unique violation here, at the statement, not at commit)."""
    try:
        write(uow.connection(), writes, datasets, org, [g for g in grants if g])
    except IntegrityError as exc:
        raise _conflict(exc) from None


def commit(uow: UnitOfWork) -> None:
    """Commit; a unique-constraint backstop firing means a concurrent writer won (→ 409)."""
    try:
        uow.commit()
    except IntegrityError as exc:
        raise _conflict(exc) from None
