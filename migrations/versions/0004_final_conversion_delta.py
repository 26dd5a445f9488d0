"""Accounting 1.1.0: ``delta_conversion`` is stored as ``final_conversion_delta``.

The share δ_c of a ``zcdp`` / ``rdp`` budget that pays for converting the filter's total into
(ε, δ) was called ``delta_conversion``, one transposition away from ``basic`` mode's unrelated
``conversion_delta``. This revision renames the key in the stored configurations (datasets,
their split sub-ledgers, analyst quotas). Ledger entries are append-only and keep the names they
were hashed with; the replay reads them through ``app.accounting.legacy``.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Json = sa.JSON(none_as_null=True)
OLD, NEW = "delta_conversion", "final_conversion_delta"


def _rename(config: dict[str, Any] | None, old: str, new: str) -> dict[str, Any] | None:
    if config is None:
        return None
    out = {new if k == old else k: v for k, v in config.items()}
    if isinstance(out.get("ledgers"), list):
        out["ledgers"] = [_rename(item, old, new) for item in out["ledgers"]]
    return out


def _rewrite(old: str, new: str) -> None:
    bind = op.get_bind()
    for table_name, key, column in (
        ("datasets", "id", "config_json"),
        ("grants", "id", "quota_config_json"),
    ):
        table = sa.table(table_name, sa.column(key), sa.column(column, Json))
        for row_id, config in bind.execute(sa.select(table.c[key], table.c[column])).all():
            renamed = _rename(config, old, new)
            if renamed != config:
                bind.execute(table.update().where(table.c[key] == row_id).values({column: renamed}))


def upgrade() -> None:
    _rewrite(OLD, NEW)


def downgrade() -> None:
    _rewrite(NEW, OLD)
