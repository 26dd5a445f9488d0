"""A registration decided by the core in one call (pure: no database, no web).

The service asks the core twice per registration, and renders what it answers:

1. :func:`prepare`, before any lock: the declaration parsed (or taken as parsed), the
   request's options as the ledger and the response echo them, the request's fingerprint (what
   an Idempotency-Key is held to), whether its charge may be expensive, and, on a dataset the
   service knows to be partitioned, its selection resolved once and the spans of runs it
   touches (read with the lock);
2. :func:`admit`, under the lock, on what the lock statement read (the dataset's row, the
   organisation's, the analyst's grant, the runs of the selection): the decision at every level
   (:func:`odometer_core.accounting.levels.decide_levels`), and everything it writes, already
   serialised: the ledger entry (hashed, chained to the head), the dataset's new state, head
   and Merkle frontier, the cap's and the quota's new states, the invocation row, a signed
   checkpoint when one is due, and the response's fields (:class:`Admission`).

A group of registrations on one dataset (one transaction) is decided one after another: each
:func:`admit` is given the rows as the previous one left them (the service sets what it
returned on them) and, on a partitioned dataset, the runs the previous one held
(:attr:`Admission.held`); :func:`plan` resolves a group's selections together when the spans to
read are needed for several requests, or for a partition learned under the lock.

What the service keeps: the Idempotency-Key's stored responses (read with the lock and checked
before :func:`admit`), the witness's guard of the head, the rows' writes, the response's
rendering, and how the core's refusals of a selection (:class:`BadSelection`,
:class:`~odometer_core.ledger.blocks.NotOpen`, :class:`~odometer_core.ledger.blocks.RunLimit`)
are answered.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from functools import lru_cache
from typing import Any, Protocol

from odometer_core.accounting import fmt, instead, memo
from odometer_core.accounting.blocks import BlockError, Range, Selected
from odometer_core.accounting.declarations import Declaration, parse_declaration
from odometer_core.accounting.effort import may_be_expensive
from odometer_core.accounting.filters import (
    config_from_json,
    initial_state,
    state_from_json,
    state_to_json,
)
from odometer_core.accounting.json_types import (
    CapOrder,
    CheckpointRecord,
    ExportedEntry,
    InvocationRecord,
    LevelOwners,
    LevelPart,
    RefusalSummary,
    StateJSON,
)
from odometer_core.accounting.levels import (
    DATASET,
    ORGANISATION,
    QUOTA,
    Filter,
    LevelsDecision,
    cap_order,
    cap_used_by,
    decide_levels,
    level_record,
    precompute_levels,
    stored_cap,
    stored_quota,
)
from odometer_core.accounting.summary import COSTLY, SearchStopped, refusal
from odometer_core.ledger.blocks import Held
from odometer_core.ledger.blocks import refusal as blocks_refusal
from odometer_core.ledger.chain import canonical_bytes
from odometer_core.ledger.checkpoints import Signer
from odometer_core.ledger.entry import EntryKind, next_exported
from odometer_core.ledger.merkle import Frontier
from odometer_core.ledger.witness import Head
from odometer_core.partition import Partition, check_assertions, window_of

#: A selection as resolved: index ranges, or ``None`` for every open block.
Resolved = tuple[Range, ...] | None
#: The spans of blocks whose runs a transaction reads (:func:`~odometer_core.partition.window_of`).
Spans = tuple[Range, ...]
#: A run as read: ``(lo, hi, state_json)``.
RunRow = tuple[int, int, Mapping[str, Any]]
#: The operation a registration's fingerprint names (an Idempotency-Key is held to it).
OPERATION = "register_invocation"


class BadSelection(BlockError):
    """A request's ``blocks`` the dataset cannot take: malformed, naming keys its partition does
    not have, sent to a whole dataset, or missing on a partitioned one (HTTP 422)."""


# ---------------------------------------------------------------------------- before the lock
@dataclass(frozen=True, slots=True)
class Prepared:
    """One registration's request, prepared before any lock (:func:`prepare`)."""

    dataset_id: str
    declaration: Declaration
    #: the declaration as the ledger, the row and the response record it
    declaration_json: dict[str, Any]
    sub_budget: str | None
    conversion_delta: Decimal | None
    #: the selection as sent (keys, ranges, or ``"all"``; ``None``: none sent)
    blocks: Any
    contribution: str | None
    neighbours: str | None
    #: the request's options as the response and the ledger echo them
    extras: dict[str, Any]
    #: the request's fingerprint (SHA-256 over canonical JSON of what gives it its meaning);
    #: ``""`` for a request without an Idempotency-Key (``prepare(keyed=False)``)
    digest: str
    #: whether its charge may take long (computed before the lock, by a charge worker)
    expensive: bool
    #: the partition its selection was resolved on (``None``: not resolved)
    partition: Partition | None = None
    resolved: Resolved | BadSelection = None
    #: the spans of runs the selection touches (on :attr:`partition`)
    window: Spans = ()


