"""``odometer publish-heads DIR``: every dataset's signed tree head written where a static web
server serves it to witnesses, on SQLite and PostgreSQL.

- the files verify offline with the operator's public key (and the witness's cosignature with
  its key), the note byte for byte what ``…/ledger/checkpoint`` serves;
- nothing is rewritten when nothing moved (same inode, same mtime);
- after new registrations the head moves and the new head extends the one published before
  (``odometer verify --since`` with a consistency proof);
- an entry rewritten in the database (its tree recomputed, as a rewriting operator would) is
  refused, at the same size and after a further registration, the published file left as it
  was;
- a restore whose loss the operator acknowledged is published, the acknowledgement named;
- without a checkpoint key the command refuses (exit 2) and writes nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text, update

from app import cli
from app.db.models import Dataset, LedgerEntry
from app.settings import get_settings
from odometer_core.ledger.checkpoints import load_public_key
from odometer_core.ledger.merkle import Frontier
from odometer_core.ledger.notes import NoteVerifier
from odometer_core.ledger.receipts import open_head
from tests.api.test_forks_and_cosigners import Service
from tests.reliability.test_restore import Backup
from tests.support import AUTH, Backend, basic_dataset


@pytest.fixture
def service(
    fresh_backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Service]:
    s = Service(fresh_backend.url, tmp_path)
    monkeypatch.setenv("DATABASE_URL", fresh_backend.url)
    monkeypatch.setenv("ODOMETER_CHECKPOINT_KEY", str(s.checkpoint_key))
    monkeypatch.setenv("ODOMETER_WITNESS_DIR", str(tmp_path / "witness"))
    monkeypatch.setenv("ODOMETER_WITNESS_KEY", str(s.witness_key))
    get_settings.cache_clear()
    yield s
    s.stop()
    get_settings.cache_clear()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _verify(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code, out, err = _run(capsys, "verify", *argv)
    return code, out + err


def _get(client: TestClient, url: str, **params: int | str) -> Any:
    r = client.get(url, params=params, headers=AUTH)
    assert r.status_code == 200, r.text
    return r.json()


def _register(client: TestClient, ds: str, times: int) -> None:
    for _ in range(times):
        r = client.post(
            f"/v1/datasets/{ds}/invocations",
            json={"mechanism": {"type": "pure_dp", "epsilon": "0.01"}},
            headers=AUTH,
        )
        assert r.status_code == 201, r.text


def _check(client: TestClient) -> None:
    r = client.post("/v1/witness/check", headers=AUTH)
    assert r.status_code == 200, r.text


def _stamp(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_ino, st.st_mtime_ns


def _setup(service: Service, capsys: pytest.CaptureFixture[str]) -> tuple[TestClient, str, str]:
    code, vkey, _ = _run(
        capsys, "witness-keygen", "witness.example/ledger", "-o", str(service.witness_key)
    )
    assert code == 0
    client = service.start()
    ds = str(basic_dataset(client, epsilon="1")["id"])
    return client, ds, vkey.strip()


def _rewrite_entry(service: Service, ds: str, seq: int) -> None:
    """An entry's hash changed in the database and the dataset's Merkle frontier recomputed
    over the changed hashes: the head the server signs from then on is the rewritten tree's."""
    assert service.database is not None
    with service.database.engine.begin() as conn:  # the append-only triggers (this database's)
        if conn.dialect.name == "sqlite":
            conn.execute(text("DROP TRIGGER IF EXISTS ledger_entries_no_update"))
        else:
            conn.execute(
                text("DROP TRIGGER IF EXISTS ledger_entries_no_update_delete ON ledger_entries")
            )
    with service.database.writer() as session, session.begin():
        session.execute(
            update(LedgerEntry)
            .where(LedgerEntry.dataset_id == ds, LedgerEntry.seq == seq)
            .values(hash="ab" * 32)
        )
        hashes = session.scalars(
            select(LedgerEntry.hash).where(LedgerEntry.dataset_id == ds).order_by(LedgerEntry.seq)
        ).all()
        frontier = Frontier()
        for h in hashes:
            frontier.append_entry(h)
        session.execute(
            update(Dataset).where(Dataset.id == ds).values(merkle_json=frontier.to_json())
        )


