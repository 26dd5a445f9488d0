"""``make run`` signs by default: it makes a checkpoint key once, beside the admin key (mode
0600, its public key in a ``.pub`` beside it), keeps it across restarts, and an export from the
service it starts ends with a head signed by that key, which ``odometer verify --public-key``
accepts as pinning the export's end.

Shown to fail on the code before the change (2026-11-29): ``make run`` made no signing key
(``assert False`` where ``.odometer-checkpoint-key`` should exist).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.concurrency.server import free_port
from tests.support import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _tree(tmp_path: Path) -> Path:
    """A scratch directory where ``make run`` runs as in a checkout (the Makefile, the
    migrations and this environment's venv), so that its key and database stay out of the
    repository. It has no sources: ``_make_run`` never lets make (re)install into the venv."""
    tree = tmp_path / "checkout"
    tree.mkdir()
    shutil.copy(ROOT / "Makefile", tree / "Makefile")
    for name in ("alembic.ini", "migrations"):
        (tree / name).symlink_to(ROOT / name)
    (tree / ".venv").symlink_to(Path(sys.prefix))
    return tree


@contextmanager
def _make_run(tree: Path) -> Iterator[str]:
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ODOMETER_CHECKPOINT_KEY", "ODOMETER_ADMIN_KEY", "DATABASE_URL")
    }
    log = (tree / "make-run.log").open("w")
    proc = subprocess.Popen(
        # -o: the venv taken as installed (make would install this tree's nothing into it)
        ["make", "-s", "-o", "install", "-o", ".venv/.installed", "run", f"PORT={port}"],
        cwd=tree,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, (tree / "make-run.log").read_text()
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (tree / "make-run.log").read_text()
            time.sleep(0.2)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()


def test_make_run_signs_with_a_key_kept_beside_the_admin_key(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    with _make_run(tree) as url:
        key = tree / ".odometer-checkpoint-key"
        assert key.exists() and (tree / ".odometer-admin-key").exists()
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        admin = {"Authorization": f"Bearer {(tree / '.odometer-admin-key').read_text().strip()}"}
        served = httpx.get(f"{url}/v1/checkpoint-key", headers=admin).json()
        assert served["enabled"] is True
        public = tree / ".odometer-checkpoint-key.pub"
        assert served["public_key"] == public.read_text("ascii")
        r = httpx.post(
            f"{url}/v1/datasets",
            json={"name": "signed", "budget": {"epsilon": "1", "delta": "0"}},
            headers=admin,
        )
        assert r.status_code == 201, r.text
        ds = r.json()["id"]
        r = httpx.get(
            f"{url}/v1/datasets/{ds}/ledger",
            params={"export": "true", "format": "jsonl"},
            headers=admin,
        )
        export = tmp_path / "ledger.jsonl"
        export.write_bytes(r.content)
    head = json.loads(export.read_text("utf-8").splitlines()[-1])["head"]
    assert (head["seq"], head["key_id"]) == (1, served["key_id"])
    verified = subprocess.run(
        [sys.executable, "-m", "app.cli", "verify", str(export), "--public-key", str(public)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert verified.returncode == 0, verified.stderr
    assert verified.stderr.strip() == (
        f"VERIFIED: 1 entries, the end pinned by its signed closing head (key {head['key_id']})"
    )

    # restarted, it signs with the same key (made once, never replaced)
    pem = key.read_bytes()
    with _make_run(tree) as url:
        assert key.read_bytes() == pem
        again = httpx.get(f"{url}/v1/checkpoint-key", headers=admin).json()
        assert again["key_id"] == served["key_id"]