def fingerprint(operation: str, **request: Any) -> str:
    """A digest of a request's meaning, for idempotency-key reuse detection."""
    return hashlib.sha256(canonical_bytes({"op": operation, **request})).hexdigest()


def prepare(
    dataset_id: str,
    declaration: Declaration | Mapping[str, Any],
    *,
    sub_budget: str | None = None,
    conversion_delta: Decimal | None = None,
    blocks: Any = None,
    contribution: str | None = None,
    neighbours: str | None = None,
    partition: Partition | None = None,
    keyed: bool = True,
) -> Prepared:
    """``declaration`` (parsed, or its JSON as validated by the request's schema:
    :class:`~odometer_core.accounting.declarations.DeclarationError` if the core refuses it)
    prepared for ``dataset_id``; on a dataset known to be partitioned by ``partition``, its
    selection resolved (a malformed one kept as its :class:`BadSelection`, raised when it is
    decided, after the Idempotency-Key's rule). ``keyed``: whether the request came with an
    Idempotency-Key; without one its :attr:`Prepared.digest` is ``""``, since nothing is ever
    compared with it (the canonical encoding and SHA-256 it costs are skipped)."""
    if not isinstance(declaration, Declaration):
        declaration = parse_declaration(dict(declaration))
    extras: dict[str, Any] = {
        "sub_budget": sub_budget,
        "conversion_delta": None if conversion_delta is None else fmt(conversion_delta),
    }
    if contribution is not None:
        extras["contribution"] = contribution
    if neighbours is not None:
        extras["neighbours"] = neighbours
    as_json = declaration.to_json()
    meaning = dict(extras)  # the selection only when sent: whole-dataset digests as before
    if blocks is not None:
        meaning["blocks"] = blocks
    prepared = Prepared(
        dataset_id,
        declaration,
        as_json,
        sub_budget,
        conversion_delta,
        blocks,
        contribution,
        neighbours,
        extras,
        fingerprint(OPERATION, dataset_id=dataset_id, declaration=as_json, **meaning)
        if keyed
        else "",
        _may_be_expensive(declaration),
    )
    return prepared if partition is None else _resolved_on(prepared, partition)


#: What a declaration's tree answers, asked once per distinct declaration (by value: a frozen
#: dataclass hashes and compares by its fields) rather than walked on every registration: the
#: tree is walked by generators over ``dataclasses.fields`` (:func:`may_be_expensive`; the kinds
#: :func:`~odometer_core.partition.check_assertions` looks for), about 1 % of a registration's
#: instructions for a declaration that is a leaf. Both are functions of the declaration's
#: kinds alone; a declaration that does not hash is walked as before.
_TREE_CACHE = 512


@lru_cache(maxsize=_TREE_CACHE)
def _may_be_expensive_of(declaration: Declaration) -> bool:
    return may_be_expensive(declaration)


def _may_be_expensive(declaration: Declaration) -> bool:
    try:
        return _may_be_expensive_of(declaration)
    except TypeError:  # a field that does not hash
        return may_be_expensive(declaration)


