"""The typed results of the client's tenancy, key, witness, ledger and report calls (grants,
organisations, principals, keys, the witness, the ledger and the report), which were plain dicts
before they were typed: each still answers ``result["field"]``, ``.get``, ``in``, ``len`` and
iteration over the keys as those dicts did, with a :class:`DeprecationWarning`
(:class:`MappingAccess`), until the minor version after the one that typed them. The results
of the dataset and invocation calls are in :mod:`odometer_client.models`, which re-exports
these."""

from __future__ import annotations

import warnings
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, ClassVar, Self, cast

from odometer_client.models import _amounts, decimals
from odometer_client.shapes import (
    Amount,
    AnalystTotals,
    BlocksPageText,
    Cap,
    ChainHead,
    ClosedCap,
    Declaration,
    EntryRequest,
    EpsilonDelta,
    Guarantee,
    JSONObject,
    LedgerSummary,
    Lost,
    MechanismTotals,
    MyGrant,
    Quota,
    Reading,
    Refunds,
    Rejections,
    ReportDataset,
    Reserved,
    SpendSeries,
    State,
    Statement,
    Status,
    Summary,
    Verification,
)


def _optional(obj: Mapping[str, Any], name: str) -> Any:
    """An optional object of the document with its amounts as ``Decimal`` (``None``: absent);
    typed by the field it fills (:mod:`odometer_client.shapes`)."""
    value = obj.get(name)
    return decimals(value) if isinstance(value, Mapping) else None


def _objects(obj: Mapping[str, Any], name: str) -> Any:
    """An optional array of objects of the document, amounts as ``Decimal`` (typed by the
    field it fills)."""
    value = obj.get(name)
    return [decimals(v) for v in value] if isinstance(value, list) else []


def _written_summary(value: Any) -> Summary[str] | None:
    """A summary as written (a shallow copy; ``None``: absent)."""
    return cast(Summary[str], dict(value)) if isinstance(value, Mapping) else None


