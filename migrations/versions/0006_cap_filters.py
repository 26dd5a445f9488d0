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

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

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


def downgrade() -> None:
    for column in ("cap_usage_json", "cap_config_seq", "cap_seq", "cap_config_json"):
        op.execute(f"ALTER TABLE organisations DROP COLUMN {column}")
