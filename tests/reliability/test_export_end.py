"""An export ends with a signed head, and ``odometer verify`` fails when nothing pins its end.

The hash chain cannot tell an export from the same export with its last lines cut off: both
are sound chains. An export file now ends with the dataset's head when it was written (its
*closing head*: seq and hash, signed by the operator's checkpoint key), and ``odometer verify``
fails unless a head signed by the key the auditor holds (``--public-key``) pins the export's
last entry, or it is told ``--unpinned`` (then it warns). A closing head that contradicts the
entries (entries cut off before it, added after it, a signature that does not verify) fails
whatever the auditor accepts.

Shown to fail on the code before the change (2026-11-29): every test below failed there;
``test_an_export_cut_short_fails_unless_unpinned`` with ``assert (0, True, 4) == (1, False,
5)`` (the export with its last lines cut off verified), the entries cut before a kept head
with the chain's own complaint only, the others because the export had no closing head
(``KeyError: 'head'``, a CSV's last row an entry) or ``--public-key`` alone was refused.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app import cli
from app.db.uow import Database
from app.main import create_app
from app.settings import Settings
from odometer_core.ledger import checkpoints
from odometer_core.ledger.formats import load_export, write_export
from tests.support import ADMIN_KEY, AUTH, Backend, basic_dataset

INVOCATIONS = 6  # + dataset_created: 7 entries


def _keys(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A key pair made the operator's way (``odometer checkpoint-keygen``): private, public."""
    private = tmp_path / f"{name}.pem"
    assert cli.main(["checkpoint-keygen", "-o", str(private)]) == 0
    key = checkpoints.load_private_key(private.read_bytes())
    public = tmp_path / f"{name}.pub.pem"
    public.write_text(checkpoints.public_pem(key.public_key()), "ascii")
    return private, public


@pytest.fixture
def operator_keys(tmp_path: Path) -> tuple[Path, Path]:
    return _keys(tmp_path, "operator")


def _client(backend: Backend, database: Database, key: Path | None) -> TestClient:
    settings = Settings(
        database_url=backend.url,
        admin_key=ADMIN_KEY,
        checkpoint_key=str(key) if key else None,
    )
    return TestClient(create_app(settings, database))


@pytest.fixture
def signing(
    backend: Backend, database: Database, operator_keys: tuple[Path, Path]
) -> Iterator[TestClient]:
    with _client(backend, database, operator_keys[0]) as c:
        yield c


@pytest.fixture
def unsigned(backend: Backend, database: Database) -> Iterator[TestClient]:
    with _client(backend, database, None) as c:
        yield c


def _history(client: TestClient) -> str:
    ds = str(basic_dataset(client, epsilon=10)["id"])
    for i in range(INVOCATIONS):
        r = client.post(
            f"/v1/datasets/{ds}/invocations",
            json={"mechanism": {"type": "pure_dp", "epsilon": f"0.{i + 1}"}},
            headers=AUTH,
        )
        assert r.status_code == 201, r.text
    return ds


def _export(client: TestClient, ds: str, path: Path, format: str) -> Path:
    r = client.get(
        f"/v1/datasets/{ds}/ledger", params={"export": "true", "format": format}, headers=AUTH
    )
    assert r.status_code == 200, r.text
    path.write_bytes(r.content)
    return path


def _verify(
    capsys: pytest.CaptureFixture[str], export: Path, *extra: str
) -> tuple[int, dict[str, Any], str]:
    code = cli.main(["verify", str(export), *extra])
    captured = capsys.readouterr()
    verdict: dict[str, Any] = json.loads(captured.out)
    return code, verdict, captured.err


def _head(path: Path) -> dict[str, Any]:
    last = path.read_text("utf-8").splitlines()[-1]
    head: dict[str, Any] = json.loads(last)["head"]
    return head


# ---------------------------------------------------------------------------- the closing head
@pytest.mark.parametrize("format", ["jsonl", "json", "csv"])
def test_an_export_ends_with_its_signed_head_and_verifies_pinned(
    signing: TestClient,
    operator_keys: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    format: str,
) -> None:
    ds = _history(signing)
    export = _export(signing, ds, tmp_path / f"ledger.{format}", format)
    text = export.read_text("utf-8")
    entries = load_export(text)
    assert [e["seq"] for e in entries] == list(range(1, INVOCATIONS + 2))
    if format == "jsonl":
        head = json.loads(text.splitlines()[-1])["head"]
    elif format == "json":
        head = json.loads(text)["head"]
    else:
        row = list(csv.reader(io.StringIO(text)))[-1]
        assert row[0] == "#head"
        head = json.loads(row[1])
    key = checkpoints.load_public_key(operator_keys[1].read_bytes())
    assert head["dataset_id"] == ds
    assert head["seq"] == INVOCATIONS + 1
    assert head["head_hash"] == entries[-1]["hash"]
    assert head["key_id"] == checkpoints.key_fingerprint(key)
    assert head["algorithm"] == "Ed25519"
    assert checkpoints.signature_problem(head, key) is None

    code, verdict, err = _verify(capsys, export, "--public-key", str(operator_keys[1]))
    assert (code, verdict["ok"], verdict["problems"]) == (0, True, [])
    assert verdict["end"] == {
        "pinned": True,
        "by": "closing head",
        "key_id": head["key_id"],
        "reason": None,
    }
    assert "the end pinned by its signed closing head" in err
    assert "warnings" not in verdict


