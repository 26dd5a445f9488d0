"""The Merkle tree kept beside each dataset's head (``docs/ledger.md``, *Merkle tree*).

- ``datasets.merkle_json``: the frontier of the RFC 9162 tree over the dataset's ledger (the
  roots of the perfect subtrees the tree of ``last_seq`` leaves is made of,
  :meth:`odometer_core.ledger.merkle.Frontier.to_json`), moved in the transaction of every
  entry (:func:`app.services._aggregate.stage_entry`). Null only on a dataset with no entry.

The upgrade builds the frontier of every existing ledger from its entries' hashes, read in
``seq`` order in one streamed query: 0.9 s (SQLite) to 1.4 s (PostgreSQL) for one dataset of
10^5 entries, on a loaded two-core development machine, so about 10 s for 10^6;
a ledger whose sequence has a gap is refused (it would not verify either). The downgrade drops
the column: nothing else reads it.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from odometer_core.ledger.merkle import Frontier, entry_leaf_hash

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DATASETS = sa.table(
    "datasets",
    sa.column("id"),
    sa.column("last_seq"),
    sa.column("merkle_json", sa.JSON(none_as_null=True)),
)
ENTRIES = sa.table("ledger_entries", sa.column("dataset_id"), sa.column("seq"), sa.column("hash"))


def upgrade() -> None:
    op.add_column("datasets", sa.Column("merkle_json", sa.JSON(none_as_null=True)))
    bind = op.get_bind()
    heads = {row[0]: row[1] for row in bind.execute(sa.select(DATASETS.c.id, DATASETS.c.last_seq))}
    frontiers: dict[str, Frontier] = {}
    # streamed in batches (a server-side cursor on PostgreSQL): the statement's option, not
    # the connection's, which would stream alembic's own statements too
    rows = bind.execute(
        sa.select(ENTRIES.c.dataset_id, ENTRIES.c.seq, ENTRIES.c.hash)
        .order_by(ENTRIES.c.dataset_id, ENTRIES.c.seq)
        .execution_options(yield_per=10_000)
    )
    for dataset_id, seq, entry_hash in rows:
        frontier = frontiers.get(dataset_id)
        if frontier is None:
            frontier = frontiers[dataset_id] = Frontier()
        if seq != frontier.size + 1:
            raise RuntimeError(
                f"dataset {dataset_id}'s ledger has entry {seq} after {frontier.size}: "
                "a ledger with a gap has no tree (and does not verify)"
            )
        frontier.append(entry_leaf_hash(entry_hash))
    update = (
        sa.update(DATASETS)
        .where(DATASETS.c.id == sa.bindparam("key"))
        .values(merkle_json=sa.bindparam("doc"))
    )
    for dataset_id, frontier in frontiers.items():
        if frontier.size != heads.get(dataset_id):
            raise RuntimeError(
                f"dataset {dataset_id}'s ledger holds {frontier.size} entries but its head is "
                f"seq {heads.get(dataset_id)}"
            )
    if frontiers:
        bind.execute(
            update,
            [
                {"key": dataset_id, "doc": frontier.to_json()}
                for dataset_id, frontier in frontiers.items()
            ],
        )


def downgrade() -> None:
    op.execute("ALTER TABLE datasets DROP COLUMN merkle_json")
