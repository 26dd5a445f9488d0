"""The rows of the write path: the levels of an invocation as the lock statement read them
(:mod:`app.writepath.admission`), moved by the transaction's decisions, and written back with its
other rows (:mod:`app.db.writes`). Plain dataclasses, not ORM objects: the write path has no
identity map to keep (``benchmarks/RESULTS.md``, *The write path's levers*).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from odometer_core.accounting.json_types import LevelOwners as LevelOwners
from odometer_core.accounting.json_types import StateJSON


@dataclass(slots=True)
class DatasetRow:
    """The budget aggregate as locked; ``state_json``, ``last_seq``, ``head_hash`` and
    ``merkle_json`` move with each decision of the transaction."""

    id: str
    relation: str
    config_json: dict[str, Any]
    state_json: StateJSON  # read, never changed in place: replaced by a decision's
    last_seq: int
    head_hash: str
    #: a partitioned dataset's partition (null otherwise): its blocks are ``block_runs``
    partition_json: dict[str, Any] | None = None
    #: the frontier of the ledger's Merkle tree (null before the first entry)
    merkle_json: dict[str, Any] | None = None
    updated_at: str | None = None  # set when the transaction wrote the aggregate


class CapJson(TypedDict):
    """The cap in force as stored (``organisations.cap_json``): its target as decimal text and
    its mode (absent on rows written before caps had modes: ``basic``)."""

    epsilon: str
    delta: str
    mode: NotRequired[str]


@dataclass(slots=True)
class OrgRow:
    """The organisation level (its cap's filter; :class:`app.db.models.Organisation`)."""

    id: str
    cap_json: CapJson | None
    cap_state_json: dict[str, Any]
    cap_config_json: dict[str, Any] | None = None
    cap_seq: int = 0
    cap_config_seq: int | None = None
    #: how many invocations each dataset registered under the cap (by dataset id)
    cap_usage_json: dict[str, int] | None = None
    cap_closed_json: list[dict[str, Any]] | None = None
    dirty: bool = False


@dataclass(slots=True)
class GrantRow:
    """An analyst's grant on the dataset (its quota's filter, if any); ``granted_seq`` tells it
    apart from the analyst's earlier and later grants (:class:`app.db.models.Grant`)."""

    id: int
    principal_id: str
    quota_config_json: dict[str, Any] | None
    quota_state_json: dict[str, Any] | None
    granted_seq: int
    dirty: bool = False


@dataclass(slots=True)
class InvocationRow:
    """What settle and cancel need of an invocation (and change)."""

    id: str
    status: str
    actor: str
    reservation: dict[str, Any] | None
    levels: LevelOwners | None
    #: the declaration as registered (a settle from the released output derives its cell)
    declaration: dict[str, Any] | None = None
    #: the request's options as registered (a partitioned dataset's: its selection)
    request: dict[str, Any] | None = None
    charge: dict[str, Any] | None = None
    refund: dict[str, Any] | None = None
    cell: str | None = None
    updated_at: str | None = None
