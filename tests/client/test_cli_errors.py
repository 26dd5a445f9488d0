"""Bad invocations of the ``odometer`` command line: a non-zero exit and one line on stderr,
never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ODOMETER = Path(sys.executable).parent / "odometer"
#: A port nothing listens on: the client's transport error, not a server's answer.
NOWHERE = ["--url", "http://127.0.0.1:9", "--key", "k"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli-errors")
    (root / "binary.jsonl").write_bytes(b"\xff\xfe\x00")
    (root / "garbage.jsonl").write_text("this is not a ledger\n", "utf-8")
    return root


CASES = [
    (
        ["datasets", "create", "x"],
        "odometer datasets create: the following arguments are required: --epsilon, --delta "
        "(see odometer datasets create --help)",
    ),
    (["teleport"], "odometer: argument COMMAND: invalid choice: 'teleport'"),
    (
        ["principals", "create", "x", "--role", "king"],
        "odometer principals create: argument --role: invalid choice: 'king'",
    ),
    (["verify", "x", "--jobs", "7"], "odometer verify: argument --jobs: invalid choice: 7"),
    (
        ["verify", "{root}/missing.jsonl"],
        "odometer verify: cannot read {root}/missing.jsonl: No such file or directory",
    ),
    (["verify", "{root}"], "odometer verify: cannot read {root}: Is a directory"),
    (
        ["verify", "{root}/binary.jsonl"],
        "odometer verify: cannot read {root}/binary.jsonl: 'utf-8' codec",
    ),
    (
        [
            "verify",
            "{root}/garbage.jsonl",
            "--checkpoints",
            "{root}/none",
            "--public-key",
            "{root}/none",
        ],
        "odometer verify: cannot read the checkpoints or key:",
    ),
    (
        ["verify", "{root}/garbage.jsonl", "--checkpoints", "{root}/none"],
        "odometer verify: --checkpoints and --public-key go together",
    ),
    (
        ["checkpoint-keygen", "-o", "{root}/no/such/dir/key.pem"],
        "odometer: cannot create {root}/no/such/dir/key.pem: No such file or directory",
    ),
    (
        ["datasets", "create", "x", "--epsilon", "abc", "--delta", "1e-6", *NOWHERE],
        "error: 422 ValidationError: refused before sending: $.budget.epsilon:",
    ),
    (["datasets", "list", *NOWHERE], "error: GET /v1/datasets: ConnectError"),
    (
        ["orgs", "cap", "acme", "--epsilon", "1", *NOWHERE],
        "error: a cap needs both --epsilon and --delta",
    ),
    (
        ["grant", "ds_x", "prn_x", "--quota-epsilon", "1", *NOWHERE],
        "error: a quota needs both --quota-epsilon and --quota-delta",
    ),
    # partitioned datasets (JSON braces are doubled: every case is a format string)
    (
        ["blocks", "open", "ds_x", "2026-11-01", *NOWHERE],
        "odometer blocks open: the following arguments are required: TO "
        "(see odometer blocks open --help)",
    ),
    (
        ["blocks", "list", "ds_x", "--limit", "many"],
        "odometer blocks list: argument --limit: invalid int value: 'many'",
    ),
    (
        ["blocks", "list", "ds_x", "--limit", "5000", *NOWHERE],
        "error: 422 ValidationError: refused before sending: limit: must be 1 … 1000, got 5000",
    ),
    (
        ["register", "ds_x", "--mechanism", "{{}}", "--blocks", "a,,b", *NOWHERE],
        "error: --blocks: cannot read 'a,,b': give FROM..TO, KEY[,KEY…]",
    ),
    (
        ["preview", "ds_x", "--mechanism", "{{}}", "--blocks", "[1]", *NOWHERE],
        "error: --blocks must be a JSON object",
    ),
    (
        ["register", "ds_x", "--mechanism", "pure_dp", "--blocks", "all", *NOWHERE],
        "error: --mechanism is not JSON:",
    ),
    (
        ["register", "ds_x", "--mechanism", '{{"type": "pure_dp"}}', "--blocks", "all", *NOWHERE],
        "error: 422 ValidationError: refused before sending: $.mechanism",
    ),
    (
        ["datasets", "create", "x", "--epsilon", "1", "--delta", "0", "--partition", "{{day}}"],
        "error: --partition is not JSON:",
    ),
    (
        [
            *("datasets", "create", "x", "--epsilon", "1", "--delta", "0", *NOWHERE),
            *("--partition", '{{"kind": "hour", "unit": "record"}}'),
        ],
        "error: 422 ValidationError: refused before sending: $.partition.kind: must be one of",
    ),
]


@pytest.mark.parametrize(
    "argv,first", CASES, ids=[" ".join(c[0][:2]) + f"-{i}" for i, c in enumerate(CASES)]
)
def test_bad_invocation_is_one_line_and_a_failure(files: Path, argv: list[str], first: str) -> None:
    args = [a.format(root=files) for a in argv]
    proc = subprocess.run([str(ODOMETER), *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(first.format(root=files)), proc.stderr
    assert proc.stdout == ""
