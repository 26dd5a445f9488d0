"""A registration on a partitioned dataset parses its partition and resolves its selection once.

Counted on the core's entry points (``Partition.resolve`` and the partition parser the service
uses), over HTTP, for registrations after the process has seen the dataset once (the first one
learns that it is partitioned): each resolves its selection once and parses the partition at
most once (it is parsed once per process, and kept: a partition never changes).

Shown able to fail: before the selections resolved ahead of the lock were handed to the
decision under it, each of these registrations resolved its selection twice and parsed the
partition twice (``assert [2, 2, 2] == [1, 1, 1]``).
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.services import _blocks
from odometer_core.partition import Partition
from tests.support import AUTH


def test_each_selection_is_resolved_once(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = client.post(
        "/v1/datasets",
        json={
            "name": "parsed once",
            "budget": {"epsilon": "10", "delta": "0.00001"},
            "partition": {"kind": "bucket", "unit": "record", "buckets": 100},
        },
        headers=AUTH,
    )
    assert r.status_code == 201, r.text
    ds = r.json()["id"]
    r = client.post(f"/v1/datasets/{ds}/blocks", json={"open": {"from": 0, "to": 99}}, headers=AUTH)
    assert r.status_code == 200, r.text

    def register(keys: list[int]) -> None:
        body = {"mechanism": {"type": "pure_dp", "epsilon": "0.01"}, "blocks": {"keys": keys}}
        r = client.post(f"/v1/datasets/{ds}/invocations", json=body, headers=AUTH)
        assert r.status_code == 201, r.text

    register([1, 2])  # the process learns the dataset is partitioned
    resolved: list[int] = []
    parsed: list[int] = []
    original_resolve = Partition.resolve
    original_parse = _blocks.parse_partition  # type: ignore[attr-defined]

    def counted_resolve(self: Partition, selection: Any) -> Any:
        resolved[-1] += 1
        return original_resolve(self, selection)

    def counted_parse(obj: Any) -> Any:
        parsed[-1] += 1
        return original_parse(obj)

    monkeypatch.setattr(Partition, "resolve", counted_resolve)
    monkeypatch.setattr(_blocks, "parse_partition", counted_parse)
    for keys in ([3, 40], [5, 6, 7, 90], [99]):
        resolved.append(0)
        parsed.append(0)
        register(keys)
    assert resolved == [1, 1, 1]
    assert all(n <= 1 for n in parsed), parsed
