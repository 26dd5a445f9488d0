"""Settlement from the released output: the service derives the cell, records the output's
digest, and refuses (422, nothing changed) impossible outputs and contradicting cells.

Every test runs on SQLite and on PostgreSQL (the ``client`` fixture's backend)."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.cli import main
from odometer_core.ledger.formats import load_export
from odometer_core.ledger.replay import replay
from tests.support import AUTH, basic_dataset, ledger, status

SVT = {"type": "svt", "epsilon1": "0.1", "epsilon2": "0.3", "c": 3}
PTR = {"type": "ptr", "epsilon": "0.1", "delta": "1e-9"}
ITERATIVE = {
    "type": "iterative",
    "step_epsilon": "0.01",
    "step_delta": "0",
    "stopping_points": [10, 20, 40],
}
TESTED = {"type": "tested_release", "epsilon_release": "0.4", "epsilon_bottom": "0.1"}
ODP = {"type": "odp", "cells": [{"name": "a", "epsilon": "0.1"}, {"name": "b", "epsilon": "0.2"}]}


def _sha256(output: Any) -> str:
    """The digest as an auditor computes it from a publication: SHA-256 over sorted-key,
    compact, UTF-8 JSON (written here independently of the ledger module)."""
    text = json.dumps(output, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _reserve(client: TestClient, mechanism: dict[str, Any]) -> tuple[str, str]:
    ds = basic_dataset(client, epsilon="5", delta="0.001")
    r = client.post(
        f"/v1/datasets/{ds['id']}/invocations", json={"mechanism": mechanism}, headers=AUTH
    )
    assert r.status_code == 201, r.text
    assert r.json()["status"] == "reserved"
    return str(ds["id"]), str(r.json()["id"])


def _settle(
    client: TestClient, dsid: str, inv: str, body: dict[str, Any], key: str | None = None
) -> Any:
    headers = AUTH if key is None else {**AUTH, "Idempotency-Key": key}
    return client.post(f"/v1/datasets/{dsid}/invocations/{inv}/settle", json=body, headers=headers)


def _snapshot(client: TestClient, dsid: str, inv: str) -> tuple[Any, ...]:
    """What a refused settle must leave as it was: the ledger head, the dataset's status and
    the invocation's status."""
    entries = ledger(client, dsid)
    got = client.get(f"/v1/datasets/{dsid}/invocations/{inv}", headers=AUTH).json()
    return entries[-1]["seq"], entries[-1]["hash"], status(client, dsid), got["status"]


CASES = [
    # (mechanism, output, derived cell, charged ε)
    (SVT, [False, True, False, False, True], "tops=2", "0.3"),
    (SVT, [], "tops=0", "0.1"),
    (SVT, [True, False, True, True], "tops=3", "0.4"),
    (PTR, None, "bottom", "0.1"),
    (PTR, "17.25", "value", "0.2"),
    (PTR, {"median": "17.25", "n": 3}, "value", "0.2"),
    (ITERATIVE, 20, "stop=20", "0.2"),
    (ITERATIVE, 40, "stop=40", "0.4"),
    (TESTED, True, "released", "0.4"),
    (TESTED, False, "bottom", "0.1"),
    (TESTED, None, "bottom", "0.1"),
]


@pytest.mark.parametrize(("mechanism", "output", "cell", "charged"), CASES)
def test_the_cell_is_derived_from_the_output_and_its_digest_recorded(
    client: TestClient, mechanism: dict[str, Any], output: Any, cell: str, charged: str
) -> None:
    dsid, inv = _reserve(client, mechanism)
    r = _settle(client, dsid, inv, {"output": output})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "settled"
    assert body["cell"] == cell
    assert body["charge"]["epsilon"] == charged
    assert body["output_digest"] == _sha256(output)
    entry = ledger(client, dsid)[-1]
    assert entry["kind"] == "invocation_settled"
    assert entry["request"] == {"cell": cell, "output_digest": _sha256(output)}
    assert replay(ledger(client, dsid)).ok


