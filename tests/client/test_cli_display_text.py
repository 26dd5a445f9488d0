"""The command line prints the server's text for an amount (issue 48: one rounding for display,
the core's, on the server): never a rounding of its own. An ε whose text differs up and down
(0.1234567891: spent 0.123457, given back or left 0.123456) and a budget whose 6-digit text
(down) is not what the command line's old 8-digit rounding printed (up): 1.9876543219 reads
1.98765 (the old rounding printed 1.9876544)."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from odometer_client import OdometerClient
from odometer_client import declarations as d
from tests.client.live import ADMIN_KEY, Server


def _run(server: Server, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main([*argv, "--url", server.base_url, "--key", ADMIN_KEY])
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def _row(out: str, key: str) -> str:
    (line,) = [line for line in out.splitlines() if line.startswith(key)]
    return line[len(key) :].strip()


def test_the_command_line_prints_the_server_s_text(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    created = _run(
        server, capsys, "datasets", "create", "cli-text", "--epsilon", "1.9876543219",
        "--delta", "0", "--json",
    )  # fmt: skip
    ds = json.loads(created)["id"]
    client.register(ds, d.pure_dp("0.1234567891"))
    sent = client.get_dataset(ds).raw["status"]["shown"]
    assert sent["budget"] == {"epsilon": "1.98765", "delta": "0"}
    listed = _run(server, capsys, "datasets", "list")
    (row,) = [line.split("  ") for line in listed.splitlines() if line.startswith(ds)]
    assert "ε=1.98765 δ=0" in row  # the budget: down, the server's text
    report = _run(server, capsys, "report", ds)
    assert _row(report, "budget:") == "epsilon=1.98765, delta=0"
    assert _row(report, "spent:") == "epsilon=0.123457, delta=0"  # up
    # 1.9876543219 - 0.1234567891 = 1.8641975328 left: down
    assert _row(report, "remaining:") == "epsilon=1.86419, delta=0"
    (charged,) = [line.split() for line in report.splitlines() if line.startswith("admin ")]
    assert charged[-3:] == ["0.123457", "0", "0"]  # net charge up, refunded (none)
    exact = _run(server, capsys, "report", ds, "--exact")
    assert _row(exact, "budget:") == "epsilon=1.9876543219, delta=0"
    assert _row(exact, "remaining:") == "epsilon=1.8641975328, delta=0"
