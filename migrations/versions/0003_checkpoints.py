"""Signed checkpoints of ledger heads (append-only, like the ledger itself).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# A checkpoint is evidence for auditors: once written it never changes (as in 0001).
SQLITE_TRIGGERS = (
    """CREATE TRIGGER ledger_checkpoints_no_update BEFORE UPDATE ON ledger_checkpoints
       BEGIN SELECT RAISE(ABORT, 'ledger_checkpoints is append-only: UPDATE refused'); END""",
    """CREATE TRIGGER ledger_checkpoints_no_delete BEFORE DELETE ON ledger_checkpoints
       BEGIN SELECT RAISE(ABORT, 'ledger_checkpoints is append-only: DELETE refused'); END""",
)
POSTGRES_TRIGGERS = (
    """CREATE FUNCTION ledger_checkpoints_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         RAISE EXCEPTION 'ledger_checkpoints is append-only: % refused', TG_OP
           USING ERRCODE = 'restrict_violation';
       END $$""",
    """CREATE TRIGGER ledger_checkpoints_no_update_delete
       BEFORE UPDATE OR DELETE ON ledger_checkpoints
       FOR EACH ROW EXECUTE FUNCTION ledger_checkpoints_append_only()""",
    """CREATE TRIGGER ledger_checkpoints_no_truncate BEFORE TRUNCATE ON ledger_checkpoints
       FOR EACH STATEMENT EXECUTE FUNCTION ledger_checkpoints_append_only()""",
)


def upgrade() -> None:
    op.create_table(
        "ledger_checkpoints",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("dataset_id", sa.String(40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("head_hash", sa.String(64), nullable=False),
        sa.Column("signed_at", sa.String(32), nullable=False),
        sa.Column("key_id", sa.String(64), nullable=False),
        sa.Column("signature", sa.String(128), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name=op.f("fk_ledger_checkpoints_dataset_id_datasets"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ledger_checkpoints")),
        sa.UniqueConstraint(
            "dataset_id",
            "seq",
            "key_id",
            name=op.f("uq_ledger_checkpoints_dataset_id_seq_key_id"),
        ),
    )
    triggers = SQLITE_TRIGGERS if op.get_bind().dialect.name == "sqlite" else POSTGRES_TRIGGERS
    for statement in triggers:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS ledger_checkpoints_no_update")
        op.execute("DROP TRIGGER IF EXISTS ledger_checkpoints_no_delete")
    else:
        op.execute("DROP TRIGGER IF EXISTS ledger_checkpoints_no_truncate ON ledger_checkpoints")
        op.execute(
            "DROP TRIGGER IF EXISTS ledger_checkpoints_no_update_delete ON ledger_checkpoints"
        )
        op.execute("DROP FUNCTION IF EXISTS ledger_checkpoints_append_only()")
    op.drop_table("ledger_checkpoints")
