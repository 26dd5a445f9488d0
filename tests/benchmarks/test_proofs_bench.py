"""Smoke test of ``python -m benchmarks proofs`` on a small ledger, on SQLite and on the
PostgreSQL the suite tests against: revision 0013 builds the stored subtree roots of every
complete subtree at least 2^8 entries high, a server of this checkout serves both kinds of proof
(a refusal fails the run), and every proof the benchmark times in process is verified by the
core's verifiers inside it (an assertion there fails the run)."""

from __future__ import annotations

import re

import pytest

from benchmarks.proofs import main
from tests.support import PG_SKIP_REASON, postgres_url

pytestmark = pytest.mark.skipif(postgres_url() is None, reason=PG_SKIP_REASON)


def test_proofs_benchmark_builds_the_stored_roots_and_serves_proofs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--entries", "3000", "--proofs", "5", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    # 3,000 leaves: 11 subtrees of 256, 5 of 512, 2 of 1,024 and 1 of 2,048 are complete
    assert out.count("revision 0013: 19 stored roots built") == 2
    assert len(re.findall(r"this checkout (proof|consistency) +p50 .* server CPU", out)) == 4
    # an inclusion proof at 3,000 leaves has at most ⌈log2 3000⌉ = 12 hashes of 32 bytes
    largest = re.search(r"in process, inclusion proof.*'hashes': (\d+), 'raw': (\d+)", out)
    assert largest is not None
    hashes, raw = map(int, largest.groups())
    assert hashes <= 12 and raw == 32 * hashes
    assert out.count("a proof at the head after 1208 entries not caught up") == 2
