"""Replay of a mixed history reproduces the stored state exactly; tampering is detected."""

from __future__ import annotations

import copy
import hashlib
import json
from decimal import Decimal
from typing import Any

import pytest

from app.db.uow import UnitOfWork
from app.services import datasets, invocations, ledger, registration, reservations
from app.services.errors import InvocationNotReserved
from app.services.principals import Principal, Role
from odometer_core.accounting import parse_declaration
from odometer_core.ledger.chain import entry_hash, verify_chain
from odometer_core.ledger.replay import replay

ADMIN = Principal("admin", Role.ADMIN, None)
# An admin acting as analyst: analysts need a grant, whose ledger entry would shift the
# positions the tampering cases below refer to (grants are replayed in test_hierarchy.py).
ALICE = Principal("alice", Role.ADMIN, None)


def _register(uow: UnitOfWork, dsid: str, mechanism: dict[str, Any], **kw: Any) -> dict[str, Any]:
    request = registration.InvocationRequest(parse_declaration(mechanism), **kw)
    out: dict[str, Any] = json.loads(
        invocations.register_invocation(uow, ALICE, dsid, request).body
    )
    return out


def _mixed_history(uow: UnitOfWork) -> str:
    """Every entry kind, several modes' declarations, a split dataset with sub-budgets."""
    ds = datasets.create_dataset(
        uow,
        ADMIN,
        datasets.NewDataset(
            name="mixed",
            epsilon="6",
            delta="0.001",
            relation="add_remove",
            accounting={
                "mode": "split",
                "sub_budgets": [
                    {"name": "odp", "budget": {"epsilon": "1", "delta": "0.000002"}},
                    {
                        "name": "z",
                        "budget": {"epsilon": "2", "delta": "0.0001"},
                        "accounting": {"mode": "zcdp"},
                    },
                    {
                        "name": "r",
                        "budget": {"epsilon": "2", "delta": "0.00001"},
                        "accounting": {"mode": "rdp"},
                    },
                ],
            },
        ),
    )
    dsid = str(ds["id"])
    odp = {
        "type": "odp",
        "cells": [{"name": "a", "epsilon": "0.1"}, {"name": "b", "epsilon": "0.4"}],
        "delta": "1e-7",
    }
    r1 = _register(uow, dsid, odp, sub_budget="odp")
    r2 = _register(uow, dsid, odp, sub_budget="odp")
    _register(
        uow, dsid, {"type": "svt", "epsilon1": "0.05", "epsilon2": "0.1", "c": 3}, sub_budget="odp"
    )
    reservations.settle_invocation(uow, ALICE, dsid, r1["id"], "a")
    reservations.cancel_invocation(uow, ALICE, dsid, r2["id"])
    _register(
        uow,
        dsid,
        {"type": "gaussian", "sigma": "20"},
        sub_budget="odp",
        conversion_delta=Decimal("1e-7"),
    )
    _register(uow, dsid, {"type": "gaussian", "sigma": "10", "sensitivity": "1"}, sub_budget="z")
    _register(uow, dsid, {"type": "pure_dp", "epsilon": "0.3"}, sub_budget="z")
    _register(
        uow,
        dsid,
        {
            "type": "subsampled",
            "scheme": "poisson",
            "rate": "0.01",
            "mechanism": {"type": "gaussian", "sigma": "1.1"},
        },
        sub_budget="r",
    )
    _register(
        uow,
        dsid,
        {"type": "dp_sgd", "noise_multiplier": "1.1", "sample_rate": "0.01", "steps": 100},
        sub_budget="r",
    )
    _register(uow, dsid, {"type": "pure_dp", "epsilon": "5"}, sub_budget="z")  # rejected
    datasets.change_budget(uow, ADMIN, dsid, datasets.BudgetChange(epsilon="7", delta="0.002"))
    datasets.change_budget(
        uow, ADMIN, dsid, datasets.BudgetChange(epsilon="1.5", delta="0.000002", sub_budget="odp")
    )
    _register(uow, dsid, {"type": "pure_dp", "epsilon": "0.6"}, sub_budget="odp")
    return dsid


