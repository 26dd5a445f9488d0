"""Mixed-lifecycle load: 32 clients doing random registrations, settlements,
cancellations, previews, budget changes and idempotent replays over ten datasets in every
accounting mode, against a two-worker server, while an auditor polls status and the ledgers.

Every state observed - each polled status and the state after every ledger entry - is within
budget in its mode's own units (exact Decimal comparisons), each polled status equals the one
recomputed from the replayed ledger at that ``seq``, every replay is byte-identical, and at
the end every ledger holds exactly the writes the clients were told about and replays
cleanly (driver and checks: ``tests/concurrency/lifecycle.py``).

Size: 32 × ``ODOMETER_LIFECYCLE_OPS`` operations (default 50: about 30 s per backend on a busy
2-core machine; 32 × 100 took 45-60 s); ``ODOMETER_LONG_TESTS=1`` runs the full 32 × 500.
The seed is printed; ``ODOMETER_LIFECYCLE_SEED`` replays a run's client choices.

Shown to fail: ``ODOMETER_TEST_BROKEN_BUILD=forget_refunds`` (settle and cancel leave the
worst-case ε reserved; see ``tests/concurrency/broken_builds.py``) fails on both backends:
the auditor's replay reports e.g. ``invocation_settled: recomputed state ... stored state
...`` for every basic and split-basic dataset, and the polled statuses that follow no longer
match the replay.

It also found a real bug: at 32 × 500 an ``rdp`` budget change could leave every order dead
(dead orders were counted as fitting the new budget); fixed in
``core/odometer_core/accounting/modes/rdp.py``
``_over_budget``, regression test ``tests/reliability/test_rdp_budget_change.py``.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from tests.concurrency.broken_builds import server_factory
from tests.concurrency.lifecycle import run_lifecycle
from tests.concurrency.server import running_server
from tests.support import Backend

CLIENTS = 32
PER_CLIENT = (
    500
    if os.environ.get("ODOMETER_LONG_TESTS") == "1"
    else int(os.environ.get("ODOMETER_LIFECYCLE_OPS", "50"))
)
WORKERS = 2


def test_mixed_lifecycle_stays_within_budget_and_replays(
    fresh_backend: Backend, tmp_path: Path
) -> None:
    seed = int(os.environ.get("ODOMETER_LIFECYCLE_SEED", random.randrange(2**32)))
    factory = server_factory()
    with running_server(
        fresh_backend.url, tmp_path / "server.log", workers=WORKERS, factory=factory, preload=True
    ) as server:
        result = run_lifecycle(server.base_url, clients=CLIENTS, per_client=PER_CLIENT, seed=seed)
    print(f"\n[{fresh_backend.name} {factory}] {result.summary()}")
    assert result.problems() == [], result.problems()[:20]
    # the run did what it is meant to: every mode admitted, reserved, rejected, settled ...
    for kind in (
        "invocation_accepted",
        "invocation_reserved",
        "invocation_rejected",
        "invocation_settled",
        "invocation_cancelled",
        "budget_changed",
    ):
        assert result.kinds[kind] > 0, (kind, result.kinds)
    assert result.tally.ops["total"] == CLIENTS * PER_CLIENT
    assert result.entries_checked == sum(result.kinds.values())
    assert result.statuses_matched > 0
