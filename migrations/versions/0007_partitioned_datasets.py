"""Partitioned datasets: one filter per block, stored as runs of equal history.

- ``datasets.partition_json``: the partition a curator declared at creation (its key kind, the
  unit of privacy one block protects and the kind's parameters); null on every other dataset.
- ``block_runs``: the open blocks of each partitioned dataset as maximal runs ``[lo, hi)`` of
  consecutive block indices that share one filter state (``docs/accounting.md``, *Partitioned
  datasets*). A charge over a range rewrites only the runs it touches; the table holds as many
  rows as there are distinct histories, not blocks.

A downgrade refuses while a partitioned dataset exists: revision 0006 cannot read one.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DATASETS = sa.table("datasets", sa.column("id"), sa.column("partition_json"))


def upgrade() -> None:
    op.add_column("datasets", sa.Column("partition_json", sa.JSON(none_as_null=True)))
    op.create_table(
        "block_runs",
        sa.Column("dataset_id", sa.String(40), nullable=False),
        sa.Column("lo", sa.BigInteger(), nullable=False),
        sa.Column("hi", sa.BigInteger(), nullable=False),
        sa.Column("state_json", sa.JSON(none_as_null=True), nullable=False),
        sa.PrimaryKeyConstraint("dataset_id", "lo", name="pk_block_runs"),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name="fk_block_runs_dataset_id_datasets"
        ),
    )


def downgrade() -> None:
    bind = op.get_bind()
    found = bind.execute(
        sa.select(DATASETS.c.id).where(DATASETS.c.partition_json.is_not(None)).limit(1)
    ).first()
    if found is not None:
        raise RuntimeError(
            f"dataset {found[0]} is partitioned, which revision 0006 cannot read: downgrading "
            "would lose its blocks"
        )
    op.drop_table("block_runs")
    op.execute("ALTER TABLE datasets DROP COLUMN partition_json")
