"""Dataset use cases: create, list, get status, change budget."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from app.db.models import Dataset, LedgerEntry
from app.db.uow import UnitOfWork
from app.services import blocks
from app.services._aggregate import append_entry, behind_witness, load_filter, visible_dataset
from app.services._common import new_id, utc_now
from app.services._types import JSONObject, LedgerHead
from app.services.errors import NotFound
from app.services.frozen import frozen_status
from app.services.principals import Principal
from app.writepath import write_path
from odometer_core.accounting import (
    AccountingConfig,
    FilterState,
    config_to_json,
    explain_change,
    fmt,
    initial_state,
    make_config,
    parse_amount,
    parse_declaration,
    state_to_json,
    status,
)
from odometer_core.accounting import (
    change_budget as accounting_change_budget,
)
from odometer_core.accounting.json_types import ConfigJSON, PartitionJSON, Summary
from odometer_core.accounting.summary import compose, summarise
from odometer_core.ledger import EntryKind
from odometer_core.ledger.chain import GENESIS_HASH
from odometer_core.partition import requirements

#: The entries of an admitted registration, whose declaration a status summary counts.
ADMITTED = (EntryKind.INVOCATION_ACCEPTED, EntryKind.INVOCATION_RESERVED)

#: Datasets created by the admin (who belongs to no organisation) land here.
DEFAULT_ORGANISATION = "default"


@dataclass(frozen=True, slots=True)
class NewDataset:
    name: str
    epsilon: object
    delta: object
    relation: str
    accounting: JSONObject  # the request's accounting, as the core's make_config reads it
    #: The owning organisation: a curator's own (naming another is 404); the admin names one
    #: (``default`` when omitted, for clients written before organisations existed).
    organisation_id: str | None = None
    #: A partitioned dataset's partition (``None``: one budget for the whole dataset); the
    #: budget and accounting are then every block's
    partition: JSONObject | None = None  # as the core's new_partition reads it


@dataclass(frozen=True, slots=True)
class BudgetChange:
    epsilon: object
    delta: object
    sub_budget: str | None = None
    final_conversion_delta: object = None
    #: an ``rdp`` dataset's expected workload, before its first charge (the grid is re-chosen)
    workload: list[JSONObject] | None = None  # as the core's change_budget reads it


class DatasetView(TypedDict):
    """What clients see of a dataset (:func:`dataset_view`; its wire model: ``DatasetOut``)."""

    id: str
    name: str
    organisation: str
    relation: str
    mode: str
    created_by: str
    created_at: str
    updated_at: str
    config: ConfigJSON  # the configuration, as stored (the core's config_to_json)
    #: the status view (:func:`~odometer_core.accounting.status`, with its summary; a
    #: partitioned dataset's: :func:`app.services.blocks.partition_status`)
    status: JSONObject
    ledger: LedgerHead
    partition: PartitionJSON | None  # as stored (the core's Partition.to_json)
    requires: list[dict[str, str]]
    #: a new dataset's: the other datasets of its organisation with its name
    warnings: NotRequired[list[str]]
    #: a budget change's: what the change did
    effect: NotRequired[str]


class DatasetPage(TypedDict):
    datasets: list[DatasetView]
    next_offset: int | None


def dataset_view(
    ds: Dataset,
    config: AccountingConfig,
    state: FilterState,
    blocks: Mapping[str, Any] | None = None,
    last: LedgerEntry | None = None,
) -> DatasetView:
    """What clients see of a dataset: identity, configuration, status with its summary (how
    many more of ``last``'s declaration fit, when given), ledger head (a partitioned
    dataset's status: :func:`app.services.blocks.partition_status`, passed as ``blocks``)."""
    if blocks is None:
        view_status = status(config, state)
        view_status["summary"] = summary_of(config, state, view_status, last)
    else:
        view_status = dict(blocks)
    return {
        "id": ds.id,
        "name": ds.name,
        "organisation": ds.organisation,
        "relation": ds.relation,
        "mode": ds.mode,
        "created_by": ds.created_by,
        "created_at": ds.created_at,
        "updated_at": ds.updated_at,
        "config": ds.config_json,
        "status": view_status,
        "ledger": {"last_seq": ds.last_seq, "head_hash": ds.head_hash},
        "partition": ds.partition_json,
        "requires": requirements(
            None if ds.partition_json is None else ds.partition_json.get("unit"), ds.relation
        ),
    }


def summary_of(
    config: AccountingConfig,
    state: FilterState,
    view: Mapping[str, Any],
    last: LedgerEntry | None,
) -> Summary:
    """The status summary (:mod:`odometer_core.accounting.summary`), counting how many more of
    the last registration's declaration fit (a declaration this version no longer parses is
    not counted)."""
    if last is None or last.declaration is None:
        return compose(view)
    try:
        declaration = parse_declaration(last.declaration)
        request = last.request or {}
        conversion = request.get("conversion_delta")
        sub_budget = request.get("sub_budget")
        conversion_delta = None if conversion is None else parse_amount(conversion)
    except ValueError:
        return compose(view)
    return summarise(
        config,
        state,
        declaration,
        sub_budget=sub_budget,
        conversion_delta=conversion_delta,
        view=view,
    )


def create_dataset(uow: UnitOfWork, principal: Principal, new: NewDataset) -> DatasetView:
    """Create a dataset and its genesis ledger entry (``dataset_created``)."""
    config = make_config(new.epsilon, new.delta, new.relation, new.accounting)
    state = initial_state(config)
    partition = None if new.partition is None else blocks.check_partition(config, new.partition)
    at = utc_now()
    config_json = config_to_json(config)
    organisation = new.organisation_id or principal.organisation or DEFAULT_ORGANISATION
    with uow:
        if not principal.can_see(organisation) or uow.organisations.get(organisation) is None:
            raise NotFound(f"organisation '{organisation}' not found")
        namesakes = uow.datasets.named(organisation, new.name)
        ds = Dataset(
            id=new_id("ds"),
            name=new.name,
            organisation=organisation,
            relation=config.relation,
            mode=config.mode,
            config_json=config_json,
            state_json=state_to_json(state) if partition is None else blocks.NO_BLOCKS,
            partition_json=partition,
            last_seq=0,
            head_hash=GENESIS_HASH,
            created_by=principal.id,
            created_at=at,
            updated_at=at,
        )
        uow.datasets.add(ds)
        append_entry(
            uow,
            ds,
            kind=EntryKind.DATASET_CREATED,
            actor=principal.id,
            at=at,
            request=_created_request(ds),
            config=config_json,
            state=ds.state_json,
        )
        view = dataset_view(ds, config, state, blocks.partition_status(uow, ds, config))
        uow.commit()
    if namesakes:
        view["warnings"] = [
            f"this organisation already has {len(namesakes)} other dataset(s) named "
            f"'{new.name}' ({', '.join(namesakes[:5])}): address them by id, the name no "
            "longer tells them apart"
        ]
    return view


def get_dataset(uow: UnitOfWork, principal: Principal, dataset_id: str) -> DatasetView:
    """Budget status of one dataset."""
    with uow.read_only():
        ds = visible_dataset(uow, principal, dataset_id, lock=False)
        # the last admitted registration: a refusal changes nothing, the status included
        last = uow.ledger.last_of(ds.id, ADMITTED)
        return _view(uow, ds, last)


def _view(uow: UnitOfWork, ds: Dataset, last: LedgerEntry | None = None) -> DatasetView:
    config, state = load_filter(ds)
    view = dataset_view(ds, config, state, blocks.partition_status(uow, ds, config), last)
    view["status"]["frozen"] = frozen_status(uow, ds.id)  # a read says it is frozen
    return view


def _created_request(ds: Dataset) -> JSONObject:
    """A ``dataset_created`` entry's ``request`` (the partition only on a partitioned dataset,
    so that other entries keep their shape)."""
    out: JSONObject = {"name": ds.name, "organisation": ds.organisation}
    if ds.partition_json is not None:
        out["partition"] = ds.partition_json
    return out


def list_datasets(uow: UnitOfWork, principal: Principal, *, limit: int, offset: int) -> DatasetPage:
    """Datasets the principal may see, oldest first."""
    with uow.read_only():
        viewer = principal.viewer
        rows = uow.datasets.list(
            scope=viewer.scope, analyst=viewer.analyst, limit=limit + 1, offset=offset
        )
        views = [_view(uow, ds) for ds in rows[:limit]]
    more = len(rows) > limit
    return {"datasets": views, "next_offset": offset + limit if more else None}


def change_budget(
    uow: UnitOfWork, principal: Principal, dataset_id: str, change: BudgetChange
) -> DatasetView:
    """Raise or lower a budget (never below spent + reserved); a ``budget_changed`` entry.
    Refused first, whatever the change, while the dataset is behind its witness or frozen with
    its organisation (409 ``LedgerBehindWitness``): its spent state may have been rolled back."""
    with uow:
        ds = visible_dataset(uow, principal, dataset_id, lock=True)
        witness = write_path(uow.database).witness
        if witness is not None and not uow.recovering and ds.id not in uow.heads:
            behind = witness.behind(ds.id, ds.last_seq, ds.head_hash)
            if behind is not None:
                raise behind_witness(behind)
        config, state = load_filter(ds)
        if ds.partition_json is not None:
            new_config, effect = blocks.change_blocks_budget(
                uow,
                principal,
                ds,
                config,
                budget_request(change),
                workload=change.workload,
                final_conversion_delta=change.final_conversion_delta,
            )
            view = _view(uow, ds)
            view["effect"] = effect
            uow.commit()
            return view
        new_config, new_state = accounting_change_budget(
            config,
            state,
            change.epsilon,
            change.delta,
            sub_budget=change.sub_budget,
            final_conversion_delta=change.final_conversion_delta,
            workload=change.workload,
        )
        at = utc_now()
        append_entry(
            uow,
            ds,
            kind=EntryKind.BUDGET_CHANGED,
            actor=principal.id,
            at=at,
            request=budget_request(change),
            config=config_to_json(new_config),
            state=state_to_json(new_state),
        )
        view = dataset_view(ds, new_config, new_state)
        view["effect"] = explain_change(config, new_config, new_state, sub_budget=change.sub_budget)
        uow.commit()
    return view


def budget_request(change: BudgetChange) -> JSONObject:
    """The ``request`` of a ``budget_changed`` entry: the arguments replay passes again
    (``workload`` only when given, so that other entries keep their earlier shape)."""
    out: JSONObject = {
        "epsilon": _text(change.epsilon),
        "delta": _text(change.delta),
        "sub_budget": change.sub_budget,
        "final_conversion_delta": None
        if change.final_conversion_delta is None
        else _text(change.final_conversion_delta),
    }
    if change.workload is not None:
        out["workload"] = change.workload
    return out


def _text(value: object) -> str:
    return fmt(parse_amount(value))
