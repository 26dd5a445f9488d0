"""Organisation caps in every currency: the cap's filter and its order across datasets.

- ``organisations.cap_config_json``: the cap's filter configuration (any leaf mode), kept when
  the cap is removed so that reservations taken under it still finish and a new cap continues
  from it. Null on existing rows: their cap is the ``basic`` filter of ``cap_json``.
- ``organisations.cap_seq``: the organisation sequence number of the last ledger entry that
  touched the cap. Every entry deciding or finishing an invocation at the cap records the next
  one (its ``org.seq``), so the cap's decisions replay in their order across datasets.
- ``organisations.cap_config_seq``: the ``org.seq`` of the entry that recorded the cap's
  configuration in force (null: not recorded yet; the next entry at the cap records it).
- ``organisations.cap_usage_json``: how many invocations each dataset registered under the cap
  (what a refusal at the organisation level names).

Existing organisations keep their ``basic`` cap (``cap_config_json`` null); ``cap_seq`` starts
after the highest ``org.seq`` their ledgers already hold (none before this revision; some after
a downgrade and upgrade), so numbers are never reused. A downgrade refuses while a cap in
another mode than ``basic`` exists: revision 0005 can only read ``basic`` caps.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

Json = sa.JSON(none_as_null=True)
ORGS = sa.table(
    "organisations",
    sa.column("id"),
    sa.column("cap_seq"),
    sa.column("cap_config_json", Json),
)
DATASETS = sa.table("datasets", sa.column("id"), sa.column("organisation"))
LEDGER = sa.table("ledger_entries", sa.column("dataset_id"), sa.column("org", Json))

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # plain ALTER TABLE (SQLite ≥ 3.35 and PostgreSQL): a batch copy of ``organisations``
    # would break the datasets' foreign keys on SQLite
    op.add_column(
        "organisations", sa.Column("cap_config_json", sa.JSON(none_as_null=True), nullable=True)
    )
    op.add_column(
        "organisations",
        sa.Column("cap_seq", sa.Integer(), nullable=False, server_default="0"),
    )
    op.add_column("organisations", sa.Column("cap_config_seq", sa.Integer(), nullable=True))
    op.add_column(
        "organisations", sa.Column("cap_usage_json", sa.JSON(none_as_null=True), nullable=True)
    )
    bind = op.get_bind()
    highest: dict[str, int] = {}
    parts = sa.select(DATASETS.c.organisation, LEDGER.c.org).select_from(
        LEDGER.join(DATASETS, DATASETS.c.id == LEDGER.c.dataset_id)
    )
    for organisation, part in bind.execute(parts.where(LEDGER.c.org.is_not(None))):
        if isinstance(part, dict) and isinstance(part.get("seq"), int):
            highest[organisation] = max(highest.get(organisation, 0), part["seq"])
    for organisation, seq in highest.items():
        bind.execute(ORGS.update().where(ORGS.c.id == organisation).values(cap_seq=seq))


def downgrade() -> None:
    bind = op.get_bind()
    for org_id, config in bind.execute(sa.select(ORGS.c.id, ORGS.c.cap_config_json)).all():
        if isinstance(config, dict) and config.get("mode", "basic") != "basic":
            raise RuntimeError(
                f"organisation {org_id} has a '{config['mode']}' cap, which revision 0005 "
                "cannot read: downgrading would lose it"
            )
    for column in ("cap_usage_json", "cap_config_seq", "cap_seq", "cap_config_json"):
        op.execute(f"ALTER TABLE organisations DROP COLUMN {column}")