@lru_cache(maxsize=_TREE_CACHE)
def _assertions_hold(
    unit: str | None,
    relation: str,
    declaration: Declaration,
    contribution: str | None,
    neighbours: str | None,
) -> bool:
    """:func:`check_assertions` passed for these (a refusal raises, and is not remembered)."""
    check_assertions(unit, relation, declaration, contribution=contribution, neighbours=neighbours)
    return True


def _check_assertions(
    unit: str | None,
    relation: str,
    declaration: Declaration,
    contribution: str | None,
    neighbours: str | None,
) -> None:
    try:
        _assertions_hold(unit, relation, declaration, contribution, neighbours)
    except TypeError:  # a field that does not hash
        check_assertions(
            unit, relation, declaration, contribution=contribution, neighbours=neighbours
        )


def resolve_selection(partition: Partition | None, selection: object) -> Resolved:
    """The index ranges a request's ``blocks`` names on a dataset of ``partition`` (``None``:
    not partitioned): :class:`BadSelection` for a selection on a whole dataset, none on a
    partitioned one, or a malformed one."""
    if partition is None:
        if selection is not None:
            raise BadSelection("this dataset is not partitioned: send no 'blocks'")
        return ()
    if selection is None:
        raise BadSelection(
            "this dataset is partitioned: name the blocks the mechanism reads in 'blocks' "
            "({'from': key, 'to': key}, {'keys': [...]}, {'ranges': [...]} or 'all')"
        )
    try:
        return partition.resolve(selection)
    except BlockError as exc:
        raise BadSelection(str(exc)) from None


def _resolved_on(prepared: Prepared, partition: Partition) -> Prepared:
    if prepared.partition is partition:
        return prepared
    try:
        resolved = resolve_selection(partition, prepared.blocks)
    except BadSelection as exc:
        return replace(prepared, partition=partition, resolved=exc, window=())
    return replace(prepared, partition=partition, resolved=resolved, window=window_of([resolved]))


def plan(partition: Partition, items: Sequence[Prepared]) -> tuple[list[Prepared], Spans]:
    """``items`` (one transaction's, on a dataset of ``partition``) with their selections
    resolved on it (those already resolved on it kept), and the spans of runs they touch
    together."""
    resolved = [_resolved_on(item, partition) for item in items]
    chosen: list[Resolved] = []
    for item in resolved:
        if not isinstance(item.resolved, BadSelection):
            chosen.append(item.resolved)
    return resolved, window_of(chosen)


# ---------------------------------------------------------------------------- under the lock
class StoredDataset(Protocol):
    """A dataset's row as the lock statement read it."""

    @property
    def id(self) -> str: ...
    @property
    def relation(self) -> str: ...
    @property
    def config_json(self) -> Mapping[str, Any]: ...
    @property
    def state_json(self) -> Mapping[str, Any]: ...
    @property
    def last_seq(self) -> int: ...
    @property
    def head_hash(self) -> str: ...
    @property
    def partition_json(self) -> Mapping[str, Any] | None: ...
    @property
    def merkle_json(self) -> Mapping[str, Any] | None: ...


class StoredOrganisation(Protocol):
    """An organisation's row (its cap) as the lock statement read it."""

    @property
    def id(self) -> str: ...
    @property
    def cap_json(self) -> Mapping[str, Any] | None: ...
    @property
    def cap_state_json(self) -> Mapping[str, Any]: ...
    @property
    def cap_config_json(self) -> Mapping[str, Any] | None: ...
    @property
    def cap_seq(self) -> int: ...
    @property
    def cap_config_seq(self) -> int | None: ...
    @property
    def cap_usage_json(self) -> Mapping[str, int] | None: ...
    @property
    def cap_closed_json(self) -> Sequence[Mapping[str, Any]] | None: ...


class StoredGrant(Protocol):
    """The analyst's grant (its quota) as the lock statement read it."""

    @property
    def principal_id(self) -> str: ...
    @property
    def quota_config_json(self) -> Mapping[str, Any] | None: ...
    @property
    def quota_state_json(self) -> Mapping[str, Any] | None: ...
    @property
    def granted_seq(self) -> int: ...


