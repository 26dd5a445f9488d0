"""``odometer export`` and ``odometer verify`` agree: whatever ``export`` writes by default,
``verify`` reads, through the installed command line against a live server; the format is the
one the file's name says (``.json`` is JSON, as the client's ``export()`` writes by default,
``.csv`` CSV), else JSON lines, which ``verify`` streams."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from odometer_client import OdometerClient
from odometer_client import declarations as d
from odometer_client.cli import main
from tests.client.live import ADMIN_KEY, Server

ODOMETER = Path(sys.executable).parent / "odometer"
ENV = {k: v for k, v in os.environ.items() if k not in ("ODOMETER_URL", "ODOMETER_API_KEY")}


def _odometer(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ODOMETER), *argv], capture_output=True, text=True, timeout=120, env=ENV, check=False
    )


@pytest.fixture
def busy(client: OdometerClient) -> str:
    """A dataset with a reservation settled, a Gaussian and a refusal: 5 entries."""
    ds = client.create_dataset(f"export-{uuid.uuid4().hex[:8]}", "2", "0.00001")
    with client.reserve(ds, d.svt("0.1", "0.3", 3)) as r:
        r.settle("tops=1")
    client.register(ds, d.gaussian("4"))
    with pytest.raises(Exception):  # noqa: B017 - any refusal will do
        client.register(ds, d.gaussian("0.1"))
    return ds.id


def test_export_by_default_is_what_verify_reads_best(
    server: Server, client: OdometerClient, busy: str, tmp_path: Path
) -> None:
    live = ("--url", server.base_url, "--key", ADMIN_KEY)
    path = tmp_path / "ledger.jsonl"
    proc = _odometer("export", busy, "-o", str(path), *live)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == f"wrote 5 entries of {busy} to {path} (jsonl)\n"
    lines = path.read_text("utf-8").splitlines()
    assert [json.loads(line)["seq"] for line in lines[:-1]] == [1, 2, 3, 4, 5]  # JSON lines
    assert json.loads(lines[-1])["head"]["seq"] == 5  # closed by the head (unsigned here)
    proc = _odometer("verify", str(path), "--unpinned")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdict = json.loads(proc.stdout)
    head = client.get_dataset(busy).head_hash
    assert verdict["ok"] and verdict["entries"] == 5 and verdict["head_hash"] == head


@pytest.mark.parametrize(
    ("name", "format"),
    [
        ("ledger.json", "json"),
        ("LEDGER.CSV", "csv"),
        ("ledger.jsonl", "jsonl"),
        ("ledger", "jsonl"),
    ],
)
def test_the_default_format_is_the_one_the_name_says_and_verifies(
    server: Server,
    client: OdometerClient,
    busy: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    format: str,
) -> None:
    path = tmp_path / name
    code = main(["export", busy, "-o", str(path), "--url", server.base_url, "--key", ADMIN_KEY])
    assert code == 0
    assert capsys.readouterr().out == f"wrote 5 entries of {busy} to {path} ({format})\n"
    saved = tmp_path / f"client.{format}"
    assert client.export(busy, saved, format) == 5  # type: ignore[arg-type]
    assert path.read_bytes() == saved.read_bytes()  # the file the client saves in that format
    assert main(["verify", str(path), "--unpinned"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["ok"] and verdict["entries"] == 5


def test_the_clients_default_export_is_what_export_writes_to_a_json_file(
    server: Server, client: OdometerClient, busy: str, tmp_path: Path
) -> None:
    """The client's ``export()`` and ``odometer export -o FILE`` choose the format by the same
    rule (before, the client wrote JSON and the command JSON lines, whatever the name): JSON for
    ``.json``, JSON lines for a name without a known suffix."""
    for name in ("ledger.out", "ledger.ndjson"):
        plain, by_command = tmp_path / f"client-{name}", tmp_path / f"cli-{name}"
        assert client.export(busy, plain) == 5
        proc = _odometer(
            "export", busy, "-o", str(by_command), "--url", server.base_url, "--key", ADMIN_KEY
        )
        assert proc.returncode == 0, proc.stderr
        assert plain.read_bytes() == by_command.read_bytes()
        assert len(plain.read_text("utf-8").splitlines()) == 6  # JSON lines, then the head
    by_client, by_cli = tmp_path / "client.json", tmp_path / "cli.json"
    assert client.export(busy, by_client) == 5
    proc = _odometer(
        "export", busy, "-o", str(by_cli), "--url", server.base_url, "--key", ADMIN_KEY
    )
    assert proc.returncode == 0, proc.stderr
    assert by_cli.read_bytes() == by_client.read_bytes()
    assert json.loads(by_cli.read_text("utf-8"))["dataset_id"] == busy
    live = ("--url", server.base_url, "--key", ADMIN_KEY)
    proc = _odometer("export", busy, "-o", str(by_cli), "--format", "jsonl", "--json", *live)
    assert proc.returncode == 0 and json.loads(proc.stdout)["format"] == "jsonl"
    assert _odometer("verify", str(by_cli), "--unpinned").returncode == 0
