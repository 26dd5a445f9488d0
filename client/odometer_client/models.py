"""Results of the client: small frozen dataclasses over the server's JSON, with every amount
parsed from its decimal string to ``Decimal`` (``raw`` keeps the JSON as received).

Grants, organisations, principals, keys, the witness, the ledger and the report were plain
dicts before they were typed; their types still answer ``result["field"]``, ``.get``, ``in``,
``len`` and iteration over the keys as those dicts did, with a :class:`DeprecationWarning`
(:class:`MappingAccess`), until the minor version after the one that typed them."""

from __future__ import annotations

import re
import warnings
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar, Self

_DECIMAL = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$|^[+-]?(inf|Infinity)$")
#: Keys whose string values are names, never amounts (block keys such as bucket ``"17"`` too).
_TEXT_KEYS = frozenset(
    {
        "name",
        "mode",
        "sub_budget",
        "relation",
        "type",
        "scheme",
        "cell",
        "id",
        "actor",
        "reason",
        "from",
        "to",
        "keys",
        "names",
        "next",
        "timezone",
    }
)


def decimals(value: Any, key: str | None = None) -> Any:
    """A copy of ``value`` with every decimal string (outside name-like keys) as ``Decimal``."""
    if isinstance(value, Mapping):
        return {k: decimals(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [decimals(v, key) for v in value]
    if isinstance(value, str) and key not in _TEXT_KEYS and _DECIMAL.match(value):
        try:
            return Decimal(value)
        except InvalidOperation:  # pragma: no cover - the pattern admits only decimals
            return value
    return value


def _amounts(obj: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = obj.get(name)
    return decimals(value) if isinstance(value, Mapping) else {}


def _ranges(value: Any) -> list[BlockRange]:
    return [BlockRange.from_json(r) for r in value] if isinstance(value, list) else []


def _cells(reservation: Mapping[str, Any] | None) -> dict[str, Decimal]:
    if not reservation:
        return {}
    return {str(c["name"]): Decimal(str(c["epsilon"])) for c in reservation.get("cells", [])}


@dataclass(frozen=True)
class Dataset:
    """A dataset and its budget status (``status`` in the mode's units and as (ε, δ))."""

    #: The response documents (contract schemas) this type is read from.
    SCHEMAS: ClassVar[tuple[str, ...]] = ("DatasetOut",)

    id: str
    name: str
    organisation: str
    relation: str
    mode: str
    config: dict[str, Any]
    status: dict[str, Any]
    last_seq: int
    head_hash: str
    raw: dict[str, Any]
    #: A partitioned dataset's partition (``kind``, ``unit``, …); ``None`` for a whole dataset.
    partition: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Dataset:
        head = obj.get("ledger") or {}
        partition = obj.get("partition")
        return cls(
            id=obj["id"],
            name=obj["name"],
            organisation=obj.get("organisation", ""),
            relation=obj.get("relation", ""),
            mode=obj.get("mode", ""),
            config=_amounts(obj, "config"),
            status=_amounts(obj, "status"),
            last_seq=int(head.get("last_seq", 0)),
            head_hash=str(head.get("head_hash", "")),
            raw=dict(obj),
            partition=dict(partition) if isinstance(partition, Mapping) else None,
        )

    @property
    def partitioned(self) -> bool:
        """Partitioned: ``budget`` and the mode are every block's, and ``status`` is per block
        (``odometer`` the highest certified reading over the open blocks, ``blocks`` a summary;
        ``client.list_blocks`` pages every block's)."""
        return self.partition is not None

    @property
    def blocks(self) -> dict[str, Any]:
        """A partitioned dataset's blocks: ``unit``, ``protects``, ``open``, ``runs``,
        ``opened`` (ranges) and ``highest_fraction_spent``; empty for a whole dataset."""
        return dict(self.status.get("blocks") or {})

    @property
    def budget(self) -> dict[str, Decimal]:
        """The target (ε_B, δ_B)."""
        return dict(self.status.get("budget", {}))

    @property
    def spent(self) -> dict[str, Any]:
        """Spent (ε, δ): exact on ``basic`` scalar budgets, the mode's conversion otherwise
        (``spent_eps_delta``; on ``split`` datasets the sum over the sub-budgets)."""
        if "spent_eps_delta" in self.status:
            return dict(self.status["spent_eps_delta"])
        sub_budgets = self.status.get("sub_budgets", {})
        total_eps, total_delta = Decimal(0), Decimal(0)
        for sub in sub_budgets.values():
            sed = sub.get("spent_eps_delta", {})
            total_eps += sed.get("epsilon", Decimal(0))
            total_delta += sed.get("delta", Decimal(0))
        return {"epsilon": total_eps, "delta": total_delta}

    @property
    def odometer(self) -> dict[str, Any]:
        """The certified reading of what has been released so far: an (ε, δ) that holds at
        whatever point the analysts chose to stop (``status.odometer``: ``epsilon``, ``delta``,
        ``source``, ``theorem``; docs/accounting.md, *Certified odometer readings*). Empty from
        a server without it."""
        return dict(self.status.get("odometer") or {})

    @property
    def summary(self) -> dict[str, Any] | None:
        """One reading to quote (``status.summary``, docs/accounting.md): ``text``, the
        ``guarantee`` (the certified reading rounded up to 8 significant digits), what is
        ``left`` in the mode's unit (rounded down) and how many ``more`` of the last declaration
        fit; amounts as the server wrote them (text, already rounded). ``None`` from a server
        without it."""
        status = self.raw.get("status")
        summary = status.get("summary") if isinstance(status, Mapping) else None
        return dict(summary) if isinstance(summary, Mapping) else None

    @property
    def remaining_epsilon(self) -> Decimal | None:
        """Remaining ε on a ``basic`` dataset (``None`` in curve-based modes)."""
        value = self.status.get("remaining", {}).get("epsilon")
        return value if isinstance(value, Decimal) else None

    @property
    def reserved_epsilon(self) -> Decimal:
        value = self.status.get("reserved", {}).get("epsilon", Decimal(0))
        return value if isinstance(value, Decimal) else Decimal(0)

    def sub_budget_status(self, name: str) -> dict[str, Any]:
        """The status of one sub-budget of a ``split`` dataset."""
        return dict(self.status["sub_budgets"][name])


@dataclass(frozen=True)
class Invocation:
    """A registered invocation (``accepted``, ``reserved``, …) or one read back."""

    #: The response documents (contract schemas) this type is read from.
    SCHEMAS: ClassVar[tuple[str, ...]] = ("InvocationCreated", "InvocationOut")

    id: str
    dataset_id: str
    status: str
    mechanism: dict[str, Any]
    sub_budget: str | None
    charge: dict[str, Any]
    requested: dict[str, Any]
    remaining: dict[str, Any]
    refund: dict[str, Any] | None
    reservation: dict[str, Any] | None
    cell: str | None
    ledger_seq: int | None
    raw: dict[str, Any]
    #: Partitioned datasets: the selected blocks as resolved by the server (``None`` otherwise;
    #: not in an invocation read back).
    blocks: list[BlockRange] | None = None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Invocation:
        refund = obj.get("refund")
        reservation = obj.get("reservation")
        blocks = obj.get("blocks")
        return cls(
            id=obj["id"],
            dataset_id=obj["dataset_id"],
            status=obj["status"],
            mechanism=dict(obj.get("mechanism") or {}),
            sub_budget=obj.get("sub_budget"),
            charge=_amounts(obj, "charge"),
            requested=_amounts(obj, "requested"),
            remaining=_amounts(obj, "remaining"),
            refund=decimals(refund) if isinstance(refund, Mapping) else None,
            reservation=decimals(reservation) if isinstance(reservation, Mapping) else None,
            cell=obj.get("cell"),
            ledger_seq=obj.get("ledger_seq"),
            raw=dict(obj),
            blocks=None if blocks is None else _ranges(blocks),
        )

    @property
    def cells(self) -> dict[str, Decimal]:
        """The reserved partition's cells and their ε (empty if not a reservation)."""
        return _cells(self.raw.get("reservation"))


@dataclass(frozen=True)
class Settlement:
    """A settled or cancelled reservation: what is charged now and what was refunded."""

    #: The response documents (contract schemas) this type is read from.
    SCHEMAS: ClassVar[tuple[str, ...]] = ("InvocationFinished",)

    id: str
    dataset_id: str
    status: str
    cell: str | None
    charge: dict[str, Any]
    refund: dict[str, Any]
    remaining: dict[str, Any]
    ledger_seq: int
    #: SHA-256 (hex) of the released output as recorded in the ledger (settled from an output)
    output_digest: str | None
    raw: dict[str, Any]

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Settlement:
        return cls(
            id=obj["id"],
            dataset_id=obj["dataset_id"],
            status=obj["status"],
            cell=obj.get("cell"),
            charge=_amounts(obj, "charge"),
            refund=_amounts(obj, "refund"),
            remaining=_amounts(obj, "remaining"),
            ledger_seq=int(obj["ledger_seq"]),
            output_digest=obj.get("output_digest"),
            raw=dict(obj),
        )


@dataclass(frozen=True)
class PreviewResult:
    """The decision a registration would get now (nothing written)."""

    #: The response documents (contract schemas) this type is read from.
    SCHEMAS: ClassVar[tuple[str, ...]] = ("Preview",)

    status: str
    charge: dict[str, Any]
    requested: dict[str, Any]
    remaining: dict[str, Any]
    reason: str | None
    reservation: dict[str, Any] | None
    raw: dict[str, Any]

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> PreviewResult:
        reservation = obj.get("reservation")
        return cls(
            status=obj["status"],
            charge=_amounts(obj, "charge"),
            requested=_amounts(obj, "requested"),
            remaining=_amounts(obj, "remaining"),
            reason=obj.get("reason"),
            reservation=decimals(reservation) if isinstance(reservation, Mapping) else None,
            raw=dict(obj),
        )

    @property
    def admitted(self) -> bool:
        return self.status in ("accepted", "reserved")

    @property
    def fit(self) -> dict[str, Any] | None:
        """How many more of the declaration the caller could register in a row now
        (``count``, ``at_least``, ``reason``, ``level``: the level that admits the fewest);
        ``None`` from a server without it."""
        fit = self.raw.get("fit")
        return dict(fit) if isinstance(fit, Mapping) else None

    @property
    def blocks(self) -> BlocksPreview | None:
        """Partitioned datasets: which selected blocks can afford the declaration, and how many
        more of it fit (``None`` on a whole dataset, or from a server without it)."""
        found = self.raw.get("blocks")
        return BlocksPreview.from_json(found) if isinstance(found, Mapping) else None

    @property
    def cells(self) -> dict[str, Decimal]:
        return _cells(self.raw.get("reservation"))


# ---------------------------------------------------------------------------- partitioned datasets
#: A block key: a day ``"2026-11-27"``, a week ``"2026-W48"``, a month ``"2026-11"``, a bucket
#: (``17`` or ``"17"``) or a declared name.
BlockKey = str | int


@dataclass(frozen=True)
class BlockRange:
    """Blocks ``first`` … ``last`` (keys as the server writes them, both included)."""

    first: str
    last: str
    #: How many blocks the range holds.
    blocks: int

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> BlockRange:
        return cls(first=str(obj["from"]), last=str(obj["to"]), blocks=int(obj["blocks"]))

    def __str__(self) -> str:
        return self.first if self.first == self.last else f"{self.first}..{self.last}"


@dataclass(frozen=True)
class BlockRun:
    """Consecutive open blocks that share one history, with that history's status."""

    #: The response documents (contract schemas) this type is read from.
    SCHEMAS: ClassVar[tuple[str, ...]] = ("BlockRun",)

    first: str
    last: str
    blocks: int
    #: The certified reading's ε over the block budget's ε, in [0, 1].
    fraction_spent: Decimal
    #: The mode's status of each block of the run (as a whole dataset's ``status``).
    status: dict[str, Any]
    raw: dict[str, Any]

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> BlockRun:
        return cls(
            first=str(obj["from"]),
            last=str(obj["to"]),
            blocks=int(obj["blocks"]),
            fraction_spent=Decimal(str(obj["fraction_spent"])),
            status=_amounts(obj, "status"),
            raw=dict(obj),
        )

    @property
    def range(self) -> BlockRange:
        return BlockRange(self.first, self.last, self.blocks)


@dataclass(frozen=True)
class BlocksPage:
    """One page of a partitioned dataset's open blocks, as runs (``client.list_blocks``)."""

    #: The response documents (contract schemas) this type is read from.
    SCHEMAS: ClassVar[tuple[str, ...]] = ("BlocksPage",)

    dataset_id: str
    partition: dict[str, Any]
    #: How many blocks of the dataset are open (all of them, not only this page's).
    open: int
    runs: list[BlockRun]
    #: The key to pass as ``first`` for the next page; ``None`` on the last page.
    next: str | None
    raw: dict[str, Any]

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> BlocksPage:
        after = obj["next"]
        return cls(
            dataset_id=obj["dataset_id"],
            partition=dict(obj["partition"]),
            open=int(obj["open"]),
            runs=[BlockRun.from_json(r) for r in obj["runs"]],
            next=None if after is None else str(after),
            raw=dict(obj),
        )


@dataclass(frozen=True)
class BlocksChanged:
    """Blocks opened or retired (``client.open_blocks``, ``client.retire_blocks``)."""

    #: The response documents (contract schemas) this type is read from.
    SCHEMAS: ClassVar[tuple[str, ...]] = ("BlocksChanged",)

    dataset_id: str
    #: ``"opened"`` or ``"retired"``.
    action: str
    range: BlockRange
    #: How many blocks of the dataset are open now.
    open: int
    last_seq: int
    head_hash: str
    raw: dict[str, Any]

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> BlocksChanged:
        head = dict(obj["ledger"])  # {"last_seq", "head_hash"}, as a dataset's
        return cls(
            dataset_id=obj["dataset_id"],
            action=obj["action"],
            range=BlockRange.from_json(dict(obj["range"])),  # {"from", "to", "blocks"}
            open=int(obj["open"]),
            last_seq=int(head.get("last_seq", 0)),
            head_hash=str(head.get("head_hash", "")),
            raw=dict(obj),
        )


@dataclass(frozen=True)
class BlocksPreview:
    """A preview on a partitioned dataset (``PreviewResult.blocks``): the selection, which of
    its blocks can still afford the declaration, and how many more of it fit in a row."""

    selected: list[BlockRange]
    #: At most 20 ranges each (the server's cut).
    affordable: list[BlockRange]
    refused: list[BlockRange]
    #: ``count``, ``at_least`` and ``reason`` (what the next one would be refused for).
    fit: dict[str, Any]
    #: What one block's budget protects: ``record`` or ``person``.
    unit: str
    raw: dict[str, Any]

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> BlocksPreview:
        return cls(
            selected=_ranges(obj.get("selected")),
            affordable=_ranges(obj.get("affordable")),
            refused=_ranges(obj.get("refused")),
            fit=dict(obj.get("fit") or {}),
            unit=str(obj.get("unit", "")),
            raw=dict(obj),
        )


# ---------------------------------------------------------------------------- formerly dicts
def _optional(obj: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """An optional object of the document with its amounts as ``Decimal`` (``None``: absent)."""
    value = obj.get(name)
    return decimals(value) if isinstance(value, Mapping) else None


def _objects(obj: Mapping[str, Any], name: str) -> list[dict[str, Any]]:
    """An optional array of objects of the document, amounts as ``Decimal``."""
    value = obj.get(name)
    return [decimals(v) for v in value] if isinstance(value, list) else []


class MappingAccess:
    """Deprecated mapping access to a result that used to be a dict.

    ``result["cap"]``, ``result.get("cap")``, ``"cap" in result``, ``len(result)``, iterating
    over its keys and ``keys()``, ``values()``, ``items()`` read the document the call returned
    before it was typed (amounts as ``Decimal`` where they were), each with a
    :class:`DeprecationWarning`; read the attributes instead (``result.cap``), or ``raw`` for
    the JSON as received. A result is true whatever it holds, as every document was."""

    __slots__ = ()

    raw: dict[str, Any]
    #: ``True``: the call returned the JSON as received (no ``Decimal``), so does the mapping.
    _MAPPING_AS_RECEIVED: ClassVar[bool] = False

    def _mapping(self, use: str) -> dict[str, Any]:
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
        legacy: dict[str, Any] = decimals(self.raw)
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
    quota: dict[str, Any] | None
    #: What the quota has spent (``spent``, …); ``None`` without a quota.
    quota_state: dict[str, Any] | None
    #: The quota's reading to quote (``text``, ``guarantee``, ``left``, ``more``), as written.
    quota_summary: dict[str, Any] | None
    created_by: str
    created_at: str
    raw: dict[str, Any]

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Self:
        summary = obj.get("quota_summary")
        return cls(
            dataset_id=obj["dataset_id"],
            principal_id=obj["principal_id"],
            quota=_optional(obj, "quota"),
            quota_state=_optional(obj, "quota_state"),
            quota_summary=dict(summary) if isinstance(summary, Mapping) else None,
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
    cap: dict[str, Any] | None
    spent: dict[str, Any]
    reserved: dict[str, Any] | None
    remaining: dict[str, Any] | None
    #: The cap's filter: ``mode``, ``odometer`` (the certified reading), …
    status: dict[str, Any]
    guarantee: dict[str, Any] | None
    #: One reading to quote (``text``, ``guarantee``, ``left``, ``more``), as written.
    summary: dict[str, Any] | None
    #: Caps replaced after they counted, each with its reading (``mode``, ``epsilon``,
    #: ``delta``, ``after_seq``).
    closed: list[dict[str, Any]]
    #: The closed caps' readings plus the cap in force's: what to quote once a cap was replaced.
    statement: dict[str, Any] | None
    cap_seq: int
    usage: dict[str, Any]
    created_at: str
    updated_at: str
    raw: dict[str, Any]

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
            summary=dict(summary) if isinstance(summary, Mapping) else None,
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
    raw: dict[str, Any]

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
    drawn: dict[str, Any]
    raw: dict[str, Any]

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
    odometer: dict[str, Any] | None
    closed: list[dict[str, Any]]
    statement: dict[str, Any] | None
    datasets: list[DatasetDraw]
    raw: dict[str, Any]

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
    raw: dict[str, Any]

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
    grants: list[dict[str, Any]]
    raw: dict[str, Any]

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
    raw: dict[str, Any]

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
    raw: dict[str, Any]

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
    raw: dict[str, Any]

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
    raw: dict[str, Any]

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
    lost: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> LedgerRecovered:
        imported, lost = obj.get("imported"), obj.get("lost")
        return cls(
            dataset_id=obj["dataset_id"],
            seq=int(obj["seq"]),
            head_hash=str(obj.get("head_hash", "")),
            imported=None if imported is None else int(imported),
            lost=dict(lost) if isinstance(lost, Mapping) else None,
            raw=dict(obj),
        )


def _as_written(obj: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    value = obj.get(name)
    return dict(value) if isinstance(value, Mapping) else None


def _written(obj: Mapping[str, Any], name: str) -> dict[str, Any]:
    return _as_written(obj, name) or {}


def _written_list(obj: Mapping[str, Any], name: str) -> list[dict[str, Any]]:
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
    declaration: dict[str, Any] | None
    request: dict[str, Any] | None
    charge: dict[str, Any] | None
    refund: dict[str, Any] | None
    reason: str | None
    prev_hash: str
    hash: str
    raw: dict[str, Any]

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

    dataset: dict[str, Any]
    guarantee: dict[str, Any]
    status: dict[str, Any] | None
    series: dict[str, Any]
    analysts: list[dict[str, Any]]
    mechanisms: list[dict[str, Any]]
    refunds: dict[str, Any]
    rejections: dict[str, Any]
    ledger: dict[str, Any]
    chain_head: dict[str, Any]
    verification: dict[str, Any]
    #: A partitioned dataset's blocks; ``None`` for a whole dataset.
    blocks: dict[str, Any] | None
    raw: dict[str, Any]

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