@dataclass(frozen=True, slots=True)
class CapMoved:
    """What a registration changes on the organisation's row (its cap in force)."""

    cap_seq: int
    cap_config_seq: int
    #: the cap's new state (``None``: unchanged, refused)
    cap_state_json: dict[str, Any] | None
    #: the invocations registered under the cap, by dataset (``None``: unchanged)
    cap_usage_json: dict[str, int] | None


@dataclass(frozen=True, slots=True)
class Admission:
    """One registration decided and staged (:func:`admit`): all it writes, serialised."""

    admitted: bool
    #: the decision's outcome for the metrics (``accepted``, ``reserved``, ``rejected``)
    outcome: str
    #: the ledger entry as exported and written
    entry: ExportedEntry
    head: Head
    #: the dataset row's new state and Merkle frontier (``merkle_json``)
    state_json: StateJSON
    merkle_json: dict[str, Any]
    cap: CapMoved | None
    #: the grant's new quota state (``None``: unchanged)
    quota_state_json: dict[str, Any] | None
    #: the ``invocations`` row, by column name
    invocation: InvocationRecord
    #: a signed checkpoint of the new head, when the signer asks for one (by column name)
    checkpoint: CheckpointRecord | None
    #: the response's fields: :class:`app.schemas.invocations.InvocationCreated`'s when
    #: admitted, :class:`app.schemas.common.BudgetExceededBody`'s (but ``error``) when refused
    response: dict[str, Any]
    #: a partitioned dataset's runs as this decision left them (the next one decides on them),
    #: and what to write back of them (the starts of runs gone, the runs new or changed)
    held: Held | None = None
    changes: tuple[tuple[int, ...], tuple[tuple[int, int, StateJSON], ...]] | None = None


def _uppers(
    dataset: StoredDataset, org: StoredOrganisation | None, grant: StoredGrant | None
) -> tuple[Filter | None, Filter | None]:
    cap = None
    if org is not None and org.cap_json is not None:  # admitting: only a cap in force
        cap = stored_cap(org.cap_config_json, org.cap_json, org.cap_state_json, dataset.relation)
    quota = None if grant is None else stored_quota(grant.quota_config_json, grant.quota_state_json)
    return cap, quota


def charges(
    prepared: Prepared,
    dataset: StoredDataset,
    org: StoredOrganisation | None,
    grant: StoredGrant | None,
) -> dict[object, object]:
    """The memo table of deciding ``prepared`` at every level
    (:func:`~odometer_core.accounting.levels.precompute_levels`), on the rows as read before the
    lock: the charges do not depend on the states, so :func:`admit` finds them there. A
    partitioned dataset's filter is a block's before any charge. For a declaration whose charge
    may be expensive (:attr:`Prepared.expensive`), computed by a charge worker."""
    config = config_from_json(dataset.config_json)
    if dataset.partition_json is not None:
        own: Filter = (config, initial_state(config))
    else:
        own = (config, state_from_json(config, dataset.state_json))
    cap, quota = _uppers(dataset, org, grant)
    return precompute_levels(
        own, prepared.declaration, cap, quota, prepared.sub_budget, prepared.conversion_delta
    )