def _export(uow: UnitOfWork, dsid: str) -> list[dict[str, Any]]:
    return list(ledger.read_ledger(uow, ADMIN, dsid, ledger.LedgerQuery(limit=10_000)))


def test_replay_reproduces_every_state_exactly(uow: UnitOfWork) -> None:
    dsid = _mixed_history(uow)
    entries = _export(uow, dsid)
    assert [e["kind"] for e in entries] == [
        "dataset_created",
        "invocation_reserved",
        "invocation_reserved",
        "invocation_reserved",
        "invocation_settled",
        "invocation_cancelled",
        "invocation_accepted",
        "invocation_accepted",
        "invocation_accepted",
        "invocation_accepted",
        "invocation_accepted",
        "invocation_rejected",
        "budget_changed",
        "budget_changed",
        "invocation_accepted",
    ]
    verdict = replay(entries)
    assert verdict.problems == []
    assert verdict.ok
    assert verdict.entries == 15
    stored = datasets.get_dataset(uow, ADMIN, dsid)
    assert verdict.state == entries[-1]["state"]
    assert verdict.head_hash == stored["ledger"]["head_hash"]
    full = ledger.verify_ledger(uow, ADMIN, dsid)
    assert full.ok, full.problems
    odp_status = stored["status"]["sub_budgets"]["odp"]
    # 0.1 settled + 0.1 (svt worst cell reserved: 0.05 + 0.1) + gaussian + 0.6; δ never refunded
    assert odp_status["reserved"] == {"epsilon": "0.15", "open": 1}
    assert odp_status["budget"] == {"epsilon": "1.5", "delta": "0.000002"}


def test_settle_twice_is_refused_by_the_service(uow: UnitOfWork) -> None:
    ds = datasets.create_dataset(
        uow, ADMIN, datasets.NewDataset("s", "1", "0", "add_remove", {"mode": "basic"})
    )
    inv = _register(uow, ds["id"], {"type": "ptr", "epsilon": "0.1", "delta": "0"})
    reservations.settle_invocation(uow, ALICE, ds["id"], inv["id"], "bottom")
    with pytest.raises(InvocationNotReserved):
        reservations.settle_invocation(uow, ALICE, ds["id"], inv["id"], "value")


def _tampered(entries: list[dict[str, Any]], how: str) -> list[dict[str, Any]]:
    out = copy.deepcopy(entries)
    if how == "flip a byte in a charge":
        assert out[7]["charge"] == {"rho": "0.005", "delta": "0"}
        out[7]["charge"]["rho"] = "0.004"
    elif how == "flip a byte and re-hash that entry":
        out[7]["state"] = json.loads(json.dumps(out[7]["state"]).replace("0.", "1.", 1))
        out[7]["hash"] = entry_hash(out[7])
    elif how == "re-hash the whole chain after a change":
        out[4]["request"]["cell"] = "b"
        prev = out[0]["prev_hash"]
        for e in out:
            e["prev_hash"] = prev
            e["hash"] = prev = entry_hash(e)
    elif how == "delete an entry":
        del out[5]
    elif how == "reorder two entries":
        out[6], out[7] = out[7], out[6]
    elif how == "insert an entry":
        out.insert(3, copy.deepcopy(out[2]))
    elif how == "truncate the head":
        out.pop()
        return out
    elif how == "change the actor":
        out[2]["actor"] = "mallory"
    else:  # pragma: no cover
        raise AssertionError(how)
    assert out != entries  # the tampering did change something
    return out


TAMPERING = [
    "flip a byte in a charge",
    "flip a byte and re-hash that entry",
    "re-hash the whole chain after a change",
    "delete an entry",
    "reorder two entries",
    "insert an entry",
    "change the actor",
]


@pytest.mark.parametrize("how", TAMPERING)
def test_tampering_is_detected(uow: UnitOfWork, how: str) -> None:
    dsid = _mixed_history(uow)
    entries = _export(uow, dsid)
    assert replay(entries).ok
    verdict = replay(_tampered(entries, how))
    assert not verdict.ok
    assert verdict.problems


