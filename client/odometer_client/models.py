"""Results of the client: small frozen dataclasses over the server's JSON, with every amount
parsed from its decimal string to ``Decimal`` (``raw`` keeps the JSON as received).

The results of the tenancy, key, witness, ledger and report calls (typed since they were plain
dicts, with deprecated mapping access) are in :mod:`odometer_client.results`, re-exported
here."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar, cast

from odometer_client.shapes import (
    Amount,
    BlocksStatus,
    Config,
    Declaration,
    Estimate,
    Fit,
    JSONObject,
    Partition,
    Reading,
    Reservation,
    Status,
    Summary,
)

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


def _amounts(obj: Mapping[str, Any], name: str) -> Any:
    """A part of the document with its amounts as ``Decimal`` (empty: absent); typed by the
    field it fills (:mod:`odometer_client.shapes`)."""
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
    config: Config
    status: Status[Decimal]
    last_seq: int
    head_hash: str
    raw: JSONObject
    #: A partitioned dataset's partition (``kind``, ``unit``, …); ``None`` for a whole dataset.
    partition: Partition | None = None

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
            partition=cast(Partition, dict(partition)) if isinstance(partition, Mapping) else None,
        )

    @property
    def partitioned(self) -> bool:
        """Partitioned: ``budget`` and the mode are every block's, and ``status`` is per block
        (``odometer`` the highest certified reading over the open blocks, ``blocks`` a summary;
        ``client.list_blocks`` pages every block's)."""
        return self.partition is not None

    @property
    def blocks(self) -> BlocksStatus[Decimal]:
        """A partitioned dataset's blocks: ``unit``, ``protects``, ``open``, ``runs``,
        ``opened`` (ranges) and ``highest_fraction_spent``; empty for a whole dataset."""
        found: BlocksStatus[Decimal] = self.status.get("blocks") or {}
        return found.copy()

    @property
    def budget(self) -> dict[str, Decimal]:
        """The target (ε_B, δ_B)."""
        return dict(cast(Mapping[str, Decimal], self.status.get("budget", {})))

    @property
    def spent(self) -> Estimate[Decimal]:
        """Spent (ε, δ): exact on ``basic`` scalar budgets, the mode's conversion otherwise
        (``spent_eps_delta``; on ``split`` datasets the sum over the sub-budgets)."""
        if "spent_eps_delta" in self.status:
            return self.status["spent_eps_delta"].copy()
        sub_budgets = self.status.get("sub_budgets", {})
        total_eps, total_delta = Decimal(0), Decimal(0)
        for sub in sub_budgets.values():
            sed = sub.get("spent_eps_delta", {})
            total_eps += sed.get("epsilon", Decimal(0))
            total_delta += sed.get("delta", Decimal(0))
        return {"epsilon": total_eps, "delta": total_delta}

    @property
    def odometer(self) -> Reading[Decimal]:
        """The certified reading of what has been released so far: an (ε, δ) that holds at
        whatever point the analysts chose to stop (``status.odometer``: ``epsilon``, ``delta``,
        ``source``, ``theorem``; docs/accounting.md, *Certified odometer readings*). Empty from
        a server without it."""
        found = self.status.get("odometer")
        return found.copy() if found else {}

    @property
    def summary(self) -> Summary[str] | None:
        """One reading to quote (``status.summary``, docs/accounting.md): ``text``, the
        ``guarantee`` (the certified reading rounded up to 8 significant digits), what is
        ``left`` in the mode's unit (rounded down) and how many ``more`` of the last declaration
        fit; amounts as the server wrote them (text, already rounded). ``None`` from a server
        without it."""
        status = self.raw.get("status")
        summary = status.get("summary") if isinstance(status, Mapping) else None
        return cast(Summary[str], dict(summary)) if isinstance(summary, Mapping) else None

    @property
    def remaining_epsilon(self) -> Decimal | None:
        """Remaining ε on a ``basic`` dataset (``None`` in curve-based modes)."""
        value = self.status.get("remaining", {}).get("epsilon")
        return value if isinstance(value, Decimal) else None

    @property
    def reserved_epsilon(self) -> Decimal:
        value = self.status.get("reserved", {}).get("epsilon", Decimal(0))
        return value if isinstance(value, Decimal) else Decimal(0)

    def sub_budget_status(self, name: str) -> Status[Decimal]:
        """The status of one sub-budget of a ``split`` dataset."""
        return self.status["sub_budgets"][name].copy()


@dataclass(frozen=True)
class Invocation:
    """A registered invocation (``accepted``, ``reserved``, …) or one read back."""

    #: The response documents (contract schemas) this type is read from.
    SCHEMAS: ClassVar[tuple[str, ...]] = ("InvocationCreated", "InvocationOut")

    id: str
    dataset_id: str
    status: str
    mechanism: Declaration
    sub_budget: str | None
    charge: Amount[Decimal]
    requested: Amount[Decimal]
    remaining: Amount[Decimal]
    refund: Amount[Decimal] | None
    reservation: Reservation[Decimal] | None
    cell: str | None
    ledger_seq: int | None
    raw: JSONObject
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
    charge: Amount[Decimal]
    refund: Amount[Decimal]
    remaining: Amount[Decimal]
    ledger_seq: int
    #: SHA-256 (hex) of the released output as recorded in the ledger (settled from an output)
    output_digest: str | None
    raw: JSONObject

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
    charge: Amount[Decimal]
    requested: Amount[Decimal]
    remaining: Amount[Decimal]
    reason: str | None
    reservation: Reservation[Decimal] | None
    raw: JSONObject

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
    def fit(self) -> Fit | None:
        """How many more of the declaration the caller could register in a row now
        (``count``, ``at_least``, ``reason``, ``level``: the level that admits the fewest);
        ``None`` from a server without it."""
        fit = self.raw.get("fit")
        return cast(Fit, dict(fit)) if isinstance(fit, Mapping) else None

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
    status: Status[Decimal]
    raw: JSONObject

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
    partition: Partition
    #: How many blocks of the dataset are open (all of them, not only this page's).
    open: int
    runs: list[BlockRun]
    #: The key to pass as ``first`` for the next page; ``None`` on the last page.
    next: str | None
    raw: JSONObject

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> BlocksPage:
        after = obj["next"]
        return cls(
            dataset_id=obj["dataset_id"],
            partition=cast(Partition, dict(obj["partition"])),
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
    raw: JSONObject

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
    fit: Fit
    #: What one block's budget protects: ``record`` or ``person``.
    unit: str
    raw: JSONObject

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> BlocksPreview:
        return cls(
            selected=_ranges(obj.get("selected")),
            affordable=_ranges(obj.get("affordable")),
            refused=_ranges(obj.get("refused")),
            fit=cast(Fit, dict(obj.get("fit") or {})),
            unit=str(obj.get("unit", "")),
            raw=dict(obj),
        )


# ---------------------------------------------------------------------------- formerly dicts
