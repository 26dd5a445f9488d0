"""``odometer witness`` and ``odometer verify --witness`` against real server processes, as an
operator meets them after restoring a backup (``docs/witness.md``): the server is stopped, its
SQLite file copied, more is registered and exported, the copy put back and the server started
again on the same witness directory. Then ``witness status`` names the dataset that is behind
(exit 1), a registration is refused with ``LedgerBehindWitness``, ``witness import`` of the
export brings the ledger back to the witnessed head (and the dataset serves again), a second
dataset's loss is acknowledged instead, and ``verify --witness`` accepts the pre-restore export
and refuses the restored ledger's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from odometer_client import OdometerClient
from odometer_client import declarations as d
from odometer_client.cli import main
from tests.client.conftest import FAST_RETRY
from tests.concurrency.server import Server, start_server
from tests.support import ADMIN_KEY, fresh_database

PURE = d.pure_dp("0.01")
PURE_JSON = json.dumps({"type": "pure_dp", "epsilon": "0.01"})


def _cli(server: Server, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main([*argv, "--url", server.base_url, "--key", ADMIN_KEY])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _register(server: Server, dataset_id: str, n: int) -> None:
    with OdometerClient(server.base_url, ADMIN_KEY, retry=FAST_RETRY) as client:
        for _ in range(n):
            client.register(dataset_id, PURE)


def test_an_operator_recovers_a_restored_database_with_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    witness = tmp_path / "witness"
    env = {"ODOMETER_WITNESS_DIR": str(witness), "ODOMETER_WITNESS_LAG_SECONDS": "0"}
    with fresh_database("sqlite", tmp_path) as backend:
        db_file = Path(backend.url.removeprefix("sqlite:///"))
        log = tmp_path / "server.log"

        server = start_server(backend.url, log, env=env)
        try:
            with OdometerClient(server.base_url, ADMIN_KEY, retry=FAST_RETRY) as client:
                imported = client.create_dataset("imported", epsilon="1", delta="0").id
                acknowledged = client.create_dataset("acknowledged", epsilon="1", delta="0").id
                untouched = client.create_dataset("untouched", epsilon="1", delta="0").id
            for ds in (imported, acknowledged, untouched):
                _register(server, ds, 2)
        finally:
            server.stop()
        backup = tmp_path / "backup.db"
        shutil.copyfile(db_file, backup)  # the server is stopped: the file is consistent

        server = start_server(backend.url, log, env=env)
        try:
            _register(server, imported, 3)
            _register(server, acknowledged, 1)
            code, out = _cli(server, capsys, "witness", "status")
            assert (code, out.splitlines()[-1]) == (0, "no dataset is behind the witness")
            export = tmp_path / "imported.jsonl"
            assert _cli(server, capsys, "export", imported, "-o", str(export))[0] == 0
            with OdometerClient(server.base_url, ADMIN_KEY, retry=FAST_RETRY) as client:
                before = client.get_dataset(imported).raw["status"]
        finally:
            server.stop()

        for suffix in ("-wal", "-shm"):  # the restore: the backup, and nothing of the later log
            Path(f"{db_file}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(backup, db_file)

        server = start_server(backend.url, log, env=env)
        try:
            code, out = _cli(server, capsys, "witness", "status")
            assert code == 1, out
            rows = [line.split() for line in out.splitlines()[3:] if line.strip()]
            behind = {row[0]: row[-2:] for row in rows}
            assert behind == {imported: ["6", "3"], acknowledged: ["4", "3"]}, out

            code, out = _cli(server, capsys, "register", imported, "--mechanism", PURE_JSON)
            assert code == 1 and "behind" in out.lower(), out
            _register(server, untouched, 1)  # the others serve

            # the restored ledger does not reach the witnessed head: verify says so
            restored = tmp_path / "restored.jsonl"
            assert _cli(server, capsys, "export", imported, "-o", str(restored))[0] == 0
            assert main(["verify", str(restored), "--witness", str(witness), "--unpinned"]) != 0
            capsys.readouterr()
            assert main(["verify", str(export), "--witness", str(witness), "--unpinned"]) == 0
            capsys.readouterr()

            code, out = _cli(server, capsys, "witness", "import", imported, str(export))
            assert code == 0, out
            assert "imported 3 entries" in out and "seq 6" in out, out
            code, out = _cli(
                server, capsys, "witness", "acknowledge", acknowledged, "--reason", "restore test"
            )
            assert code == 0, out
            assert "loss of entries 4..4 acknowledged" in out, out

            code, out = _cli(server, capsys, "witness", "status")
            assert (code, out.splitlines()[-1]) == (0, "no dataset is behind the witness")
            with OdometerClient(server.base_url, ADMIN_KEY, retry=FAST_RETRY) as client:
                assert client.get_dataset(imported).raw["status"] == before
            _register(server, imported, 1)
            _register(server, acknowledged, 1)
        finally:
            server.stop()
