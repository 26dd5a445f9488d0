"""The ledger: every decision of a dataset's budget, append-only and hash-chained.

A pure package (it imports the accounting core, nothing of the web, the database, the services
or the client; checked by the layer contracts in ``pyproject.toml``), shared by the service,
the command line, the Python client and the offline verifier:

- :mod:`odometer_core.ledger.entry`: :class:`EntryKind`, the typed :class:`Entry` and the one
builder
  :func:`next_entry` that chains an entry to its dataset's head;
- :mod:`odometer_core.ledger.chain`: the canonical encoding, the entry hash and the chain walker;
- :mod:`odometer_core.ledger.formats`: the export formats (JSON, JSON lines, CSV), written and read;
- :mod:`odometer_core.ledger.replay`: the replay of a ledger through the accounting core;
- :mod:`odometer_core.ledger.resume`: a replay's position as JSON, to resume a verification;
- :mod:`odometer_core.ledger.checkpoints`: signed checkpoints of a head and their offline audit.
- :mod:`odometer_core.ledger.merkle`: the RFC 9162 Merkle tree over a ledger's entries, its
  incremental frontier, inclusion and consistency proofs and their verification;
- :mod:`odometer_core.ledger.notes`: signed notes (C2SP signed-note) and the tree heads in them
  (C2SP tlog-checkpoint), signed with the checkpoint key and cosigned by others.
"""

from odometer_core.ledger.chain import (
    GENESIS_HASH,
    PAYLOAD_FIELDS,
    ChainProblem,
    ChainWalker,
    entry_hash,
    output_digest,
)
from odometer_core.ledger.checkpoints import CheckpointAudit, Signer
from odometer_core.ledger.entry import Entry, EntryContent, EntryKind, next_entry
from odometer_core.ledger.replay import Replayer, ReplayVerdict, replay

__all__ = [
    "GENESIS_HASH",
    "PAYLOAD_FIELDS",
    "ChainProblem",
    "ChainWalker",
    "CheckpointAudit",
    "Entry",
    "EntryContent",
    "EntryKind",
    "ReplayVerdict",
    "Replayer",
    "Signer",
    "entry_hash",
    "next_entry",
    "output_digest",
    "replay",
]
