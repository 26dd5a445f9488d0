"""What a partitioned dataset's ledger records of its blocks, and how a replay rebuilds them.

A partitioned dataset's ledger has no per-block rows. An entry records the *selection* it acted
on (``request.blocks``: half-open block-index ranges, "every open block" already resolved) and
the dataset's aggregate state after it (:class:`Partitioned`, the entry's ``state``):

- ``open``: how many blocks are open, and ``runs``: how many runs of equal history hold them
  (the interval map of :mod:`odometer_core.accounting.blocks`);
- ``opened``: every block ever opened, as ranges (a retired block is never opened again);
- ``digest``: the SHA-256 of the canonical JSON of the touched blocks' states after the entry,
  ``[[lo, hi, state], …]`` clipped to the selection (to every open block after a budget
  change; to the range opened or retired).

:func:`replay_blocks` re-runs one entry on the blocks a replay holds and checks all four, so a
replay rebuilds every block's state from the selections alone and matches it against what the
service wrote.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from odometer_core.accounting import AccountingConfig, initial_state, state_to_json
from odometer_core.accounting.blocks import Blocks, Range, normalise_or_empty
from odometer_core.ledger.chain import canonical_bytes

#: The key of the selection in an entry's ``request``.
BLOCKS = "blocks"


def touched_digest(blocks: Blocks, ranges: Sequence[Range]) -> str:
    """The SHA-256 hex digest of the states of ``blocks`` within ``ranges``, clipped to them."""
    pieces = [
        [run.lo, run.hi, state_to_json(run.state)]
        for lo, hi in ranges
        for run in blocks.pieces(lo, hi)
    ]
    return hashlib.sha256(canonical_bytes(pieces)).hexdigest()


def ranges_json(ranges: Sequence[Range]) -> list[list[int]]:
    return [[lo, hi] for lo, hi in ranges]


def ranges_from_json(obj: object) -> tuple[Range, ...]:
    if not isinstance(obj, list):
        raise ValueError("a block selection is a list of [lo, hi] ranges")
    return tuple((int(lo), int(hi)) for lo, hi in obj)


@dataclass(frozen=True, slots=True)
class Partitioned:
    """A partitioned dataset's aggregate state (what its row and each entry's ``state``
    hold). ``blocks`` is every open block's state when a replay holds it, the touched window
    when the service does (the runs live in their own table)."""

    open: int
    runs: int
    opened: tuple[Range, ...]
    digest: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            BLOCKS: {
                "open": self.open,
                "runs": self.runs,
                "opened": ranges_json(self.opened),
                "digest": self.digest,
            }
        }

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> Partitioned:
        part = obj[BLOCKS]
        return Partitioned(
            int(part["open"]),
            int(part["runs"]),
            ranges_from_json(part["opened"]),
            part["digest"],
        )

    def opening(self, lo: int, hi: int, digest: str) -> Partitioned:
        """After ``[lo, hi)`` is opened (never opened before: checked by the caller)."""
        return Partitioned(
            self.open + hi - lo,
            self.runs,
            normalise_or_empty([*self.opened, (lo, hi)]),
            digest,
        )

    def ever_opened(self, lo: int, hi: int) -> bool:
        """Whether a block of ``[lo, hi)`` was ever opened."""
        return any(a < hi and lo < b for a, b in self.opened)


def is_partitioned(state: Mapping[str, Any]) -> bool:
    """Whether a dataset's stored state is a partitioned dataset's aggregate."""
    return BLOCKS in state


def fresh_blocks(config: AccountingConfig, lo: int, hi: int, blocks: Blocks) -> Blocks:
    """``blocks`` with ``[lo, hi)`` opened, nothing spent."""
    return blocks.open(lo, hi, initial_state(config))


__all__ = [
    "BLOCKS",
    "BlockHistory",
    "Partitioned",
    "fresh_blocks",
    "is_partitioned",
    "ranges_from_json",
    "ranges_json",
    "touched_digest",
]


@dataclass(frozen=True, slots=True)
class BlockHistory:
    """What a replay holds of a partitioned dataset: its aggregate and every open block."""

    aggregate: Partitioned
    blocks: Blocks

    def to_json(self) -> dict[str, Any]:
        return self.aggregate.to_json()
