"""Bad invocations of the ``odometer`` command line: a non-zero exit and one line on stderr
that says what to do, never a traceback. The command line's own lines all begin ``error: ``
(usage errors too); the plug-ins' (``verify``, the operator commands) name their command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from odometer_client import OdometerClient
from tests.client.forked_cli import ForkedCli
from tests.client.live import ADMIN_KEY, Server

ODOMETER = Path(sys.executable).parent / "odometer"
#: A port nothing listens on: the client's transport error, not a server's answer.
NOWHERE = ["--url", "http://127.0.0.1:9", "--key", "k"]
#: The live server (the session's ``server`` fixture, started only for the rows naming it).
LIVE = ["--url", "{url}", "--key", "{key}"]
#: A dataset id as the server makes them (used as is: no lookup by name).
DS = "ds_" + "0" * 32
#: What the command line may read of its environment: neither a URL nor a key.
ENV = {k: v for k, v in os.environ.items() if k not in ("ODOMETER_URL", "ODOMETER_API_KEY")}


@pytest.fixture(scope="module")
def cli() -> Iterator[ForkedCli]:
    """The command line imported once, forked per run (some fifty fresh interpreters cost
    0.3-1 s of CPU each, the verifier's imports the most); the SIGPIPE test below still
    starts the console script."""
    runner = ForkedCli(ENV, preload=["odometer_core.verify", "odometer_core.verify_receipts"])
    yield runner
    runner.close()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli-errors")
    (root / "binary.jsonl").write_bytes(b"\xff\xfe\x00")
    (root / "garbage.jsonl").write_text("this is not a ledger\n", "utf-8")
    (root / "empty.jsonl").write_text("", "utf-8")
    (root / "other.json").write_text(json.dumps({"datasets": []}), "utf-8")
    (root / "numbers.json").write_text("[1, 2, 3]", "utf-8")
    return root


#: (argv, the start of the one stderr line[, the exit status])
CASES: list[tuple[Any, ...]] = [
    (
        ["datasets", "create", "x"],
        "error: the following arguments are required: --epsilon, --delta "
        "(see odometer datasets create --help)",
        2,
    ),
    (["teleport"], "error: argument COMMAND: invalid choice: 'teleport'", 2),
    (
        ["principals", "create", "x", "--role", "king"],
        "error: argument --role: invalid choice: 'king'",
        2,
    ),
    (["verify", "x", "--jobs", "7"], "error: argument --jobs: invalid choice: 7", 2),
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
    # the service cannot be reached; no key; a URL that is not one
    (
        ["datasets", "list", *NOWHERE],
        "error: cannot reach the service at http://127.0.0.1:9 (connection refused): "
        "is it running? Start it with `make run`, or point --url or $ODOMETER_URL at it\n",
        1,
    ),
    (
        ["datasets", "list", "--url", "http://127.0.0.1:9"],
        "error: no API key given: pass --key KEY or set $ODOMETER_API_KEY "
        "(`make run` prints the demo admin key)\n",
        2,
    ),
    (
        ["datasets", "show", "demo", "--url", "127.0.0.1:9", "--key", "k"],
        "error: --url '127.0.0.1:9' is not a service URL (http://127.0.0.1:9?): "
        "give http://HOST:PORT (default http://127.0.0.1:8000)\n",
        2,
    ),
    (["datasets", "list", "--url", "{url}", "--key", "wrong"], "error: 401 Unauthorized: ", 1),
    # --url and --key before the subcommand too; given in both places, the subcommand's wins
    (
        ["--url", "http://127.0.0.1:9", "--key", "k", "datasets", "list"],
        "error: cannot reach the service at http://127.0.0.1:9 (",
        1,
    ),
    (
        ["--url", "{url}", "--key", "{key}", "datasets", "list", "--url", "http://127.0.0.1:9"],
        "error: cannot reach the service at http://127.0.0.1:9 (",
        1,
    ),
    (
        ["--key", "{key}", "datasets", "list", "--url", "{url}", "--key", "wrong"],
        "error: 401 Unauthorized: invalid API key: check --key or $ODOMETER_API_KEY\n",
        1,
    ),
    # a dataset by id or by name: a name no dataset has (several: test below)
    (
        ["report", "no-such-dataset-name", *LIVE],
        "error: no dataset 'no-such-dataset-name' (by id or name) is visible to this key: "
        "`odometer datasets list` shows them\n",
        1,
    ),
    (
        ["datasets", "show", "ds_no_such_id", *LIVE],
        "error: 404 NotFound: dataset 'ds_no_such_id' not found\n",
        1,
    ),
    (
        ["export", DS, "-o", "{root}/no/such/dir/x.jsonl", *NOWHERE],
        "error: cannot write {root}/no/such/dir/x.jsonl: No such file or directory: "
        "give -o a writable path\n",
        1,
    ),
    # files that are not ledger exports (missing, a directory, binary: above)
    (
        ["verify", "{root}/garbage.jsonl"],
        "odometer verify: {root}/garbage.jsonl is not a ledger export (neither JSON nor CSV "
        "with an "
        "export's columns): give the JSON, JSONL or CSV file `odometer export DATASET -o FILE` "
        "writes\n",
        1,
    ),
    (
        ["verify", "{root}/empty.jsonl"],
        "odometer verify: {root}/empty.jsonl is not a ledger export (it is empty)",
    ),
    (
        ["verify", "{root}/other.json"],
        "odometer verify: {root}/other.json is not a ledger export (a JSON object without "
        "'entries'): ",
        1,
    ),
    (
        ["verify", "{root}/numbers.json"],
        "odometer verify: {root}/numbers.json is not a ledger export (its entries are not JSON "
        "objects): ",
        1,
    ),
    (
        ["orgs", "cap", "acme", "--epsilon", "1", *NOWHERE],
        "error: a cap needs both --epsilon and --delta",
    ),
    (
        ["grant", DS, "prn_x", "--quota-epsilon", "1", *NOWHERE],
        "error: a quota needs both --quota-epsilon and --quota-delta",
    ),
    # partitioned datasets (JSON braces are doubled: every case is a format string)
    (
        ["blocks", "open", "ds_x", "2026-11-01", *NOWHERE],
        "error: the following arguments are required: TO (see odometer blocks open --help)",
        2,
    ),
    (
        ["blocks", "list", "ds_x", "--limit", "many"],
        "error: argument --limit: invalid int value: 'many' (see odometer blocks list --help)",
        2,
    ),
    (
        ["blocks", "list", DS, "--limit", "5000", *NOWHERE],
        "error: 422 ValidationError: refused before sending: limit: must be 1 … 1000, got 5000",
    ),
    (
        ["register", "ds_x", "--mechanism", "{{}}", "--blocks", "a,,b", *NOWHERE],
        "error: --blocks: cannot read 'a,,b': give FROM..TO, KEY[,KEY…]",
        2,
    ),
    (
        ["preview", "ds_x", "--mechanism", "{{}}", "--blocks", "[1]", *NOWHERE],
        "error: --blocks must be a JSON object, not an array: give a JSON object in single "
        'quotes, e.g. \'{{"keys": ["2026-11-01", "2026-11-03"]}}\'\n',
        2,
    ),
    (
        ["register", "ds_x", "--mechanism", "pure_dp", "--blocks", "all", *NOWHERE],
        "error: --mechanism is not JSON: Expecting value at column 1: give a JSON object in "
        'single quotes, e.g. \'{{"type": "pure_dp", "epsilon": "0.4"}}\'\n',
        2,
    ),
    (
        ["register", DS, "--mechanism", '{{"type": "pure_dp"}}', "--blocks", "all", *LIVE],
        "error: 422 ValidationError: body.mechanism.pure_dp.epsilon: Field required",
    ),
    (
        ["datasets", "create", "x", "--epsilon", "1", "--delta", "0", "--partition", "{{day}}"],
        "error: --partition is not JSON: Expecting property name enclosed in double quotes at "
        "column 2: ",
        2,
    ),
    (
        [
            *("datasets", "create", "x", "--epsilon", "1", "--delta", "0", *LIVE),
            *("--partition", '{{"kind": "hour", "unit": "record"}}'),
        ],
        "error: 422 ValidationError: body.partition.kind: Input should be",
    ),
    # every option taking JSON: one line naming the option, what is wrong and an example, exit
    # status 2 (--blocks: 1), before the key or the service is looked at; never a traceback
    # (deep nesting); NaN is not JSON
    (
        ["datasets", "create", "x", "--epsilon", "1", "--delta", "0", "--accounting", "{{bad"],
        "error: --accounting is not JSON: Expecting property name enclosed in double quotes at "
        'column 2: give a JSON object in single quotes, e.g. \'{{"mode": "zcdp"}}\'\n',
        2,
    ),
    (
        ["orgs", "cap", "acme", "--epsilon", "1", "--delta", "0", "--accounting", "[" * 100_000],
        "error: --accounting is not JSON: nested too deeply: ",
        2,
    ),
    (
        ["orgs", "cap", "acme", "--epsilon", "1", "--delta", "0", "--accounting", "NaN"],
        "error: --accounting is not JSON: NaN is not a JSON value: ",
        2,
    ),
    (
        ["orgs", "capacity", "acme", "--mechanism", '["pure_dp"]', *NOWHERE],
        "error: --mechanism must be a JSON object, not an array: ",
        2,
    ),
    (
        ["preview", DS, "--mechanism", '{{"type": "pure_dp", "epsilon": 0.1}}', "--blocks", "{{"],
        "error: --blocks is not JSON: Expecting property name enclosed in double quotes at ",
        2,
    ),
]


@pytest.mark.parametrize(
    "case", CASES, ids=[" ".join(c[0][:2]) + f"-{i}" for i, c in enumerate(CASES)]
)
def test_bad_invocation_is_one_line_and_a_failure(
    cli: ForkedCli, files: Path, request: pytest.FixtureRequest, case: tuple[object, ...]
) -> None:
    argv, first = cast(list[str], case[0]), cast(str, case[1])
    where = {"root": files, "url": "", "key": ADMIN_KEY}
    if "{url}" in argv:  # the rows that need a server's answer
        where["url"] = request.getfixturevalue("server").base_url
    args = [a.format(**where) for a in argv]
    proc = cli.run(args)
    assert proc.returncode != 0
    if len(case) > 2:
        assert proc.returncode == case[2], proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(first.format(**where)), proc.stderr
    assert proc.stdout == ""


def test_a_dataset_by_name(cli: ForkedCli, server: Server, client: OdometerClient) -> None:
    """Every command taking a DATASET takes its id or its exact name (looked up in the
    datasets the key sees); a name several datasets have is an error listing their ids."""
    one = client.create_dataset("cli-errors-unique", "1", "0.000001")
    twins = [client.create_dataset("cli-errors-twin", "1", "0.000001") for _ in range(2)]
    live = ["--url", server.base_url, "--key", ADMIN_KEY]
    proc = cli.run(["datasets", "show", "cli-errors-unique", *live])
    assert (proc.returncode, proc.stderr) == (0, "") and one.id in proc.stdout
    proc = cli.run(["budget", "set", "cli-errors-unique", "--epsilon", "2", "--delta", "0", *live])
    assert (proc.returncode, proc.stderr) == (
        0,
        "",
    ) and f"budget of {one.id} changed" in proc.stdout
    proc = cli.run(["report", "cli-errors-twin", *live])
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == (
        "error: 2 datasets are named 'cli-errors-twin': give one of their ids: "
        f"{twins[0].id}, {twins[1].id}\n"
    )
    proc = cli.run(["datasets", "show", twins[1].id, *live])  # an id is never ambiguous
    assert proc.returncode == 0 and twins[1].id in proc.stdout


@pytest.mark.parametrize("unbuffered", ["", "1"])
@pytest.mark.parametrize(
    "argv", [["--help"], ["verify", "{root}/entries.json"], ["datasets", "list", *LIVE]]
)
def test_a_reader_that_goes_away_is_no_error(
    files: Path, request: pytest.FixtureRequest, argv: list[str], unbuffered: str
) -> None:
    """``odometer … | head -1``: the reader closes its end; the command stops quietly (the
    status a shell gives a writer SIGPIPE stopped), whatever it was writing."""
    (files / "entries.json").write_text(json.dumps([{"seq": 1}]), "utf-8")  # a FAILED verdict
    where = {"root": files, "url": "", "key": ADMIN_KEY}
    if "{url}" in argv:
        where["url"] = request.getfixturevalue("server").base_url
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line is written
    try:
        proc = subprocess.run(
            [str(ODOMETER), *(a.format(**where) for a in argv)],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env={**ENV, "PYTHONUNBUFFERED": unbuffered},
        )
    finally:
        os.close(write)
    assert proc.returncode == 141, proc.stderr
    # nothing about the pipe; the verifier may have told its verdict before stdout was flushed
    assert proc.stderr == "" or proc.stderr.startswith("FAILED: entry 1 (seq 1): "), proc.stderr
