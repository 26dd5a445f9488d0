"""A partitioned dataset's certified reading, maintained: the highest over every block ever opened.

Before this revision a partitioned dataset's reading was the highest over its *open* blocks,
read by a scan of its runs, so retiring a charged block lowered it (and a budget could then be
lowered below what was released about that block's records). From this revision on the
dataset's aggregate (``datasets.state_json``, ``{"blocks": {…}}``) carries ``highest``: the
highest certified reading any block ever opened has had, retired ones included
(:mod:`odometer_core.ledger.blocks`), kept by every write and never lowered.

The runs of blocks retired before the upgrade are gone, so their readings are recomputed from
the only record that still holds them, the dataset's ledger: a replay
(:class:`odometer_core.ledger.replay.Replayer`) re-runs every entry and maintains ``highest``
exactly as the service does from now on. A replay that stops at a mismatch (a ledger that does
not verify) keeps what it reached, raised to the readings of the runs open now, so the value is
never below either; ``odometer verify`` reports the mismatch as before.

A downgrade refuses while a partitioned dataset exists: revision 0007 would write entries without
the maintained reading after entries that carry it, which a replay refuses (it accepts entries
without it only before the first that carries it).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Json = sa.JSON(none_as_null=True)

DATASETS = sa.table(
    "datasets",
    sa.column("id"),
    sa.column("partition_json", Json),
    sa.column("config_json", Json),
    sa.column("state_json", Json),
)
RUNS = sa.table(
    "block_runs",
    sa.column("dataset_id"),
    sa.column("lo"),
    sa.column("hi"),
    sa.column("state_json", Json),
)
#: The ledger's columns as an entry is exported (the hashed payload plus ``hash``).
_JSON_FIELDS = (
    "declaration",
    "request",
    "charge",
    "requested",
    "refund",
    "reservation",
    "config",
    "state",
    "org",
    "quota",
)
_TEXT_FIELDS = (
    "dataset_id",
    "seq",
    "kind",
    "invocation_id",
    "actor",
    "at",
    "accounting_version",
    "reason",
    "prev_hash",
    "hash",
)
LEDGER = sa.table(
    "ledger_entries",
    *(sa.column(name) for name in _TEXT_FIELDS),
    *(sa.column(name, Json) for name in _JSON_FIELDS),
)
#: How many entries one read holds (a ledger of any length is replayed in bounded memory).
BATCH = 2000


def _entries(bind: sa.Connection, dataset_id: str) -> Iterator[dict[str, Any]]:
    after = 0
    while True:
        rows = (
            bind.execute(
                sa.select(LEDGER)
                .where(LEDGER.c.dataset_id == dataset_id, LEDGER.c.seq > after)
                .order_by(LEDGER.c.seq)
                .limit(BATCH)
            )
            .mappings()
            .all()
        )
        if not rows:
            return
        for row in rows:
            entry = dict(row)
            entry["seq"] = int(entry["seq"])
            yield entry
        after = int(rows[-1]["seq"])


def highest_by_replay(bind: sa.Connection, dataset_id: str) -> dict[str, Any] | None:
    """The dataset's maintained reading as a replay of its ledger recomputes it, raised to the
    readings of the runs open now (which equal the replay's when the ledger verifies)."""
    from odometer_core.accounting import config_from_json, state_from_json
    from odometer_core.ledger.blocks import BlockHistory, higher, reading_of
    from odometer_core.ledger.replay import Replayer

    replayer = Replayer(check_chain=False)
    for entry in _entries(bind, dataset_id):
        replayer.feed(entry)
        if replayer.stopped:
            break
    state = replayer.state
    highest = state.aggregate.highest if isinstance(state, BlockHistory) else None
    row = bind.execute(
        sa.select(DATASETS.c.config_json).where(DATASETS.c.id == dataset_id)
    ).scalar_one()
    config = config_from_json(row)
    runs = bind.execute(sa.select(RUNS.c.state_json).where(RUNS.c.dataset_id == dataset_id))
    for (state_json,) in runs.all():
        highest = higher(highest, reading_of(config, state_from_json(config, state_json)))
    return highest


def recompute(bind: sa.Connection) -> dict[str, dict[str, Any] | None]:
    """Write every partitioned dataset's maintained reading, recomputed by
    :func:`highest_by_replay`, into its aggregate; returns them by dataset."""
    found: dict[str, dict[str, Any] | None] = {}
    partitioned = bind.execute(
        sa.select(DATASETS.c.id, DATASETS.c.state_json).where(
            DATASETS.c.partition_json.is_not(None)
        )
    ).all()
    for dataset_id, state_json in partitioned:
        part = dict(state_json["blocks"])
        part["highest"] = found[dataset_id] = highest_by_replay(bind, dataset_id)
        bind.execute(
            DATASETS.update()
            .where(DATASETS.c.id == dataset_id)
            .values(state_json={**state_json, "blocks": part})
        )
    return found


def upgrade() -> None:
    recompute(op.get_bind())


def downgrade() -> None:
    bind = op.get_bind()
    found = bind.execute(
        sa.select(DATASETS.c.id).where(DATASETS.c.partition_json.is_not(None)).limit(1)
    ).first()
    if found is not None:
        raise RuntimeError(
            f"dataset {found[0]} is partitioned: revision 0007 would write its ledger without "
            "the maintained reading after entries that carry it, and lower its reading when a "
            "block is retired"
        )
