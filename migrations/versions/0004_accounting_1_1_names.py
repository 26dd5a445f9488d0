"""Accounting 1.1.0: names that say one thing each.

- ``delta_conversion`` (the share of a ``zcdp`` / ``rdp`` budget's δ that pays for converting the
  filter's total into (ε, δ)) is stored as ``final_conversion_delta``: it was one transposition
  away from ``basic`` mode's unrelated ``conversion_delta``;
- a ``split`` budget's ``ledgers`` are ``sub_budgets`` (and an invocation's or a reservation's
  ``ledger`` is its ``sub_budget``): "ledger" is the audit log.

This revision renames the keys in the stored configurations and states (datasets, their
sub-budgets, analyst quotas) and in the invocations' stored request extras and reservations;
the invocations' column keeps its name. Ledger entries are append-only and keep the names they
were hashed with; the replay reads them through ``odometer_core.accounting.legacy``.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Json = sa.JSON(none_as_null=True)
RENAMED = {
    "delta_conversion": "final_conversion_delta",
    "ledgers": "sub_budgets",
    "ledger": "sub_budget",
}
Rename = Callable[[dict[str, Any] | None], dict[str, Any] | None]


def _renamer(names: dict[str, str]) -> tuple[Rename, Rename]:
    def flat(obj: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if obj is None else {names.get(k, k): v for k, v in obj.items()}

    def config(obj: dict[str, Any] | None) -> dict[str, Any] | None:
        out = flat(obj)
        parts = names.get("ledgers", "ledgers")
        if out is not None and isinstance(out.get(parts), list):
            out[parts] = [flat(item) for item in out[parts]]
        return out

    return flat, config


def _rewrite(names: dict[str, str]) -> None:
    flat, config = _renamer(names)
    bind = op.get_bind()
    for table_name, key, columns in (
        ("datasets", "id", {"config_json": config, "state_json": flat}),
        ("grants", "id", {"quota_config_json": config}),
        ("invocations", "id", {"request": flat, "reservation": flat}),
    ):
        table = sa.table(table_name, sa.column(key), *(sa.column(c, Json) for c in columns))
        query = sa.select(table.c[key], *(table.c[c] for c in columns))
        for row in bind.execute(query).all():
            values = {}
            for (column, rename), old in zip(columns.items(), row[1:], strict=True):
                new = rename(old)
                if new != old:
                    values[column] = new
            if values:
                bind.execute(table.update().where(table.c[key] == row[0]).values(values))


def upgrade() -> None:
    _rewrite(RENAMED)


def downgrade() -> None:
    _rewrite({new: old for old, new in RENAMED.items()})
