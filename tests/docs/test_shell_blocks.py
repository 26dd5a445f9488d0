"""Every shell block of the README and of ``docs/`` runs, verbatim, against a live server.

A block runs on its own: no variable, function or file from another block (each is run in a
fresh ``bash -euo pipefail``), and it leaves nothing behind in the repository. A block that
cannot run here says why in a ``<!-- not run: … -->`` line above it; one run by a dedicated
test names it in a ``<!-- … run by tests/… -->`` line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.client.live import ADMIN_KEY, Server, live_server
from tests.concurrency.server import running_server
from tests.support import ROOT, fresh_database

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Block:
    path: Path
    index: int  # the n-th shell block of its file
    line: int
    marker: str  # the HTML comment above it, or ""
    text: str

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}#{self.index}"


def shell_blocks() -> list[Block]:
    blocks: list[Block] = []
    for path in DOCS:
        lines = path.read_text("utf-8").splitlines()
        n = 0
        for i, line in enumerate(lines):
            if line.strip() != "```sh":
                continue
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            above = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            marker = above.strip() if above.strip().startswith("<!--") else ""
            blocks.append(Block(path, n, i + 1, marker, "\n".join(lines[i + 1 : end])))
            n += 1
    return blocks


BLOCKS = shell_blocks()
RUN = [b for b in BLOCKS if not b.marker]
#: What a block's output must show (beyond exiting 0), by file and block number.
EXPECT = {
    "docs/http-api.md#0": ["\n409\n", '"error":"BudgetExceeded"', '"level":"dataset"'],
    "docs/http-api.md#1": ['{"epsilon": "0.3", "delta": "0"}', "VERIFIED: 3 entries"],
    "docs/http-api.md#3": ['"kind":"invocation_accepted"'],
    "docs/http-api.md#4": [
        "tops=2\n",
        '{"epsilon": "0.3", "delta": "0"}',
        "output digest matches: ",
        '"error":"InvalidOutput"',
        "\n422\nreserved\n",
    ],
    "docs/http-api.md#5": [
        "3 of the selected blocks cannot afford it (2026-11-24 … 2026-11-26)",
        '"from":"2026-11-24","to":"2026-11-26","blocks":3',
        "\n409\n",
        "2026-11-20 2026-11-26 0.8\n",
        "2026-11-27 2026-11-28 0\n",
    ],
}


def _untracked() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def run_block(block: Block, server: Server, env: dict[str, str] | None = None) -> str:
    """Run a block as a newcomer would (``make run`` in another terminal: the server's URL and
    admin key), with this interpreter's ``bin/`` for ``.venv/bin/``; its stdout and stderr."""
    before = _untracked()
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.text.replace(".venv/bin/", f"{BIN}/")],
        cwd=ROOT,
        env={
            **os.environ,
            "ODOMETER_URL": server.base_url,
            "ODOMETER_ADMIN_KEY": ADMIN_KEY,
            "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{block.name} (line {block.line}) failed:\n{output}"
    assert _untracked() == before, f"{block.name} left files in the repository"
    return output


@pytest.fixture(scope="module")
def docs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with live_server(tmp_path_factory.mktemp("docs-server")) as server:
        yield server


def test_every_block_runs_or_says_why_not() -> None:
    assert len(RUN) >= 3
    for block in BLOCKS:
        if not block.marker:
            continue
        not_run = re.search(r"not run: (.+?) -->", block.marker)
        run_by = re.search(r"run by (tests/[\w/]+\.py)", block.marker)
        assert not_run or run_by, f"{block.name}: {block.marker!r} neither runs nor says why"
        if run_by:
            assert (ROOT / run_by.group(1)).is_file(), block.marker


@pytest.mark.parametrize("block", RUN, ids=[b.name for b in RUN])
def test_shell_block_runs(block: Block, docs_server: Server) -> None:
    output = run_block(block, docs_server)
    for expected in EXPECT.get(block.name, []):
        assert expected in output, f"{block.name}: {expected!r} not in\n{output}"


def test_signed_checkpoints(tmp_path: Path) -> None:
    """docs/ledger.md: the operator's key block, a service restarted with that key, then the
    auditor's block: a signed checkpoint matches the export."""
    ledger_doc = [b for b in BLOCKS if b.path.name == "ledger.md"]
    operator, auditor = ledger_doc[0], ledger_doc[1]
    keys = {"ODOMETER_KEYS_DIR": str(tmp_path / "keys")}
    with (
        fresh_database("sqlite", tmp_path) as backend,
        running_server(backend.url, tmp_path / "plain.log") as plain,
    ):
        printed = run_block(operator, plain, keys)
    assert "-----BEGIN PUBLIC KEY-----" in printed
    assert (tmp_path / "keys" / "checkpoint.pem").stat().st_mode & 0o777 == 0o600
    signing = {"ODOMETER_CHECKPOINT_KEY": str(tmp_path / "keys" / "checkpoint.pem")}
    (tmp_path / "signed").mkdir()
    with (
        fresh_database("sqlite", tmp_path / "signed") as backend,
        running_server(backend.url, tmp_path / "signed.log", env=signing) as server,
    ):
        output = run_block(auditor, server, keys)
    assert "VERIFIED: 2 entries, 1 signed checkpoint(s) match" in output
