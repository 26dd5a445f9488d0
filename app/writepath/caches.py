"""What the write path remembers between transactions, per process: which datasets'
organisations had a cap when last seen (the organisation lock to ask for) and the datasets'
partitions. Neither holds a budget: a guess is verified under the lock, and a partition never
changes once its dataset exists. Both are a :class:`app.writepath.WritePath`'s."""

from __future__ import annotations

import threading
from typing import Any

from app.writepath.admission import OrgLock


class KnownPartitions:
    """The partitions of the datasets this process has locked (``None``: a whole dataset). A
    dataset's partition never changes once it is created, so what is known here is never
    stale: a registration on a known partitioned dataset asks for the runs its selections touch
    with the lock statement (:func:`app.writepath.locking.lock_levels`)."""

    def __init__(self) -> None:
        self._known: dict[str, dict[str, Any] | None] = {}
        self._lock = threading.Lock()

    def get(self, dataset_id: str) -> tuple[bool, dict[str, Any] | None]:
        """Whether ``dataset_id`` was seen, and its partition."""
        if dataset_id not in self._known:
            return False, None
        return True, self._known.get(dataset_id)

    def learn(self, dataset_id: str, partition: dict[str, Any] | None) -> None:
        if dataset_id in self._known:
            return
        with self._lock:
            if len(self._known) > 100_000:
                self._known.clear()
            self._known[dataset_id] = partition


class OrganisationModes:
    """This process's last knowledge of which datasets' organisations have a cap in force:
    the guess of the organisation lock an admission asks for (verified under the lock)."""

    def __init__(self) -> None:
        self._capped: dict[str, bool] = {}
        self._lock = threading.Lock()

    def guess(self, dataset_id: str) -> OrgLock:
        return "update" if self._capped.get(dataset_id, False) else "share"

    def learn(self, dataset_id: str, capped: bool) -> None:
        if self._capped.get(dataset_id) is capped:
            return  # what is known already (the common case: no lock taken)
        with self._lock:
            if len(self._capped) > 100_000:
                self._capped.clear()
            self._capped[dataset_id] = capped