def test_published_heads_verify_offline_move_forward_and_refuse_a_rewrite(
    service: Service, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client, ds, vkey = _setup(service, capsys)
    url = f"/v1/datasets/{ds}"
    _register(client, ds, 2)  # size 3
    _check(client)  # the witness cosigns the head of 3
    pem = tmp_path / "public.pem"
    pem.write_text(_get(client, "/v1/checkpoint-key")["public_key"])
    public_key = load_public_key(pem.read_bytes())
    out_dir = tmp_path / "public"

    code, out, err = _run(capsys, "publish-heads", str(out_dir))
    assert (code, err) == (0, ""), err
    folder = out_dir / "odometer" / "ledger" / ds
    checkpoint, cosigned, index = folder / "checkpoint", folder / "cosigned", out_dir / "heads.json"
    assert f"published dataset {ds}: size 3" in out
    # the note exactly as …/ledger/checkpoint serves it; it verifies with the public key
    served = _get(client, f"{url}/ledger/checkpoint")
    assert checkpoint.read_text("utf-8") == served["note"]
    head = open_head(checkpoint.read_text("utf-8"), public_key)
    assert (head.dataset_id, head.size, head.root.hex()) == (ds, 3, served["root"])
    # the witness's cosigned head beside it: its cosignature verifies with the witness's key
    seen = open_head(cosigned.read_text("utf-8"), public_key, [NoteVerifier.from_vkey(vkey)])
    assert (seen.size, seen.root) == (3, head.root)
    assert [w.status for w in seen.witnesses] == ["verified"]
    doc = json.loads(index.read_text())
    [entry] = [h for h in doc["heads"] if h["dataset_id"] == ds]
    assert entry == {
        "dataset_id": ds,
        "size": 3,
        "root": served["root"],
        "checkpoint": f"odometer/ledger/{ds}/checkpoint",
        "cosigned": f"odometer/ledger/{ds}/cosigned",
        "forks": [],
    }
    assert doc["type"] == "odometer.heads/v1" and doc["witness_vkey"] == vkey
    assert oct(checkpoint.stat().st_mode & 0o777) == "0o644"
    # the published files verify with the client's command, offline
    export = tmp_path / "export.json"
    export.write_text(
        client.get(f"{url}/ledger", params={"export": "true", "format": "json"}, headers=AUTH).text
    )
    code, said = _verify(
        capsys,
        str(export),
        "--public-key",
        str(pem),
        "--since",
        str(cosigned),
        "--cosigner",
        vkey,
    )
    assert code == 0 and '"extends": true' in said and "SEEN: the head of size 3" in said, said

    # nothing moved: nothing rewritten
    stamps = {p: _stamp(p) for p in (checkpoint, cosigned, index)}
    code, out, err = _run(capsys, "publish-heads", str(out_dir))
    assert (code, out, err) == (0, "", "")
    assert {p: _stamp(p) for p in stamps} == stamps

    # two registrations: the head moves, and the new head extends the one published before
    held = tmp_path / "held-3.note"
    held.write_text(checkpoint.read_text("utf-8"))
    _register(client, ds, 2)  # size 5
    code, out, err = _run(capsys, "publish-heads", str(out_dir))
    assert code == 0 and f"published dataset {ds}: size 5" in out, err
    assert _stamp(checkpoint)[0] != stamps[checkpoint][0]  # renamed over, not written in place
    assert _stamp(cosigned) == stamps[cosigned]  # the witness cosigned nothing newer
    head5 = open_head(checkpoint.read_text("utf-8"), public_key)
    assert head5.size == 5
    proof = tmp_path / "consistency.json"
    proof.write_text(json.dumps(_get(client, f"{url}/ledger/consistency", **{"from": 3})))
    code, said = _verify(
        capsys,
        "--since",
        str(held),
        "--head",
        str(checkpoint),
        "--consistency",
        str(proof),
        "--public-key",
        str(pem),
    )
    assert code == 0 and "VERIFIED: the signed head in" in said, said
    assert json.loads(index.read_text())["heads"][0]["size"] == 5
    # the witness cosigns the head of 5: only the cosigned file changes
    before = _stamp(checkpoint)
    _check(client)
    code, out, err = _run(capsys, "publish-heads", str(out_dir))
    assert (code, err) == (0, "")
    assert out == (
        f"cosigned dataset {ds}: size 5, root {head5.root.hex()[:16]}… (the witness of ledger "
        "heads cosigned size 5)\n"
    )
    assert _stamp(checkpoint) == before
    seen = open_head(cosigned.read_text("utf-8"), public_key, [NoteVerifier.from_vkey(vkey)])
    assert (seen.size, seen.root, seen.seen_by) == (5, head5.root, ("witness.example/ledger",))

    # the operator rewrites entry 2 and the server signs the rewritten tree: refused
    published = checkpoint.read_bytes()
    stamps = {p: _stamp(p) for p in (checkpoint, cosigned, index)}
    _rewrite_entry(service, ds, 2)
    forged = _get(client, f"{url}/ledger/checkpoint")
    assert forged["size"] == 5 and forged["root"] != head.root.hex()  # what a poller would get
    code, out, err = _run(capsys, "publish-heads", str(out_dir))
    assert code == 1 and out == "", out
    assert f"REFUSED dataset {ds}: size 5" in err
    assert "the database's tree of size 5 has another root" in err
    assert "the published head is left as it was" in err
    assert checkpoint.read_bytes() == published
    assert {p: _stamp(p) for p in stamps} == stamps

    # and after a further registration (a larger tree over the rewritten entry): refused
    service.stop()
    client = service.start()
    _register(client, ds, 1)  # size 6
    code, out, err = _run(capsys, "publish-heads", str(out_dir))
    assert code == 1 and f"REFUSED dataset {ds}: size 6" in err, err
    assert "does not extend the published head of size 5" in err
    assert checkpoint.read_bytes() == published
    assert {p: _stamp(p) for p in stamps} == stamps
    # the index lost: still refused, and the index rebuilt describes the file left as it was
    index.unlink()
    code, out, err = _run(capsys, "publish-heads", str(out_dir))
    assert code == 1 and f"REFUSED dataset {ds}: size 6" in err, err
    assert checkpoint.read_bytes() == published
    [entry] = json.loads(index.read_text())["heads"]
    assert (entry["size"], entry["root"]) == (5, head5.root.hex())
    # a damaged index: one line, nothing written
    index.write_text("{not json")
    code, out, err = _run(capsys, "publish-heads", str(out_dir))
    assert (code, out) == (1, "")
    assert err == (
        f"odometer publish-heads: {index} is not an odometer.heads/v1 index (move it away to "
        "rebuild it)\n"
    )
    assert index.read_text() == "{not json" and checkpoint.read_bytes() == published


def test_an_acknowledged_loss_is_published_and_named(
    service: Service, fresh_backend: Backend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client, ds, _ = _setup(service, capsys)
    url = f"/v1/datasets/{ds}"
    _register(client, ds, 2)  # size 3
    out_dir = tmp_path / "public"
    service.stop()
    backup = Backup(fresh_backend, tmp_path)
    backup.take()
    client = service.start()
    _register(client, ds, 3)  # size 6, published
    code, out, _ = _run(capsys, "publish-heads", str(out_dir))
    assert code == 0 and f"published dataset {ds}: size 6" in out
    checkpoint = out_dir / "odometer" / "ledger" / ds / "checkpoint"

    # restored at 3; before the acknowledgement the smaller head is refused
    service.stop()
    backup.restore()
    client = service.start()
    code, _, err = _run(capsys, "publish-heads", str(out_dir))
    assert code == 1 and "is smaller than the published one (size 6)" in err, err
    r = client.post(
        f"{url}/witness/acknowledge", json={"reason": "restored the 02:00 backup"}, headers=AUTH
    )
    assert r.status_code == 201, r.text
    _register(client, ds, 3)  # seqs 5, 6, 7 (4 is the acknowledgement)
    code, out, err = _run(capsys, "publish-heads", str(out_dir))
    assert code == 0, err
    assert f"FORKED dataset {ds}: size 7" in err
    assert "loss of entries 4..6" in err and "'restored the 02:00 backup'" in err
    served = _get(client, f"{url}/ledger/checkpoint")
    assert checkpoint.read_text("utf-8") == served["note"]
    [entry] = [h for h in json.loads((out_dir / "heads.json").read_text())["heads"]]
    forks = _get(client, f"{url}/ledger/forks")["forks"]
    assert entry["forks"] == [forks[0]["entry"]["hash"]] and entry["size"] == 7

    # the same acknowledgement does not excuse a later rewrite
    _rewrite_entry(service, ds, 6)
    code, _, err = _run(capsys, "publish-heads", str(out_dir))
    assert code == 1 and f"REFUSED dataset {ds}: size 7" in err, err
    assert checkpoint.read_text("utf-8") == served["note"]


def test_publish_heads_needs_the_checkpoint_key(
    fresh_backend: Backend,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DATABASE_URL", fresh_backend.url)
    monkeypatch.delenv("ODOMETER_CHECKPOINT_KEY", raising=False)
    get_settings.cache_clear()
    try:
        code, out, err = _run(capsys, "publish-heads", str(tmp_path / "public"))
    finally:
        get_settings.cache_clear()
    assert (code, out) == (2, "")
    assert err.startswith("odometer publish-heads: no checkpoint key (set ODOMETER_CHECKPOINT_KEY")
    assert not (tmp_path / "public").exists()


def test_a_directory_that_cannot_be_written_is_one_line(
    service: Service, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _setup(service, capsys)
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    code, out, err = _run(capsys, "publish-heads", str(blocked / "public"))
    assert (code, out) == (1, "")
    assert err == f"odometer publish-heads: cannot write {blocked / 'public'}: Not a directory\n"


def test_every_publishes_until_interrupted(
    service: Service,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--every``: a round, the pause, the next round; an interrupt ends it (exit 0)."""
    client, ds, _ = _setup(service, capsys)
    pauses: list[float] = []

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 1:
            _register(client, ds, 1)  # the second round publishes size 2
            return
        raise KeyboardInterrupt

    monkeypatch.setattr("app.cli.time", SimpleNamespace(sleep=pause))
    code, out, err = _run(capsys, "publish-heads", str(tmp_path / "public"), "--every", "2.5")
    assert (code, err) == (0, "") and pauses == [2.5, 2.5]
    assert f"published dataset {ds}: size 1" in out and f"published dataset {ds}: size 2" in out
    note = (tmp_path / "public" / "odometer" / "ledger" / ds / "checkpoint").read_text("utf-8")
    assert note == _get(client, f"/v1/datasets/{ds}/ledger/checkpoint")["note"]


def test_no_witness_directory_is_created_by_the_publisher(
    service: Service,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """On a host without the witness directory the heads are published without a cosigned
    file, and no empty witness directory is made there."""
    _, ds, _ = _setup(service, capsys)
    monkeypatch.setenv("ODOMETER_WITNESS_DIR", str(tmp_path / "elsewhere"))
    get_settings.cache_clear()
    code, out, err = _run(capsys, "publish-heads", str(tmp_path / "public"))
    assert (code, err) == (0, "") and f"published dataset {ds}: size 1" in out
    folder = tmp_path / "public" / "odometer" / "ledger" / ds
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint"]
    assert not (tmp_path / "elsewhere").exists()
    [entry] = json.loads((tmp_path / "public" / "heads.json").read_text())["heads"]
    assert entry["cosigned"] is None