def admit(
    prepared: Prepared,
    dataset: StoredDataset,
    org: StoredOrganisation | None,
    grant: StoredGrant | None,
    *,
    partition: Partition | None,
    runs: Held | Sequence[RunRow] | None,
    charges: Mapping[object, object] | None,
    actor: str,
    at: str,
    invocation_id: str,
    accounting_version: str,
    signer: Signer | None,
    search_seconds: float,
) -> Admission:
    """``prepared`` decided at every level on the rows read under the lock, and what it writes.

    ``partition``: the dataset's (``None``: a whole dataset); ``runs``: on a partitioned
    dataset, the runs read with the lock (the first request of a transaction) or those the
    previous request left (:attr:`Admission.held`); ``charges``: the memo table computed
    before the lock (:mod:`odometer_core.accounting.memo`); ``search_seconds``: the thread's
    CPU a refusal of a costly kind may spend searching what would fit.

    A request the accounting refuses is an :class:`Admission` too (written to the ledger,
    answered 409). Raises, before anything is decided, what the request itself is refused for
    (422/409: its assertions, its selection, a declaration a level cannot account, a limit on
    runs); nothing of it is then staged."""
    _check_assertions(
        None if dataset.partition_json is None else dataset.partition_json.get("unit"),
        dataset.relation,
        prepared.declaration,
        prepared.contribution,
        prepared.neighbours,
    )
    cap, quota = _uppers(dataset, org, grant)
    level: Filter | Selected
    held: Held | None = None
    if partition is None:
        resolve_selection(None, prepared.blocks)
        level = _whole(dataset)
    else:
        prepared = _resolved_on(prepared, partition)
        if isinstance(prepared.resolved, BadSelection):
            raise prepared.resolved
        config = config_from_json(dataset.config_json)
        held = runs if isinstance(runs, Held) else Held(config, dataset.state_json, runs or ())
        level = held.select(prepared.resolved)
    with memo.charges(dict(charges) if charges is not None else None):
        levels = _decide(level, cap, quota, prepared, org)
    if held is not None:
        held.check(levels)  # the limits on runs (docs/operations.md, Limits)
    return _staged(
        prepared,
        dataset,
        org,
        grant,
        levels,
        level,
        (cap, quota),
        partition=partition,
        held=held,
        actor=actor,
        at=at,
        invocation_id=invocation_id,
        accounting_version=accounting_version,
        signer=signer,
        search_seconds=search_seconds,
    )


def _whole(dataset: StoredDataset) -> Filter:
    config = config_from_json(dataset.config_json)
    return config, state_from_json(config, dataset.state_json)


def _decide(
    level: Filter | Selected,
    cap: Filter | None,
    quota: Filter | None,
    prepared: Prepared,
    org: StoredOrganisation | None,
    *,
    declaration: Declaration | None = None,
    exhaustive: bool = True,
) -> LevelsDecision:
    return decide_levels(
        level,
        prepared.declaration if declaration is None else declaration,
        organisation=cap,
        quota=quota,
        sub_budget=prepared.sub_budget,
        conversion_delta=prepared.conversion_delta,
        exhaustive=exhaustive,
        organisation_id=None if cap is None or org is None else org.id,
    )


