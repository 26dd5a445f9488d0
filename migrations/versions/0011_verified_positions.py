"""The report's verified positions: where a clean report's replay of a dataset's ledger ended.

The report re-runs a dataset's whole ledger to verify it; each process remembers where its last
clean report ended and resumes there, but the first report after a start re-ran everything
(seconds on a fragmented partitioned dataset). This table keeps the position across restarts:
one row per dataset, the replayer's lossless state compressed, authenticated with a key
derived from the checkpoint key (``app.services._verified``). Nothing is rewritten; an empty
table only means the next report re-runs the ledger once.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "verified_positions",
        sa.Column("dataset_id", sa.String(40), nullable=False),
        sa.Column("entries", sa.Integer(), nullable=False),
        sa.Column("head_hash", sa.String(length=64), nullable=False),
        sa.Column("code", sa.String(length=64), nullable=False),
        sa.Column("key_id", sa.String(length=64), nullable=False),
        sa.Column("mac", sa.String(length=64), nullable=False),
        sa.Column("written_at", sa.String(length=32), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name=op.f("fk_verified_positions_dataset_id_datasets"),
        ),
        sa.PrimaryKeyConstraint("dataset_id", name=op.f("pk_verified_positions")),
    )


def downgrade() -> None:
    op.drop_table("verified_positions")