def test_truncation_is_detected_against_the_stored_head(uow: UnitOfWork) -> None:
    dsid = _mixed_history(uow)
    entries = _export(uow, dsid)
    head = datasets.get_dataset(uow, ADMIN, dsid)["ledger"]
    truncated = replay(entries[:-1])
    assert truncated.ok  # a prefix is a valid chain on its own ...
    assert truncated.head_hash != head["head_hash"]  # ... but not the published head
    assert verify_chain(entries) == []


def _rehashed(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chain re-linked and re-hashed after an edit (what a writer of that content would
    have produced)."""
    prev = entries[0]["prev_hash"]
    for e in entries:
        e["prev_hash"] = prev
        e["hash"] = prev = entry_hash(e)
    return entries


def _output_history(uow: UnitOfWork) -> tuple[str, list[dict[str, Any]]]:
    """Settles from released outputs (SVT answers, PTR ⊥, an iterative stopping step) beside
    one that names its cell."""
    ds = datasets.create_dataset(
        uow, ADMIN, datasets.NewDataset("outputs", "10", "0.001", "add_remove", {"mode": "basic"})
    )
    dsid = str(ds["id"])
    svt = _register(uow, dsid, {"type": "svt", "epsilon1": "0.1", "epsilon2": "0.3", "c": 3})
    ptr = _register(uow, dsid, {"type": "ptr", "epsilon": "0.2", "delta": "1e-9"})
    it = _register(
        uow,
        dsid,
        {"type": "iterative", "step_epsilon": "0.01", "step_delta": "0", "stopping_points": [5, 9]},
    )
    named = _register(uow, dsid, {"type": "svt", "epsilon1": "0.1", "epsilon2": "0.3", "c": 3})
    outputs = {svt["id"]: [True, False, True], ptr["id"]: None, it["id"]: 5}
    for inv, output in outputs.items():
        reservations.settle_invocation(uow, ALICE, dsid, inv, None, output=output)
    reservations.settle_invocation(uow, ALICE, dsid, named["id"], "tops=1")
    return dsid, _export(uow, dsid)


def test_settles_from_outputs_record_the_digest_and_replay(uow: UnitOfWork) -> None:
    dsid, entries = _output_history(uow)
    settled = [e for e in entries if e["kind"] == "invocation_settled"]
    assert [e["request"] for e in settled] == [
        {"cell": "tops=2", "output_digest": hashlib.sha256(b"[true,false,true]").hexdigest()},
        {"cell": "bottom", "output_digest": hashlib.sha256(b"null").hexdigest()},
        {"cell": "stop=5", "output_digest": hashlib.sha256(b"5").hexdigest()},
        {"cell": "tops=1"},
    ]
    assert [e["charge"]["epsilon"] for e in settled] == ["0.3", "0.2", "0.05", "0.2"]
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert verdict.head_hash == datasets.get_dataset(uow, ADMIN, dsid)["ledger"]["head_hash"]
    assert ledger.verify_ledger(uow, ADMIN, dsid).ok


def test_a_settle_entry_without_a_digest_replays_to_the_same_states(uow: UnitOfWork) -> None:
    """The format before outputs were accepted: ``request`` holds the cell alone."""
    _, entries = _output_history(uow)
    old = copy.deepcopy(entries)
    for e in old:
        if e["kind"] == "invocation_settled":
            e["request"].pop("output_digest", None)
    verdict = replay(_rehashed(old))
    assert verdict.ok, verdict.problems
    assert verdict.state == replay(entries).state == entries[-1]["state"]


@pytest.mark.parametrize("digest", ["", "abc", "G" * 64, "A" * 64, 5])
def test_a_malformed_output_digest_is_refused(uow: UnitOfWork, digest: object) -> None:
    _, entries = _output_history(uow)
    bad = copy.deepcopy(entries)
    settle = next(e for e in bad if e["kind"] == "invocation_settled")
    settle["request"]["output_digest"] = digest
    verdict = replay(_rehashed(bad))
    assert not verdict.ok
    assert any("output_digest is not a SHA-256 hex digest" in p for p in verdict.problems)
