"""Results of the client: small frozen dataclasses over the server's JSON, with every amount
parsed from its decimal string to ``Decimal`` (``raw`` keeps the JSON as received)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar

_DECIMAL = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$|^[+-]?(inf|Infinity)$")
#: Keys whose string values are names, never amounts.
_TEXT_KEYS = frozenset(
    {"name", "mode", "sub_budget", "relation", "type", "scheme", "cell", "id", "actor", "reason"}
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

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Dataset:
        head = obj.get("ledger") or {}
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
        )

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

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Invocation:
        refund = obj.get("refund")
        reservation = obj.get("reservation")
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
    def cells(self) -> dict[str, Decimal]:
        return _cells(self.raw.get("reservation"))