def _staged(
    prepared: Prepared,
    dataset: StoredDataset,
    org: StoredOrganisation | None,
    grant: StoredGrant | None,
    levels: LevelsDecision,
    level: Filter | Selected,
    uppers: tuple[Filter | None, Filter | None],
    *,
    partition: Partition | None,
    held: Held | None,
    actor: str,
    at: str,
    invocation_id: str,
    accounting_version: str,
    signer: Signer | None,
    search_seconds: float,
) -> Admission:
    cap, quota = uppers
    admitted = levels.admitted
    decision = levels.dataset.decision
    reason = _reason(levels, org, partition)
    status = decision.outcome if admitted else "rejected"
    request = dict(prepared.extras)
    blocks = refused_blocks = None
    state: StateJSON
    if held is not None and partition is not None and isinstance(level, Selected):
        staged = held.decided(levels, level, partition)
        request["blocks"] = staged.selection
        state = staged.state
        blocks, refused_blocks = staged.selected, staged.refused
    else:
        state = state_to_json(levels.dataset.state)
    records, moved, quota_state = _records(levels, org, grant, cap, quota, dataset.id)
    charge = decision.charge.to_json() if levels.refused_by in (None, DATASET) else None
    requested = decision.requested.to_json()
    reservation = decision.reservation.to_json() if admitted and decision.reservation else None
    made = next_exported(
        dataset_id=dataset.id,
        head_seq=dataset.last_seq,
        head_hash=dataset.head_hash,
        kind=EntryKind.for_invocation(status),
        actor=actor,
        at=at,
        accounting_version=accounting_version,
        state=state,
        invocation_id=invocation_id,
        declaration=prepared.declaration_json,
        request=request,
        charge=charge,
        requested=requested,
        reservation=reservation,
        reason=reason,
        org=records.get(ORGANISATION),
        quota=records.get(QUOTA),
    )
    owners: LevelOwners = {
        ORGANISATION: org.id if admitted and cap is not None and org is not None else None,
        QUOTA: grant.principal_id if admitted and quota is not None and grant is not None else None,
    }
    if admitted and quota is not None and grant is not None and grant.granted_seq is not None:
        owners["quota_grant"] = grant.granted_seq
    invocation: InvocationRecord = {
        "id": invocation_id,
        "dataset_id": dataset.id,
        "status": status,
        "kind": prepared.declaration_json["type"],
        "ledger": decision.sub_budget,  # the sub-budget's column kept its first name
        "declaration": prepared.declaration_json,
        "request": request,
        "charge": charge or {},
        "requested": requested,
        "refund": None,
        "reservation": reservation,
        "cell": None,
        "reason": reason,
        "actor": actor,
        "created_at": at,
        "updated_at": at,
        "levels": owners,
    }
    checkpoint = None
    if signer is not None and signer.due(made["seq"]):
        checkpoint = signer.checkpoint(dataset.id, made["seq"], made["hash"], at)
    doc = dataset.merkle_json
    if doc is None and dataset.last_seq:
        raise RuntimeError(
            f"dataset '{dataset.id}' has {dataset.last_seq} entries but no Merkle frontier"
        )
    if doc is not None and doc.get("size") != dataset.last_seq:
        raise RuntimeError(
            f"dataset '{dataset.id}': its Merkle frontier (size {doc.get('size')}) does not match "
            f"its head (seq {dataset.last_seq})"
        )
    refused = levels.refusal
    response: dict[str, Any]
    if refused is not None:
        summary = None
        if not isinstance(level, Selected):
            summary = _summary(levels, level, cap, quota, prepared, org, search_seconds)
        response = {
            "detail": reason or "budget exceeded",
            "id": invocation_id,
            "level": levels.refused_by,
            "requested": refused.requested.to_json(),
            "remaining": refused.remaining.to_json(),
            "ledger_seq": made["seq"],
            "blocks": refused_blocks,
            "summary": summary,
        }
    else:
        response = {
            "id": invocation_id,
            "dataset_id": dataset.id,
            "status": decision.outcome,
            "mechanism": prepared.declaration_json,
            **prepared.extras,
            "charge": charge if charge is not None else decision.charge.to_json(),
            "requested": requested,
            "remaining": decision.remaining.to_json(),
            "reservation": reservation,
            "levels": {
                o.name: {
                    "charge": o.decision.charge.to_json(),
                    "remaining": o.decision.remaining.to_json(),
                }
                for o in levels.uppers
            }
            or None,
            "ledger_seq": made["seq"],
            "created_at": at,
            "blocks": blocks,
        }
    return Admission(
        admitted,
        status,
        made,
        Head(dataset.id, made["seq"], made["hash"]),
        state,
        Frontier.append_json(doc, made["hash"]),
        moved,
        quota_state,
        invocation,
        checkpoint,
        response,
        held,
        None if held is None else held.changes(),
    )


def _records(
    levels: LevelsDecision,
    org: StoredOrganisation | None,
    grant: StoredGrant | None,
    cap: Filter | None,
    quota: Filter | None,
    dataset_id: str,
) -> tuple[dict[str, LevelPart], CapMoved | None, dict[str, Any] | None]:
    """What the ledger entry records of each upper level in force, what the decision changes
    on the organisation's row (the cap's order, state and usage) and the grant's new quota
    state. Every decision at the cap takes the cap's next ``seq``, refused or not."""
    admitted = levels.admitted
    records: dict[str, LevelPart] = {}
    moved = None
    quota_state = None
    present = [
        (name, filter_)
        for name, filter_ in ((ORGANISATION, cap), (QUOTA, quota))
        if filter_ is not None
    ]
    for (name, filter_), outcome in zip(present, levels.uppers, strict=True):
        if name == ORGANISATION:
            assert org is not None
            seq = org.cap_seq + 1
            order: CapOrder = cap_order(
                seq,
                org.cap_config_seq,
                org.cap_config_json,
                org.cap_json,
                org.cap_state_json,
                org.cap_closed_json,
            )
            usage = None
            if admitted:
                usage = dict(org.cap_usage_json or {})
                usage[dataset_id] = int(usage.get(dataset_id, 0)) + 1
            moved = CapMoved(
                seq,
                seq if org.cap_config_seq is None else org.cap_config_seq,
                state_to_json(outcome.state) if admitted else None,
                usage,
            )
            records[name] = level_record(
                org.id, filter_, outcome.decision, applied=admitted, budget=True
            )
        else:
            assert grant is not None
            order = {}
            if admitted:
                quota_state = state_to_json(outcome.state)
            records[name] = level_record(
                grant.principal_id,
                filter_,
                outcome.decision,
                applied=admitted,
                granted_seq=grant.granted_seq,
            )
        # a CapOrder's keys are a LevelPart's own (mypy wants an update to name every key)
        records[name].update(order)  # type: ignore[typeddict-item]
    return records, moved, quota_state


