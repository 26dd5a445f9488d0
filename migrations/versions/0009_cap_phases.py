"""Cap replacement: the statements of caps replaced after they counted.

- ``organisations.cap_closed_json``: the caps of the organisation that were replaced after they
  had counted something, oldest first, each as its mode, its certified reading when it was
  replaced (``epsilon``, ``delta``) and the last organisation sequence number it counted
  (``after_seq``). The organisation's statement is their sum plus the reading of the cap in
  force (``docs/accounting.md``, *Cap replacement*); the first ledger entry at the cap after a
  replacement records the closed phase (``org.replaced``), which the replay checks.

Null on existing rows: no cap was ever replaced. A downgrade refuses while a replaced cap
exists: revision 0008 would show the organisation's statement without its closed phases.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

ORGS = sa.table(
    "organisations", sa.column("id"), sa.column("cap_closed_json", sa.JSON(none_as_null=True))
)

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # plain ALTER TABLE (SQLite ≥ 3.35 and PostgreSQL), as 0006 does: a batch copy of
    # ``organisations`` would break the datasets' foreign keys on SQLite
    op.add_column(
        "organisations", sa.Column("cap_closed_json", sa.JSON(none_as_null=True), nullable=True)
    )


def downgrade() -> None:
    bind = op.get_bind()
    for org_id, closed in bind.execute(sa.select(ORGS.c.id, ORGS.c.cap_closed_json)).all():
        if closed:
            raise RuntimeError(
                f"organisation {org_id} replaced a cap that had counted; revision 0008 cannot "
                "show its closed statement: downgrading would lose it"
            )
    op.execute("ALTER TABLE organisations DROP COLUMN cap_closed_json")