def test_an_export_cut_short_fails_unless_unpinned(
    signing: TestClient,
    operator_keys: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The issue's case: the last lines cut off (the head and the last two entries) leave a
    sound, shorter chain; it no longer verifies, saying why, except with ``--unpinned``,
    which says the end is not pinned."""
    ds = _history(signing)
    export = _export(signing, ds, tmp_path / "ledger.jsonl", "jsonl")
    lines = export.read_text("utf-8").splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:-3]), "utf-8")
    public = ("--public-key", str(operator_keys[1]))

    code, verdict, err = _verify(capsys, cut)  # the same reason with the key: no head at all
    assert (code, verdict["ok"], verdict["entries"]) == (1, False, INVOCATIONS - 1)
    # the chain walked in a second process: the same verdict
    assert _verify(capsys, cut, "--jobs", "2")[1]["problems"] == verdict["problems"]
    assert _verify(capsys, export, "--jobs", "2", *public)[1]["end"]["pinned"] is True
    assert verdict["problems"] == [
        "the export does not end with its head: its last lines may have been cut off (or it "
        "was written by an older service, before exports ended with their signed head) "
        "(--unpinned accepts an export whose end nothing pins)"
    ]
    assert err.startswith("FAILED: the export does not end with its head")

    code, verdict, err = _verify(capsys, cut, *public, "--unpinned")
    assert (code, verdict["ok"], verdict["problems"]) == (0, True, [])
    assert verdict["end"]["pinned"] is False
    assert verdict["warnings"] == [
        "the export's end is not pinned: the export does not end with its head: its last "
        "lines may have been cut off (or it was written by an older service, before exports "
        "ended with their signed head); entries cut off its end would go unnoticed"
    ]
    assert err.splitlines() == [
        f"VERIFIED: {INVOCATIONS - 1} entries, the end NOT pinned (--unpinned)",
        f"WARNING: {verdict['warnings'][0]}",
    ]


def test_entries_cut_before_the_closing_head_fail_even_unpinned(
    signing: TestClient,
    operator_keys: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Cutting the last entries but keeping the head (or appending an entry after it) is a
    contradiction: no option accepts it."""
    ds = _history(signing)
    export = _export(signing, ds, tmp_path / "ledger.jsonl", "jsonl")
    lines = export.read_text("utf-8").splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:-3] + lines[-1:]), "utf-8")
    for extra in ((), ("--unpinned",), ("--public-key", str(operator_keys[1]), "--unpinned")):
        code, verdict, _ = _verify(capsys, cut, *extra)
        assert (code, verdict["ok"]) == (1, False), extra
        assert verdict["problems"] == [
            f"the export ends at seq {INVOCATIONS - 1} but its closing head is seq "
            f"{INVOCATIONS + 1}: the entries after seq {INVOCATIONS - 1} were cut off"
        ]