def _reason(
    levels: LevelsDecision, org: StoredOrganisation | None, partition: Partition | None
) -> str | None:
    """The recorded reason: the dataset's (on a partitioned dataset, naming the blocks that
    refused), or the level above it that refused (the cap names the datasets that used it)."""
    refused = levels.refusal
    if refused is not None and levels.refused_by == DATASET and partition is not None:
        return blocks_refusal(levels, partition)
    if refused is None or levels.refused_by == DATASET:
        return levels.dataset.decision.reason
    reason = f"{levels.refused_by} level: {refused.reason or 'budget exceeded'}"
    if levels.refused_by == ORGANISATION and org is not None:
        reason += f" (the cap is {cap_used_by(org.cap_usage_json)})"
    return reason


def _summary(
    levels: LevelsDecision,
    level: Filter,
    cap: Filter | None,
    quota: Filter | None,
    prepared: Prepared,
    org: StoredOrganisation | None,
    search_seconds: float,
) -> RefusalSummary | None:
    """A refusal summed up for the 409 (:func:`odometer_core.accounting.summary.refusal`): the
    refusing level's filter, what bound and what would fit instead, admitted at every level
    (a suggestion sent as given is admitted, not only by the level that refused)."""
    refused_by, decision = levels.refused_by, levels.refusal
    if refused_by is None or decision is None:
        return None
    refusing = {DATASET: level, ORGANISATION: cap, QUOTA: quota}[refused_by]
    assert refusing is not None

    def admits(declaration: Declaration) -> bool:
        return _decide(
            level, cap, quota, prepared, org, declaration=declaration, exhaustive=False
        ).admitted

    return refusal(
        *refusing,
        prepared.declaration,
        level=refused_by,
        reason=decision.reason,
        sub_budget=prepared.sub_budget if refused_by == DATASET else None,
        conversion_delta=prepared.conversion_delta,
        admits=_bounded(prepared.declaration, admits, search_seconds),
        search=_cheap_search(prepared.declaration, [level, cap, quota]),
    )


def _bounded(
    declaration: Declaration, admits: Callable[[Declaration], bool], seconds: float
) -> Callable[[Declaration], bool]:
    """``admits`` for a costly kind's search (:data:`~odometer_core.accounting.summary.
    COSTLY`), stopped after ``seconds`` of this thread's CPU in all
    (:class:`~odometer_core.accounting.summary.SearchStopped`: what was not found by then is
    left out), and for the kinds :mod:`odometer_core.accounting.instead` searches (a candidate
    may be a PLD of its own); unchanged for other kinds, whose candidates are closed forms."""
    if not isinstance(declaration, (*COSTLY, *instead.KINDS)):
        return admits
    deadline = time.thread_time() + seconds

    def bounded(candidate: Declaration) -> bool:
        if time.thread_time() > deadline:
            raise SearchStopped
        return admits(candidate)

    return bounded


def _cheap_search(declaration: Declaration, filters: Sequence[Filter | None]) -> bool:
    """Whether a refusal may search what would fit: always, but for a training job (a costly
    kind) when a level is in ``basic``, where every candidate is a PLD of its own — the search
    runs under the dataset's lock."""
    if not isinstance(declaration, COSTLY):
        return True
    return all(f[0].mode != "basic" for f in filters if f is not None)
