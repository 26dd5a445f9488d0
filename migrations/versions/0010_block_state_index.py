"""An index of a partitioned dataset's runs by state, so that a status reads each distinct state
once without scanning the runs.

A partitioned dataset's status shows what is left in its most spent open block, from the
distinct states of its open runs. ``SELECT DISTINCT`` scanned every run (about 100,000 after
the fragmenting attack of ``docs/operations.md``); with this index the status walks the
distinct states by one index seek each (a recursive query: the smallest state, then the
smallest above it, …), so it costs the number of distinct histories, not of runs.

The index is on an expression of ``state_json``: its text on SQLite, its text's MD5 on
PostgreSQL (whose ``json`` type has no ordering, and whose states may be long). Nothing is
rewritten: the index is built from the rows as they are.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The indexed expression per dialect (``app.db.blocks`` queries the same expression).
EXPRESSION = {
    "postgresql": "md5(CAST(state_json AS text))",
    "sqlite": "CAST(state_json AS TEXT)",
}


def upgrade() -> None:
    expression = EXPRESSION[op.get_bind().dialect.name]
    op.execute(f"CREATE INDEX ix_block_runs_states ON block_runs (dataset_id, {expression})")


def downgrade() -> None:
    op.execute("DROP INDEX ix_block_runs_states")