def test_a_cell_that_agrees_with_the_output_is_accepted(client: TestClient) -> None:
    dsid, inv = _reserve(client, SVT)
    r = _settle(client, dsid, inv, {"cell": "tops=1", "output": [False, True]})
    assert r.status_code == 200, r.text
    assert r.json()["cell"] == "tops=1"
    assert r.json()["charge"]["epsilon"] == "0.2"


def test_a_named_cell_alone_settles_as_before_without_a_digest(client: TestClient) -> None:
    dsid, inv = _reserve(client, SVT)
    r = _settle(client, dsid, inv, {"cell": "tops=1"})
    assert r.status_code == 200, r.text
    assert "output_digest" not in r.json()
    assert ledger(client, dsid)[-1]["request"] == {"cell": "tops=1"}


@pytest.mark.parametrize(
    ("mechanism", "body"),
    [
        (SVT, {"cell": "tops=1", "output": [True, True, False]}),
        (SVT, {"cell": "tops=3", "output": []}),
        (PTR, {"cell": "value", "output": None}),
        (PTR, {"cell": "bottom", "output": "3"}),
        (ITERATIVE, {"cell": "stop=10", "output": 20}),
        (TESTED, {"cell": "bottom", "output": True}),
    ],
)
def test_a_cell_contradicting_the_output_is_422_and_changes_nothing(
    client: TestClient, mechanism: dict[str, Any], body: dict[str, Any]
) -> None:
    dsid, inv = _reserve(client, mechanism)
    before = _snapshot(client, dsid, inv)
    key = uuid.uuid4().hex
    r = _settle(client, dsid, inv, body, key=key)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "InvalidOutput"
    assert r.json()["field"] == "cell"
    assert f"'{body['cell']}'" in r.json()["detail"]
    assert _snapshot(client, dsid, inv) == before
    assert before[3] == "reserved"
    # nothing was stored under the key either: the right request with it then succeeds
    good = _settle(client, dsid, inv, {"output": body["output"]}, key=key)
    assert good.status_code == 200, good.text


@pytest.mark.parametrize(
    ("mechanism", "output", "words"),
    [
        (SVT, [True, True, True, False], "answered ⊤ c = 3 times"),
        (SVT, [True, True, True, True], "answer 3 comes after that"),
        (SVT, [True, 1, False], "answer 1 must be true"),
        (SVT, "TFT", "list of answers"),
        (SVT, 2, "list of answers"),
        (PTR, False, "not a boolean"),
        (ITERATIVE, 15, "not a declared stopping point"),
        (ITERATIVE, 41, "beyond the last stopping point 40"),
        (ITERATIVE, 0, "not a declared stopping point"),
        (ITERATIVE, "20", "an integer"),
        (ITERATIVE, True, "an integer"),
        (TESTED, "passed", "verdict"),
        (ODP, "a", "send 'cell' instead of 'output'"),
        (PTR, 17.25, "binary floats"),
        (SVT, [{"score": 0.5}], "binary floats"),
    ],
)
def test_an_impossible_output_is_422_and_changes_nothing(
    client: TestClient, mechanism: dict[str, Any], output: Any, words: str
) -> None:
    dsid, inv = _reserve(client, mechanism)
    before = _snapshot(client, dsid, inv)
    r = _settle(client, dsid, inv, {"output": output})
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "InvalidOutput"
    assert r.json()["field"] == "output"
    assert words in r.json()["detail"]
    assert _snapshot(client, dsid, inv) == before


def test_neither_cell_nor_output_is_422(client: TestClient) -> None:
    dsid, inv = _reserve(client, SVT)
    r = _settle(client, dsid, inv, {})
    assert r.status_code == 422
    assert r.json()["error"] == "ValidationError"
    assert "send the cell, the released output, or both" in r.json()["detail"]
    # null stays refused for the cell (the output alone may be null: ⊥)
    assert _settle(client, dsid, inv, {"cell": None}).status_code == 422


