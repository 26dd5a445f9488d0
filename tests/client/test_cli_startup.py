"""The ``odometer`` command line starts light: building its parser loads every installed
plug-in (``verify`` and the receipts commands of the core, the operator commands of the
server), and none of them may import the accounting core, the ledger, scipy or the server's
stack to do so. Each command imports what it needs when it runs (a user's every command and
the suite's hundreds of ``odometer`` subprocesses paid about a second of CPU each when the
plug-in imported the verifier)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

#: Modules (and their submodules) that no plug-in's registration may import.
HEAVY = (
    "numpy",
    "scipy",
    "dp_accounting",
    "cryptography",
    "sqlalchemy",
    "fastapi",
    "odometer_core.accounting",
    "odometer_core.ledger",
    "odometer_core.verify",
    "odometer_core.verify_receipts",
    "app.main",
)

#: Runs ``odometer ARGV`` in a fresh interpreter and reports what it imported, its exit code
#: and its output.
PROBE = """
import contextlib, io, json, sys
import odometer_client.cli as cli
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        code = cli.main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue(),
                  "modules": sorted(sys.modules)}))
"""


def _probe(*argv: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"COLUMNS": "200", "PATH": ""},
    )
    found: dict[str, Any] = json.loads(proc.stdout)
    return found


def _heavy(modules: list[str]) -> list[str]:
    """The entries of :data:`HEAVY` that ``modules`` holds (or a submodule of)."""
    return [h for h in HEAVY if any(m == h or m.startswith(h + ".") for m in modules)]


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["--help"], 0),
        (["verify", "--help"], 0),
        (["verify", "--jobs", "9", "x.jsonl"], 2),  # a usage error
        (["verify-receipt", "r.json"], 2),  # --head missing
        (["datasets", "show"], 2),
    ],
)
def test_building_the_parser_imports_no_heavy_module(argv: list[str], code: int) -> None:
    found = _probe(*argv)
    assert found["code"] == code
    # every plug-in loaded (a broken one is skipped with a line on stderr: not light, gone)
    assert "unavailable" not in found["stderr"], (
        f"{found['stderr']} (an installed entry point is stale: reinstall with `make dev`)"
    )
    assert _heavy(found["modules"]) == []
    assert {"odometer_core.verify_cli", "app.cli"} <= set(found["modules"])


def test_every_plugin_command_is_on_the_light_parser() -> None:
    found = _probe("--help")
    commands = found["stdout"].split("positional arguments:")[1]
    for command in (
        "verify",
        "verify-organisation",
        "verify-receipt",
        "witness-keygen",
        "checkpoint-keygen",
        "create-key",
        "bootstrap-admin",
        "openapi",
    ):
        assert f"\n    {command} " in commands or f"\n    {command}\n" in commands, command


def test_a_command_that_runs_imports_what_it_needs() -> None:
    """The run function, not the registration, loads the verifier: the same command with a
    file to read gets as far as reading it."""
    found = _probe("verify", "/nonexistent/x.jsonl")
    assert found["code"] == (
        "odometer verify: cannot read /nonexistent/x.jsonl: No such file or directory"
    )
    assert "odometer_core.verify" in found["modules"]
