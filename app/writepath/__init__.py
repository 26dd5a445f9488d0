"""The write path of register, settle and cancel, in one package with one owner.

:class:`WritePath` owns what the write path keeps beyond one transaction, per process: the
turns per dataset (:mod:`app.writepath.queue`), the group commit lines
(:mod:`app.writepath.groups`, whose one leader-and-batch core the witness writes through too),
which organisations had a cap and the datasets' partitions (:mod:`app.writepath.caches`) and
the witness guard (:mod:`app.writepath.witness`). Below it: the lock statements and the stored
responses' statement (:mod:`app.writepath.admission`), the lock policy
(:mod:`app.writepath.locking`) and a transaction's stored responses
(:mod:`app.writepath.stored`). The use cases (:mod:`app.services.registration`,
:mod:`app.services.batching`, :mod:`app.services.reservations`) stand on it; it stands on the
persistence of :mod:`app.db` (the unit of work, the driver, the write statement), which knows
nothing of it.

``create_app`` builds the app's write path and binds it to its database (:func:`bind`); code
that holds only a unit of work finds it with :func:`write_path` (a database used without an app,
as the command line and tests do, gets one of its own: no queue, no witness).
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any
from weakref import finalize

from app.db.uow import Database
from app.writepath.caches import KnownPartitions, OrganisationModes
from app.writepath.groups import GroupCommit
from app.writepath.queue import FairQueue
from app.writepath.witness import WitnessGuard


@dataclass(frozen=True, slots=True, eq=False)
class WritePath:
    """The write path's long-lived state in one process (it holds no budget, no ledger entry
    and no caller's data)."""

    #: first-come-first-served turns per dataset in this process (``None``: the database's
    #: lock alone decides the order; ``create_app`` makes one on PostgreSQL)
    queue: FairQueue | None = None
    #: where the heads committed through the database are witnessed (``None``: nowhere)
    witness: WitnessGuard | None = None
    #: the register use case's group commit lines (one per caller)
    groups: GroupCommit[Any, Any] = field(default_factory=GroupCommit)
    #: which datasets' organisations had a cap when last seen (the organisation lock to ask for)
    org_modes: OrganisationModes = field(default_factory=OrganisationModes)
    #: the partitions of the datasets seen (never change: :class:`KnownPartitions`)
    partitions: KnownPartitions = field(default_factory=KnownPartitions)

    def turn(self, dataset_id: str) -> AbstractContextManager[None]:
        """This request's turn on ``dataset_id`` among this process's writers (first come,
        first served; :mod:`app.writepath.queue`), to be taken before the write transaction
        opens."""
        queue = self.queue
        return nullcontext() if queue is None else queue.turn(dataset_id)


#: the write path of each database in use, by the database's identity; an entry leaves with its
#: database (a finalizer: ``id`` is not reused before it runs). Not a ``WeakKeyDictionary``: its
#: lookup makes a weak reference each time, and this one is on every registration's path.
_BOUND: dict[int, WritePath] = {}
_BINDING = threading.Lock()


def _keep(database: Database, path: WritePath) -> None:
    """``path`` as ``database``'s (``_BINDING`` held)."""
    key = id(database)
    if key not in _BOUND:
        finalize(database, _BOUND.pop, key, None)
    _BOUND[key] = path


def bind(database: Database, path: WritePath) -> WritePath:
    """Make ``path`` the write path of ``database`` (the app factory's). ``database`` must hand
    its committed heads to the path's witness (made with ``after_commit=witness.record``)."""
    witness = path.witness
    if witness is not None and database.after_commit != witness.record:
        raise ValueError("the database does not hand its committed heads to this witness")
    with _BINDING:
        _keep(database, path)
    return path


def write_path(database: Database) -> WritePath:
    """The write path bound to ``database`` (:func:`bind`), or one of its own, made on first use:
    no queue, no witness."""
    found = _BOUND.get(id(database))
    if found is not None:
        return found
    with _BINDING:
        found = _BOUND.get(id(database))
        if found is None:
            found = WritePath()
            _keep(database, found)
        return found


__all__ = ["WritePath", "bind", "write_path"]