def test_a_closing_head_under_another_key_or_edited_fails(
    signing: TestClient,
    operator_keys: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Whoever cuts an export and writes a new head for its new end needs the operator's key:
    a head signed by another key, or edited, fails against the operator's public key, with
    ``--unpinned`` too."""
    ds = _history(signing)
    export = _export(signing, ds, tmp_path / "ledger.jsonl", "jsonl")
    entries = load_export(export.read_text("utf-8"))[:-2]
    other_private, _ = _keys(tmp_path, "other")
    capsys.readouterr()  # the key maker's output
    signer = checkpoints.Signer(checkpoints.load_private_key(other_private.read_bytes()), 1)
    at = "2026-11-29T00:00:00.000000Z"
    forged_head = {
        "dataset_id": ds,
        "seq": len(entries),
        "head_hash": entries[-1]["hash"],
        "signed_at": at,
        "key_id": signer.key_id,
        "algorithm": "Ed25519",
        "signature": signer.sign(ds, len(entries), entries[-1]["hash"], at),
    }
    forged = tmp_path / "forged.jsonl"
    with forged.open("w", encoding="utf-8") as out:
        write_export(ds, entries, out, "jsonl", head=forged_head)
    public = ("--public-key", str(operator_keys[1]), "--unpinned")
    code, verdict, _ = _verify(capsys, forged, *public)
    assert (code, verdict["ok"]) == (1, False)
    operator = checkpoints.key_fingerprint(
        checkpoints.load_public_key(operator_keys[1].read_bytes())
    )
    assert operator != signer.key_id
    assert verdict["problems"] == [
        f"the export's closing head: signed with key {signer.key_id!r}, not the given public key"
    ]

    edited_head = {**_head(export), "signed_at": at}  # a field changed after signing
    edited = tmp_path / "edited.jsonl"
    with edited.open("w", encoding="utf-8") as out:
        write_export(ds, load_export(export.read_text("utf-8")), out, "jsonl", head=edited_head)
    code, verdict, _ = _verify(capsys, edited, *public)
    assert (code, verdict["problems"]) == (
        1,
        ["the export's closing head: the signature does not verify"],
    )


def test_a_signed_head_without_the_public_key_is_not_a_pin(
    signing: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = _history(signing)
    export = _export(signing, ds, tmp_path / "ledger.jsonl", "jsonl")
    key_id = _head(export)["key_id"]
    code, verdict, _ = _verify(capsys, export)
    assert (code, verdict["ok"]) == (1, False)
    assert verdict["problems"] == [
        f"the export's closing head is signed by key {key_id!r}, but no --public-key was given "
        "to check it: pass the operator's public key (obtained out of band) (--unpinned "
        "accepts an export whose end nothing pins)"
    ]
    code, verdict, _ = _verify(capsys, export, "--unpinned")
    assert (code, verdict["ok"], verdict["end"]["pinned"]) == (0, True, False)


def test_an_unsigned_service_export_says_so_and_needs_unpinned(
    unsigned: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = _history(unsigned)
    export = _export(unsigned, ds, tmp_path / "ledger.jsonl", "jsonl")
    head = _head(export)
    assert head == {
        "dataset_id": ds,
        "seq": INVOCATIONS + 1,
        "head_hash": load_export(export.read_text("utf-8"))[-1]["hash"],
        "signed_at": None,
        "key_id": None,
        "algorithm": None,
        "signature": None,
    }
    reason = (
        "the service that wrote this export signs no heads (it has no ODOMETER_CHECKPOINT_KEY): "
        "nothing pins the export's end"
    )
    code, verdict, err = _verify(capsys, export)
    assert (code, verdict["problems"]) == (
        1,
        [reason + " (--unpinned accepts an export whose end nothing pins)"],
    )
    assert err == f"FAILED: {verdict['problems'][0]}\n"
    code, verdict, err = _verify(capsys, export, "--unpinned")
    assert (code, verdict["ok"]) == (0, True)
    assert verdict["warnings"] == [
        f"the export's end is not pinned: {reason}; entries cut off its end would go unnoticed"
    ]
    # even unsigned, the head still catches a plain cut before it
    lines = export.read_text("utf-8").splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:-2] + lines[-1:]), "utf-8")
    code, verdict, _ = _verify(capsys, cut, "--unpinned")
    assert code == 1
    assert verdict["problems"][0].endswith(f"the entries after seq {INVOCATIONS} were cut off")


def test_an_old_export_without_a_head_needs_unpinned_or_a_checkpoint(
    signing: TestClient,
    operator_keys: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An export written before exports had a closing head fails without ``--unpinned`` and
    passes with it; a signed checkpoint at its last entry (``--checkpoints``) pins it."""
    ds = _history(signing)
    entries = load_export(_export(signing, ds, tmp_path / "new.jsonl", "jsonl").read_text())
    old = tmp_path / "old.jsonl"
    with old.open("w", encoding="utf-8") as out:
        write_export(ds, entries, out, "jsonl")  # no head: the old file format
    assert "head" not in old.read_text("utf-8")
    public = ("--public-key", str(operator_keys[1]))
    assert _verify(capsys, old, *public)[0] == 1
    code, verdict, _ = _verify(capsys, old, *public, "--unpinned")
    assert (code, verdict["ok"], verdict["end"]["pinned"]) == (0, True, False)

    r = signing.post(f"/v1/datasets/{ds}/checkpoints", headers=AUTH)
    assert r.status_code == 201, r.text
    assert r.json()["seq"] == len(entries)
    signed = tmp_path / "checkpoints.json"
    signed.write_text(json.dumps([r.json()]), "utf-8")
    code, verdict, err = _verify(capsys, old, *public, "--checkpoints", str(signed))
    assert (code, verdict["ok"]) == (0, True), verdict["problems"]
    assert verdict["end"]["pinned"] is True and verdict["end"]["by"] == "checkpoint"
    assert "the end pinned by a checkpoint" in err
