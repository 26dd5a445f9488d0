"""A transaction's stored responses: what the write path read of a caller's idempotency keys
and what it is about to store under them.

The keys of a group are read in one statement (:func:`app.writepath.admission.stored_responses`,
sent right behind the lock statement by :mod:`app.writepath.locking`), and a response staged
under a key is remembered, so that a key repeated inside one group replays the first. What is
kept belongs to one transaction of one unit of work (:attr:`app.db.uow.UnitOfWork.scratch`):
it is forgotten when the transaction rolls back or ends, and read again under the next lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sqlalchemy import Connection

from app.db.uow import UnitOfWork
from app.writepath.admission import StoredResponse, stored_responses


class StoredResponses:
    """Stored responses by ``(principal, key)`` within one transaction: what it read
    (:meth:`prefetch`: a group's keys in one query) and what it is about to store
    (:meth:`remember`)."""

    def __init__(self, connection: Callable[[], Connection]) -> None:
        #: the transaction's connection (begun when asked for)
        self.connection = connection
        self._known: dict[tuple[str, str], StoredResponse | None] = {}

    def prefetch(self, principal_id: str, keys: Iterable[str]) -> None:
        wanted = [k for k in keys if (principal_id, k) not in self._known]
        if not wanted:
            return
        found = stored_responses(self.connection(), principal_id, wanted)
        for key in wanted:
            self._known[principal_id, key] = found.get(key)

    def get(self, principal_id: str, key: str) -> StoredResponse | None:
        self.prefetch(principal_id, (key,))
        return self._known[principal_id, key]

    def remember(self, principal_id: str, key: str, record: StoredResponse) -> None:
        self._known[principal_id, key] = record


def stored(uow: UnitOfWork) -> StoredResponses:
    """The stored responses of ``uow``'s open transaction (made on first use, forgotten by the
    unit of work when the transaction rolls back or ends)."""
    found = uow.scratch.get(StoredResponses)
    if found is None:
        found = uow.scratch[StoredResponses] = StoredResponses(uow.connection)
    assert isinstance(found, StoredResponses)
    return found
