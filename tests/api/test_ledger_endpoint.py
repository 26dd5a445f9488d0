"""The ledger endpoint: pages, filters, CSV, and offline verification of an export."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from fastapi.testclient import TestClient

from app.cli import main
from odometer_core.ledger.chain import GENESIS_HASH, PAYLOAD_FIELDS, entry_hash
from odometer_core.ledger.formats import load_export
from odometer_core.ledger.replay import replay
from tests.support import AUTH, basic_dataset


def _history(client: TestClient) -> str:
    ds = basic_dataset(client, epsilon="0.5")
    url = f"/v1/datasets/{ds['id']}/invocations"
    for eps in ("0.1", "0.2", "0.3", "0.1"):  # the third is rejected
        client.post(url, json={"mechanism": {"type": "pure_dp", "epsilon": eps}}, headers=AUTH)
    return str(ds["id"])


def test_pages_follow_the_cursor(client: TestClient) -> None:
    dsid = _history(client)
    url = f"/v1/datasets/{dsid}/ledger"
    first = client.get(url, params={"limit": 2}, headers=AUTH).json()
    assert first["head_seq"] == 5
    assert [e["seq"] for e in first["entries"]] == [1, 2]
    assert first["next_after_seq"] == 2
    second = client.get(url, params={"limit": 2, "after_seq": 2}, headers=AUTH).json()
    assert [e["seq"] for e in second["entries"]] == [3, 4]
    last = client.get(url, params={"limit": 2, "after_seq": 4}, headers=AUTH).json()
    assert [e["seq"] for e in last["entries"]] == [5]
    assert last["next_after_seq"] is None
    entries = first["entries"] + second["entries"] + last["entries"]
    assert entries[0]["prev_hash"] == GENESIS_HASH
    assert all(e["hash"] == entry_hash(e) for e in entries)
    assert all(b["prev_hash"] == a["hash"] for a, b in itertools.pairwise(entries))
    assert replay(entries).ok


def test_filters(client: TestClient) -> None:
    dsid = _history(client)
    url = f"/v1/datasets/{dsid}/ledger"
    rejected = client.get(url, params={"kind": "invocation_rejected"}, headers=AUTH).json()[
        "entries"
    ]
    assert [(e["seq"], e["requested"]["epsilon"]) for e in rejected] == [(4, "0.3")]
    both = client.get(
        url, params=[("kind", "dataset_created"), ("kind", "invocation_rejected")], headers=AUTH
    ).json()["entries"]
    assert [e["seq"] for e in both] == [1, 4]
    # an actor nobody is, is a 422 that says what the filter takes (issue 38), not nothing
    nobody = client.get(url, params={"actor": "nobody"}, headers=AUTH)
    assert nobody.status_code == 422
    assert "'actor' is a principal's id" in nobody.json()["detail"]
    assert len(client.get(url, params={"actor": "admin"}, headers=AUTH).json()["entries"]) == 5
    all_entries = client.get(url, headers=AUTH).json()["entries"]
    third_at = all_entries[2]["at"]
    since = client.get(url, params={"since": third_at}, headers=AUTH).json()["entries"]
    assert [e["seq"] for e in since] == [3, 4, 5]
    until = client.get(url, params={"until": third_at}, headers=AUTH).json()["entries"]
    assert [e["seq"] for e in until] == [1, 2]
    assert (
        client.get(url, params={"since": "2000-01-01T00:00:00+02:00"}, headers=AUTH).json()[
            "entries"
        ][0]["seq"]
        == 1
    )
    assert client.get(url, params={"since": "not a time"}, headers=AUTH).status_code == 422
    assert client.get(url, params={"kind": "nonsense"}, headers=AUTH).status_code == 422


def test_filters_combine_and_an_empty_window_is_refused(client: TestClient) -> None:
    """Kind, actor and time filters narrow each other and page with the cursor; ``until`` at
    or before ``since`` is a 422 that names the parameter."""
    dsid = _history(client)
    url = f"/v1/datasets/{dsid}/ledger"
    entries = client.get(url, headers=AUTH).json()["entries"]
    second_at, last_at = entries[1]["at"], entries[-1]["at"]
    params: list[tuple[str, str | int]] = [
        ("actor", "admin"),
        ("kind", "invocation_accepted"),
        ("kind", "invocation_rejected"),
        ("since", second_at),
        ("limit", 1),
    ]
    first = client.get(url, params=params, headers=AUTH).json()
    assert [e["seq"] for e in first["entries"]] == [2]
    assert first["next_after_seq"] == 2
    rest = client.get(url, params=[*params[:-1], ("after_seq", 2)], headers=AUTH).json()
    assert [(e["seq"], e["kind"]) for e in rest["entries"]] == [
        (3, "invocation_accepted"),
        (4, "invocation_rejected"),
        (5, "invocation_accepted"),
    ]
    window = [("since", second_at), ("until", last_at)]
    inside = client.get(url, params=window, headers=AUTH).json()["entries"]
    assert [e["seq"] for e in inside] == list(range(2, len(entries)))
    for since, until in ((last_at, second_at), (second_at, second_at)):
        r = client.get(url, params={"since": since, "until": until}, headers=AUTH)
        assert r.status_code == 422, r.text
        assert r.json()["error"] == "ValidationError"
        assert r.json()["detail"] == "query.until: until must be later than since"


def test_csv_export_verifies_offline(client: TestClient, tmp_path: Path) -> None:
    dsid = _history(client)
    r = client.get(
        f"/v1/datasets/{dsid}/ledger", params={"format": "csv", "limit": 1000}, headers=AUTH
    )
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/csv")
    lines = r.text.splitlines()
    assert lines[0] == ",".join([*PAYLOAD_FIELDS, "hash"])
    assert len(lines) == 6
    entries = load_export(r.text)
    as_json = client.get(f"/v1/datasets/{dsid}/ledger", headers=AUTH).json()["entries"]
    assert entries == as_json  # CSV is lossless
    (tmp_path / "ledger.csv").write_text(r.text)
    assert main(["verify", str(tmp_path / "ledger.csv"), "--unpinned"]) == 0
    # a flipped byte in the export is caught by the verifier
    tampered = r.text.replace('""epsilon"":""0.2""', '""epsilon"":""0.0""', 1)
    assert tampered != r.text
    (tmp_path / "tampered.csv").write_text(tampered)
    assert main(["verify", str(tmp_path / "tampered.csv"), "--unpinned"]) == 1
    doc = {"entries": as_json}
    (tmp_path / "ledger.json").write_text(json.dumps(doc))
    assert main(["verify", str(tmp_path / "ledger.json"), "--unpinned"]) == 0