class MappingAccess:
    """Deprecated mapping access to a result that used to be a dict.

    ``result["cap"]``, ``result.get("cap")``, ``"cap" in result``, ``len(result)``, iterating
    over its keys and ``keys()``, ``values()``, ``items()`` read the document the call returned
    before it was typed (amounts as ``Decimal`` where they were), each with a
    :class:`DeprecationWarning`; read the attributes instead (``result.cap``), or ``raw`` for
    the JSON as received. A result is true whatever it holds, as every document was."""

    __slots__ = ()

    raw: JSONObject
    #: ``True``: the call returned the JSON as received (no ``Decimal``), so does the mapping.
    _MAPPING_AS_RECEIVED: ClassVar[bool] = False

    def _mapping(self, use: str) -> JSONObject:
        name = type(self).__name__
        warnings.warn(
            f"{use}: mapping access to the client's results is deprecated and will be removed "
            f"in the next minor version; read the {name}'s attributes (or .raw, the JSON as "
            "received)",
            DeprecationWarning,
            stacklevel=3,
        )
        if self._MAPPING_AS_RECEIVED:
            return self.raw
        legacy: JSONObject = decimals(self.raw)
        return legacy

    def __getitem__(self, key: str) -> Any:
        return self._mapping(f"{type(self).__name__}[{key!r}]")[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._mapping(f"{type(self).__name__}.get({key!r})").get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._mapping(f"{key!r} in {type(self).__name__}")

    def __iter__(self) -> Iterator[str]:
        return iter(self._mapping(f"iter({type(self).__name__})"))

    def __len__(self) -> int:
        return len(self._mapping(f"len({type(self).__name__})"))

    def __bool__(self) -> bool:
        return True

    def keys(self) -> KeysView[str]:
        return self._mapping(f"{type(self).__name__}.keys()").keys()

    def values(self) -> ValuesView[Any]:
        return self._mapping(f"{type(self).__name__}.values()").values()

    def items(self) -> ItemsView[str, Any]:
        return self._mapping(f"{type(self).__name__}.items()").items()


@dataclass(frozen=True)
class Grant(MappingAccess):
    """A principal's access to a dataset (``client.grant``, ``grants``, ``revoke_grant``)."""

    SCHEMAS: ClassVar[tuple[str, ...]] = ("GrantOut",)

    dataset_id: str
    principal_id: str
    #: The quota (ε, δ) inside the dataset; ``None``: no quota.
    quota: Quota[Decimal] | None
    #: The quota filter's running totals as stored (its mode's state, e.g. a ``basic`` quota's
    #: ``spent_epsilon``, ``spent_delta``, …; not a status), amounts as ``Decimal``; ``None``
    #: without a quota.
    quota_state: State | None
    #: The quota's reading to quote (``text``, ``guarantee``, ``left``, ``more``), as written.
    quota_summary: Summary[str] | None
    created_by: str
    created_at: str
    raw: JSONObject

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Self:
        summary = obj.get("quota_summary")
        return cls(
            dataset_id=obj["dataset_id"],
            principal_id=obj["principal_id"],
            quota=_optional(obj, "quota"),
            quota_state=_optional(obj, "quota_state"),
            quota_summary=_written_summary(summary),
            created_by=str(obj.get("created_by", "")),
            created_at=str(obj.get("created_at", "")),
            raw=dict(obj),
        )


@dataclass(frozen=True)
class GrantCreated(Grant):
    """A new grant (``client.grant``): a :class:`Grant` whose deprecated mapping access reads
    the JSON as received, as the dict ``grant`` returned did."""

    _MAPPING_AS_RECEIVED: ClassVar[bool] = True


@dataclass(frozen=True)
class Organisation(MappingAccess):
    """An organisation: its cap (ε, δ, mode), what the cap counted, and its filter's status
    with the certified reading (``client.organisations``, ``set_organisation_cap``, …)."""

    SCHEMAS: ClassVar[tuple[str, ...]] = ("OrganisationOut",)

    id: str
    name: str
    #: The cap in force (``epsilon``, ``delta``, ``mode``); ``None``: no cap.
    cap: Cap[Decimal] | None
    #: What the cap's filter has spent, in its mode's units.
    spent: Amount[Decimal]
    #: What open reservations hold (a ``basic`` cap's; ``None`` in other modes).
    reserved: Reserved[Decimal] | None
    remaining: Amount[Decimal] | None
    #: The cap's filter: ``mode``, ``odometer`` (the certified reading), …
    status: Status[Decimal]
    guarantee: EpsilonDelta[Decimal] | None
    #: One reading to quote (``text``, ``guarantee``, ``left``, ``more``), as written.
    summary: Summary[str] | None
    #: Caps replaced after they counted, each with its reading (``mode``, ``epsilon``,
    #: ``delta``, ``after_seq``).
    closed: list[ClosedCap[Decimal]]
    #: The closed caps' readings plus the cap in force's: what to quote once a cap was replaced.
    statement: Statement[Decimal] | None
    cap_seq: int
    #: How many registrations the cap counted, by which datasets' relation and mode.
    usage: dict[str, int]
    created_at: str
    updated_at: str
    raw: JSONObject

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Organisation:
        summary = obj.get("summary")
        return cls(
            id=obj["id"],
            name=obj["name"],
            cap=_optional(obj, "cap"),
            spent=_amounts(obj, "spent"),
            reserved=_optional(obj, "reserved"),
            remaining=_optional(obj, "remaining"),
            status=_amounts(obj, "status"),
            guarantee=_optional(obj, "guarantee"),
            summary=_written_summary(summary),
            closed=_objects(obj, "closed"),
            statement=_optional(obj, "statement"),
            cap_seq=int(obj.get("cap_seq", 0)),
            usage=_amounts(obj, "usage"),
            created_at=str(obj.get("created_at", "")),
            updated_at=str(obj.get("updated_at", "")),
            raw=dict(obj),
        )


@dataclass(frozen=True)
class CapCapacity(MappingAccess):
    """How many more of a declaration an organisation's cap admits if nothing else runs
    (``client.organisation_cap_capacity``)."""

    SCHEMAS: ClassVar[tuple[str, ...]] = ("CapacityOut",)

    organisation: str
    mode: str
    relation: str
    count: int
    #: ``count`` is a lower bound (the count stopped at ``limit``).
    at_least: bool
    #: What the next one would be refused for.
    reason: str | None
    limit: int
    raw: JSONObject

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> CapCapacity:
        return cls(
            organisation=obj["organisation"],
            mode=obj["mode"],
            relation=str(obj.get("relation", "")),
            count=int(obj["count"]),
            at_least=bool(obj["at_least"]),
            reason=obj.get("reason"),
            limit=int(obj.get("limit", 0)),
            raw=dict(obj),
        )


@dataclass(frozen=True)
class DatasetDraw:
    """What one dataset drew from its organisation's cap (``OrganisationReport.datasets``)."""

    SCHEMAS: ClassVar[tuple[str, ...]] = ("OrganisationReportDataset",)

    id: str
    name: str
    mode: str
    relation: str
    decisions: int
    admitted: int
    #: What it drew, in the cap's units.
    drawn: Amount[Decimal]
    raw: JSONObject

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> DatasetDraw:
        return cls(
            id=obj["id"],
            name=obj["name"],
            mode=obj["mode"],
            relation=obj["relation"],
            decisions=int(obj["decisions"]),
            admitted=int(obj["admitted"]),
            drawn=_amounts(obj, "drawn"),
            raw=dict(obj),
        )


@dataclass(frozen=True)
class OrganisationReport(MappingAccess):
    """The cap replayed from every dataset's ledger (``client.organisation_report``)."""

    SCHEMAS: ClassVar[tuple[str, ...]] = ("OrganisationReport",)

    organisation: Organisation
    verified: bool
    problems: list[str]
    decisions: int
    #: The certified reading replayed (``None`` before the cap counted anything).
    odometer: Reading[Decimal] | None
    closed: list[ClosedCap[Decimal]]
    statement: Statement[Decimal] | None
    datasets: list[DatasetDraw]
    raw: JSONObject

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> OrganisationReport:
        return cls(
            organisation=Organisation.from_json(obj["organisation"]),
            verified=bool(obj["verified"]),
            problems=[str(p) for p in obj["problems"]],
            decisions=int(obj["decisions"]),
            odometer=_optional(obj, "odometer"),
            closed=_objects(obj, "closed"),
            statement=_optional(obj, "statement"),
            datasets=[DatasetDraw.from_json(d) for d in obj["datasets"]],
            raw=dict(obj),
        )


@dataclass(frozen=True)
class Principal(MappingAccess):
    """A principal (``client.principals``, ``create_principal``)."""

    SCHEMAS: ClassVar[tuple[str, ...]] = ("PrincipalOut",)

    id: str
    name: str
    #: ``admin``, ``curator``, ``analyst`` or ``auditor``.
    role: str
    organisation_id: str | None
    created_at: str
    raw: JSONObject

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Principal:
        return cls(
            id=obj["id"],
            name=obj["name"],
            role=obj["role"],
            organisation_id=obj.get("organisation_id"),
            created_at=str(obj.get("created_at", "")),
            raw=dict(obj),
        )


@dataclass(frozen=True)
class Me(MappingAccess):
    """The key's principal (``client.whoami``, ``GET /v1/me``); an analyst's ``grants`` each
    with its dataset and quota (``budget``, ``summary``)."""

    SCHEMAS: ClassVar[tuple[str, ...]] = ("Me",)

    id: str
    name: str
    role: str
    organisation: str | None
    grants: list[MyGrant]
    raw: JSONObject

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Me:
        return cls(
            id=obj["id"],
            name=obj["name"],
            role=obj["role"],
            organisation=obj.get("organisation"),
            grants=_objects(obj, "grants"),
            raw=dict(obj),
        )


@dataclass(frozen=True)
class IssuedKey(MappingAccess):
    """A new API key (``client.issue_key``): ``key`` is shown once, the server keeps a hash."""

    SCHEMAS: ClassVar[tuple[str, ...]] = ("KeyCreated",)

    id: str
    key: str
    principal_id: str
    expires_at: str | None
    raw: JSONObject

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> IssuedKey:
        return cls(
            id=obj["id"],
            key=obj["key"],
            principal_id=obj["principal_id"],
            expires_at=obj.get("expires_at"),
            raw=dict(obj),
        )

    def __repr__(self) -> str:  # never the key itself in a log line
        return f"IssuedKey(id={self.id!r}, principal_id={self.principal_id!r}, key=...)"


@dataclass(frozen=True)
class RevokedKey(MappingAccess):
    """A revoked API key (``client.revoke_key``)."""

    SCHEMAS: ClassVar[tuple[str, ...]] = ("KeyRevoked",)

    id: str
    principal_id: str
    revoked_at: str
    expires_at: str | None
    raw: JSONObject

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> RevokedKey:
        return cls(
            id=obj["id"],
            principal_id=obj["principal_id"],
            revoked_at=obj["revoked_at"],
            expires_at=obj.get("expires_at"),
            raw=dict(obj),
        )


@dataclass(frozen=True)
class FrozenDataset:
    """A dataset whose ledger is behind the witness: it refuses writes (``WitnessState``)."""

    SCHEMAS: ClassVar[tuple[str, ...]] = ("FrozenOut",)

    dataset_id: str
    reason: str
    witnessed_seq: int
    witnessed_hash: str
    database_seq: int
    raw: JSONObject

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> FrozenDataset:
        return cls(
            dataset_id=obj["dataset_id"],
            reason=obj["reason"],
            witnessed_seq=int(obj["witnessed_seq"]),
            witnessed_hash=str(obj.get("witnessed_hash", "")),
            database_seq=int(obj["database_seq"]),
            raw=dict(obj),
        )


@dataclass(frozen=True)
class WitnessState(MappingAccess):
    """The witness of ledger heads (``client.witness``, ``check_witness``)."""

    SCHEMAS: ClassVar[tuple[str, ...]] = ("WitnessOut",)

    enabled: bool
    location: str | None
    signed: bool
    frozen: list[FrozenDataset]
    raw: JSONObject

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> WitnessState:
        return cls(
            enabled=bool(obj["enabled"]),
            location=obj.get("location"),
            signed=bool(obj.get("signed")),
            frozen=[FrozenDataset.from_json(f) for f in obj.get("frozen") or ()],
            raw=dict(obj),
        )


@dataclass(frozen=True)
class LedgerRecovered(MappingAccess):
    """A dataset brought back to the witness's head (``client.import_ledger_tail``: ``imported``
    entries; ``client.acknowledge_ledger_loss``: ``lost`` entries, recorded at ``seq``)."""

    dataset_id: str
    #: The ledger's head after it.
    seq: int
    head_hash: str
    #: How many lost entries were imported (``None`` for an acknowledged loss).
    imported: int | None = None
    #: The entries given up (``witnessed_seq``, ``witnessed_hash``, ``database_seq``;
    #: ``None`` for an import).
    lost: Lost | None = None
    raw: JSONObject = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> LedgerRecovered:
        imported, lost = obj.get("imported"), obj.get("lost")
        return cls(
            dataset_id=obj["dataset_id"],
            seq=int(obj["seq"]),
            head_hash=str(obj.get("head_hash", "")),
            imported=None if imported is None else int(imported),
            lost=cast(Lost, dict(lost)) if isinstance(lost, Mapping) else None,
            raw=dict(obj),
        )


def _as_written(obj: Mapping[str, Any], name: str) -> Any:
    """An optional object of the document as written, a shallow copy (``None``: absent);
    typed by the field it fills (:mod:`odometer_client.shapes`)."""
    value = obj.get(name)
    return dict(value) if isinstance(value, Mapping) else None


def _written(obj: Mapping[str, Any], name: str) -> Any:
    return _as_written(obj, name) or {}


def _written_list(obj: Mapping[str, Any], name: str) -> Any:
    value = obj.get(name)
    return [dict(v) for v in value] if isinstance(value, list) else []


@dataclass(frozen=True)
class LedgerEntry(MappingAccess):
    """One ledger entry (``client.ledger``), exactly as hashed: its fields as the server wrote
    them (amounts as decimal text, as an export holds them); ``raw`` is the whole entry (what
    :mod:`odometer_client.ledger` reads)."""

    SCHEMAS: ClassVar[tuple[str, ...]] = ("LedgerEntryOut",)
    _MAPPING_AS_RECEIVED: ClassVar[bool] = True

    dataset_id: str
    seq: int
    kind: str
    invocation_id: str | None
    actor: str | None
    at: str
    declaration: Declaration | None
    request: EntryRequest | None
    #: What it charged, in the mode's units, as written (decimal text).
    charge: Amount[str] | None
    refund: Amount[str] | None
    reason: str | None
    prev_hash: str
    hash: str
    raw: JSONObject

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> LedgerEntry:
        return cls(
            dataset_id=obj["dataset_id"],
            seq=int(obj["seq"]),
            kind=obj["kind"],
            invocation_id=obj.get("invocation_id"),
            actor=obj.get("actor"),
            at=obj["at"],
            declaration=_as_written(obj, "declaration"),
            request=_as_written(obj, "request"),
            charge=_as_written(obj, "charge"),
            refund=_as_written(obj, "refund"),
            reason=obj.get("reason"),
            prev_hash=obj["prev_hash"],
            hash=obj["hash"],
            raw=dict(obj),
        )


@dataclass(frozen=True)
class Report(MappingAccess):
    """A dataset's report (``client.report``, ``GET …/report``): its guarantee and status, the
    spend series, per-analyst and per-mechanism totals, refunds, rejections, the ledger
    summary, the chain head and the replay's ``verification`` (``ok``, ``problems``); each as
    the server wrote it (amounts as decimal text, already rounded where the server rounds)."""

    SCHEMAS: ClassVar[tuple[str, ...]] = ("ReportOut",)
    _MAPPING_AS_RECEIVED: ClassVar[bool] = True

    dataset: ReportDataset
    guarantee: Guarantee
    status: Status[str] | None
    series: SpendSeries
    analysts: list[AnalystTotals]
    mechanisms: list[MechanismTotals]
    refunds: Refunds
    rejections: Rejections
    ledger: LedgerSummary
    chain_head: ChainHead
    verification: Verification
    #: A partitioned dataset's blocks (a page of its runs); ``None`` for a whole dataset.
    blocks: BlocksPageText | None
    raw: JSONObject

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Report:
        return cls(
            dataset=_written(obj, "dataset"),
            guarantee=_written(obj, "guarantee"),
            status=_as_written(obj, "status"),
            series=_written(obj, "series"),
            analysts=_written_list(obj, "analysts"),
            mechanisms=_written_list(obj, "mechanisms"),
            refunds=_written(obj, "refunds"),
            rejections=_written(obj, "rejections"),
            ledger=_written(obj, "ledger"),
            chain_head=_written(obj, "chain_head"),
            verification=_written(obj, "verification"),
            blocks=_as_written(obj, "blocks"),
            raw=dict(obj),
        )

    @property
    def verified(self) -> bool:
        """The replay of the whole ledger found nothing wrong."""
        return bool(self.verification.get("ok"))