def test_the_output_is_part_of_the_idempotent_request(client: TestClient) -> None:
    dsid, inv = _reserve(client, SVT)
    key = uuid.uuid4().hex
    first = _settle(client, dsid, inv, {"output": [False, True]}, key=key)
    assert first.status_code == 200, first.text
    again = _settle(client, dsid, inv, {"output": [False, True]}, key=key)
    assert again.status_code == 200
    assert again.content == first.content
    assert again.headers["idempotent-replayed"] == "true"
    # the same cell reached through another output, or named alone: another request
    other = _settle(client, dsid, inv, {"output": [True, False]}, key=key)
    assert other.status_code == 422
    assert other.json()["error"] == "IdempotencyKeyReused"
    named = _settle(client, dsid, inv, {"cell": "tops=1"}, key=key)
    assert named.status_code == 422
    assert named.json()["error"] == "IdempotencyKeyReused"
    assert [e["kind"] for e in ledger(client, dsid)].count("invocation_settled") == 1


def test_the_digest_is_exported_and_verifies_offline(
    client: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dsid, inv = _reserve(client, PTR)
    output = {"median": "17.25", "label": "Größe"}
    assert _settle(client, dsid, inv, {"output": output}).status_code == 200
    _, named = _reserve(client, PTR)  # another dataset's invocation: no settlement here
    published = tmp_path / "published.json"
    published.write_text(json.dumps(output, indent=2, ensure_ascii=False), encoding="utf-8")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**output, "median": "17.5"}), encoding="utf-8")
    refused = tmp_path / "refused.json"
    refused.write_text("null", encoding="utf-8")
    as_json = client.get(f"/v1/datasets/{dsid}/ledger", headers=AUTH).json()["entries"]
    jsonl = tmp_path / "ledger.jsonl"
    jsonl.write_text("".join(json.dumps(e) + "\n" for e in as_json), encoding="utf-8")
    paths = [jsonl]
    for fmt in ("csv", "json"):
        r = client.get(
            f"/v1/datasets/{dsid}/ledger", params={"format": fmt, "limit": 1000}, headers=AUTH
        )
        assert r.status_code == 200, r.text
        entries = load_export(r.text)
        assert entries[-1]["request"]["output_digest"] == _sha256(output)
        paths.append(tmp_path / f"ledger.{fmt}")
        paths[-1].write_text(r.text, encoding="utf-8")
    for path in paths:
        assert main(["verify", str(path), "--unpinned"]) == 0
        # the published output matches the settlement's digest and cell
        capsys.readouterr()
        assert main(["verify", str(path), "--unpinned", "--output", f"{inv}={published}"]) == 0
        assert json.loads(capsys.readouterr().out)["outputs"] == {"checked": 1, "matched": 1}
        # another output, ⊥ (another cell too), or an invocation the ledger did not settle
        assert main(["verify", str(path), "--unpinned", "--output", f"{inv}={other}"]) == 1
        assert "the ledger recorded " + _sha256(output) in capsys.readouterr().out
        assert main(["verify", str(path), "--unpinned", "--output", f"{inv}={refused}"]) == 1
        problems = json.loads(capsys.readouterr().out)["problems"]
        assert any("lies in cell 'bottom', the ledger charged 'value'" in p for p in problems)
        assert main(["verify", str(path), "--unpinned", "--output", f"{named}={published}"]) == 1
        assert "the ledger has no settlement" in capsys.readouterr().out


def test_verify_reports_an_output_settled_by_naming_its_cell(
    client: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dsid, inv = _reserve(client, SVT)
    assert _settle(client, dsid, inv, {"cell": "tops=1"}).status_code == 200
    export = tmp_path / "ledger.json"
    export.write_text(client.get(f"/v1/datasets/{dsid}/ledger", headers=AUTH).text)
    answers = tmp_path / "answers.json"
    answers.write_text("[false, true]")
    capsys.readouterr()
    assert main(["verify", str(export), "--unpinned", "--output", f"{inv}={answers}"]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert problems == [
        f"output of {inv} (seq 3): was settled by naming its cell: the ledger records no "
        "output digest"
    ]
    floats = tmp_path / "floats.json"
    floats.write_text("[0.5]")
    with pytest.raises(SystemExit, match="binary float"):
        main(["verify", str(export), "--unpinned", "--output", f"{inv}={floats}"])
    with pytest.raises(SystemExit, match="INVOCATION_ID=FILE"):
        main(["verify", str(export), "--unpinned", "--output", str(answers)])
