"""Tampering with a long ledger export is always detected, and names the first bad entry.

One export of 100,000 entries is generated per module by ``benchmarks/ledger_gen.py`` (the
service's entry construction without HTTP or database; :func:`test_generator_matches_service`
checks it against a ledger written through the real services, entry for entry, hashes
included). The untouched export verifies (hash chain + full replay through the accounting core,
:class:`odometer_core.ledger.replay.Replayer`, the engine of ``replay()`` and ``odometer verify``).

Then 1,000 seeded random single-entry tamperings of six kinds are verified: byte flip inside a
field value, delete an entry, swap two adjacent entries, insert an entry (an exact duplicate,
or a forged entry that links and hashes correctly), edit one entry's stored state and re-hash
that entry only, edit it and re-hash the chain from there on. Re-verifying 10^5 entries a
thousand times would take hours, so each tampered ledger is verified from the verifier's own
snapshot (``Replayer.snapshot()``, taken every 50 entries during the untouched run) just
before the change, through a few entries past it; the unchanged prefix verified identically
(it did in the untouched run) and a chain re-hashed "from there on" is re-hashed through the
end of that window. Detection comes only from ``ChainWalker.check`` / ``Replayer.feed``.

Result (2026-11-22, seed 20261122): 1,000 tamperings — byte_flip 152/152, delete 168/168,
swap 179/179, insert 167/167, edit_state_rehash_entry 168/168, rehash_chain 166/166 detected,
and in every case the first problem names the first bad entry.

How it was shown to fail: :func:`test_chain_alone_misses_rehashed_edits` runs the same 1,000
tamperings with replay disabled (hash chain only, ``ChainWalker.check``). Run on 2026-11-22:
byte_flip 152/152, delete 168/168, swap 179/179, insert 167/167, edit_state_rehash_entry
168/168 (the next entry's ``prev_hash`` no longer links) but rehash_chain **0/166** — an edit
re-hashed from the tampered entry on is invisible to the chain and caught by replay alone.
Deleting the *last* entry (truncating the head) is not a tampering an export can reveal by
itself (nothing after it to break; compare with the service's head hash): deletions, swaps and
insertions are drawn below the head.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app import cli
from app.db.uow import UnitOfWork
from app.services import datasets, invocations, ledger, registration, reservations
from app.services.principals import Principal, Role
from benchmarks.ledger_gen import ACCOUNTING, DATASET_NAME, build, generate, random_ops
from odometer_core.accounting import parse_declaration
from odometer_core.ledger.chain import PAYLOAD_FIELDS, entry_hash
from odometer_core.ledger.formats import write_export
from odometer_core.ledger.replay import Replayer, replay

N_ENTRIES = 100_000
N_TAMPERINGS = 1_000
CHECKPOINT_EVERY = 50
WINDOW_AFTER = 4
KINDS = ("byte_flip", "delete", "swap", "insert", "edit_state_rehash_entry", "rehash_chain")

Entry = dict[str, Any]


class Export:
    def __init__(self, entries: list[Entry], checkpoints: list[Replayer], verdict: Any) -> None:
        self.entries = entries
        self.checkpoints = checkpoints
        self.verdict = verdict


@pytest.fixture(scope="module")
def export() -> Export:
    entries = list(generate(N_ENTRIES, seed=2026))
    replayer = Replayer()
    checkpoints: list[Replayer] = []
    for index, entry in enumerate(entries):
        if index % CHECKPOINT_EVERY == 0:
            checkpoints.append(replayer.snapshot())
        replayer.feed(entry)
    return Export(entries, checkpoints, replayer.verdict())


# ---------------------------------------------------------------------------- tamperings
def _flip_char(c: str, rng: random.Random) -> str:
    if c.isdigit():
        return str((int(c) + rng.randrange(1, 10)) % 10)
    pool = "abcdefghijklmnopqrstuvwxyz" if c.islower() else "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return rng.choice([x for x in pool if x != c])


def _byte_flip(entry: Entry, rng: random.Random) -> Entry:
    fields = [f for f in (*PAYLOAD_FIELDS, "hash") if entry.get(f) is not None]
    while True:
        field = rng.choice(fields)
        text = json.dumps(entry[field], ensure_ascii=False)
        spots = [i for i, c in enumerate(text) if c.isalnum() and c.isascii()]
        if not spots:
            continue
        i = rng.choice(spots)
        try:
            value = json.loads(text[:i] + _flip_char(text[i], rng) + text[i + 1 :])
        except json.JSONDecodeError:
            continue
        if value != entry[field]:
            out = copy.deepcopy(entry)
            out[field] = value
            return out


def _edit_state(entry: Entry) -> Entry:
    out = copy.deepcopy(entry)
    spent = Decimal(out["state"]["spent_epsilon"])
    out["state"]["spent_epsilon"] = str(spent - Decimal("0.0001") if spent else Decimal("0.0001"))
    return out


def tamper(
    entries: list[Entry], kind: str, k: int, rng: random.Random
) -> tuple[int, list[Entry], int, set[int]]:
    """``(lo, replacement, hi, expected)``: the tampered ledger is ``entries[:lo] +
    replacement + entries[hi:]``; ``expected`` = the acceptable first-bad positions."""
    if kind == "byte_flip":
        return k, [_byte_flip(entries[k], rng)], k + 1, {k + 1}
    if kind == "delete":
        return k, [], k + 1, {k + 1}
    if kind == "swap":
        return k, [entries[k + 1], entries[k]], k + 2, {k + 1}
    if kind == "insert":
        if rng.random() < 0.5:  # an exact duplicate of the entry before
            return k + 1, [copy.deepcopy(entries[k])], k + 1, {k + 2}
        # Forged: the next entry copied under a fresh invocation id, linked and hashed right.
        forged = copy.deepcopy(entries[k + 1])
        forged["invocation_id"] = "inv_" + "f" * 32
        forged["hash"] = entry_hash(forged)
        return k + 1, [forged], k + 1, {k + 2, k + 3}
    if kind == "edit_state_rehash_entry":
        edited = _edit_state(entries[k])
        edited["hash"] = entry_hash(edited)
        return k, [edited], k + 1, {k + 1}
    if kind == "rehash_chain":
        hi = min(len(entries), k + 1 + WINDOW_AFTER)
        window = [_edit_state(entries[k]), *copy.deepcopy(entries[k + 1 : hi])]
        prev = entries[k - 1]["hash"] if k else window[0]["prev_hash"]
        for e in window:
            e["prev_hash"] = prev
            e["hash"] = prev = entry_hash(e)
        # Re-hashed through the end: nothing unrehashed follows in the verified window.
        return k, window, len(entries), {k + 1}
    raise AssertionError(kind)


def _position(kind: str, n: int, rng: random.Random) -> int:
    if kind in ("swap", "insert", "delete"):
        return rng.randrange(1, n - 2)  # a neighbour is needed (and see the docstring)
    return rng.randrange(1, n)


def _first_bad(problems: list[str]) -> int | None:
    positions = [int(m.group(1)) for p in problems if (m := re.match(r"entry (\d+)", p))]
    return min(positions) if positions else None


def _verify_tampered(
    ex: Export,
    lo: int,
    replacement: list[Entry],
    hi: int,
    check: Callable[[Replayer, Iterator[Entry]], list[str]],
) -> list[str]:
    """Verify the tampered ledger from the last snapshot before ``lo`` through a few entries
    after the change."""
    snap = min(lo, len(ex.entries) - 1) // CHECKPOINT_EVERY
    replayer = ex.checkpoints[snap].snapshot()
    start = snap * CHECKPOINT_EVERY
    fed = iter([*ex.entries[start:lo], *replacement, *ex.entries[hi : hi + WINDOW_AFTER]])
    return check(replayer, fed)


def _full(replayer: Replayer, entries: Iterator[Entry]) -> list[str]:
    for e in entries:
        replayer.feed(e)
    return replayer.verdict().problems


def _chain_only(replayer: Replayer, entries: Iterator[Entry]) -> list[str]:
    walker = replayer.chain
    return [f"entry {p.position}: {p.problem}" for e in entries for p in walker.check(e)]


def _run(ex: Export, check: Callable[[Replayer, Iterator[Entry]], list[str]]) -> dict[str, Any]:
    rng = random.Random(20261122)
    n = len(ex.entries)
    tried: Counter[str] = Counter()
    detected: Counter[str] = Counter()
    named: Counter[str] = Counter()
    misses: list[str] = []
    for _ in range(N_TAMPERINGS):
        kind = rng.choice(KINDS)
        k = _position(kind, n, rng)
        lo, replacement, hi, expected = tamper(ex.entries, kind, k, rng)
        problems = _verify_tampered(ex, lo, replacement, hi, check)
        tried[kind] += 1
        if problems:
            detected[kind] += 1
            if _first_bad(problems) in expected:
                named[kind] += 1
            else:
                misses.append(f"{kind}@{k}: first {_first_bad(problems)}, expected {expected}")
    return {"tried": tried, "detected": detected, "named": named, "misses": misses}


# ---------------------------------------------------------------------------- tests
def test_untouched_export_verifies(export: Export) -> None:
    assert len(export.entries) >= 100_000
    kinds = Counter(e["kind"] for e in export.entries)
    assert {
        "invocation_accepted",
        "invocation_reserved",
        "invocation_rejected",
        "invocation_settled",
        "invocation_cancelled",
        "budget_changed",
    } <= set(kinds)
    assert export.verdict.problems == []
    assert export.verdict.ok
    assert export.verdict.entries == len(export.entries)
    assert export.verdict.head_hash == export.entries[-1]["hash"]
    # The snapshot-based window check itself finds nothing on untouched windows.
    for lo in (1, 777, 50_000, len(export.entries) - 3):
        assert _verify_tampered(export, lo, [], lo, _full) == []


def test_random_single_entry_tamperings_are_all_detected(export: Export) -> None:
    result = _run(export, _full)
    print(
        "\ntampering detection (full verifier):",
        {
            k: f"{result['detected'][k]}/{result['tried'][k]} named {result['named'][k]}"
            for k in KINDS
        },
    )
    assert sum(result["tried"].values()) == N_TAMPERINGS
    assert set(result["tried"]) == set(KINDS)
    assert result["detected"] == result["tried"], result["detected"]
    assert result["misses"] == []
    assert result["named"] == result["tried"]


def test_chain_alone_misses_rehashed_edits(export: Export) -> None:
    """The negative control: without replay, re-hashed edits pass (so replay is what catches
    them above, and the tampering generator really produces them)."""
    result = _run(export, _chain_only)
    print(
        "\ntampering detection (chain only):",
        {k: f"{result['detected'][k]}/{result['tried'][k]}" for k in KINDS},
    )
    assert result["detected"]["rehash_chain"] == 0
    for kind in ("byte_flip", "delete", "swap", "insert"):
        assert result["detected"][kind] == result["tried"][kind]


# ---------------------------------------------------------------------------- generator
ADMIN = Principal("admin", Role.ADMIN, None)


def test_generator_matches_service(uow: UnitOfWork) -> None:
    """The generator writes exactly what the services write for the same calls."""
    ops = list(random_ops(400, seed=7))
    ds = datasets.create_dataset(
        uow, ADMIN, datasets.NewDataset(DATASET_NAME, "10", "0.001", "add_remove", ACCOUNTING)
    )
    dsid = str(ds["id"])
    open_: list[str] = []
    for op in ops:
        who = Principal(op.actor, Role.ADMIN, None)
        if op.kind == "register":
            request = registration.InvocationRequest(parse_declaration(op.mechanism or {}))
            response = invocations.register_invocation(uow, who, dsid, request)
            body = json.loads(response.body)
            if response.decision == "reserved":
                open_.append(body["id"])
        elif op.kind == "budget":
            datasets.change_budget(
                uow, ADMIN, dsid, datasets.BudgetChange(epsilon=op.epsilon, delta=op.delta)
            )
        else:
            inv = open_.pop(op.pick % len(open_))
            if op.kind == "settle":
                reservations.settle_invocation(uow, who, dsid, inv, op.cell or "")
            else:
                reservations.cancel_invocation(uow, who, dsid, inv)
    written = list(ledger.read_ledger(uow, ADMIN, dsid, ledger.LedgerQuery(limit=10_000)))
    assert len(written) == len(ops) + 1
    assert {e["kind"] for e in written} >= {
        "invocation_rejected",
        "invocation_settled",
        "invocation_cancelled",
        "budget_changed",
    }
    generated = list(
        build(
            ops,
            dataset_id=dsid,
            epsilon="10",
            delta="0.001",
            ids=iter(
                [
                    e["invocation_id"]
                    for e in written
                    if e["kind"]
                    in ("invocation_accepted", "invocation_reserved", "invocation_rejected")
                ]
            ),
            times=iter([e["at"] for e in written]),
            organisation=str(ds["organisation"]),
        )
    )
    for mine, theirs in zip(generated, written, strict=True):
        assert mine == theirs
    assert replay(written).ok


# ---------------------------------------------------------------------------- odometer verify
@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv"])
def test_odometer_verify_reads_every_format(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """JSON lines are streamed by ``odometer verify``; JSON and CSV still work; a tampered
    line fails with the first bad entry named."""
    entries = list(generate(2_000, seed=3))
    path = tmp_path / f"ledger.{fmt}"
    with path.open("w", encoding="utf-8") as out:
        write_export(entries[0]["dataset_id"], entries, out, fmt)  # type: ignore[arg-type]
    assert cli.main(["verify", str(path), "--unpinned"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["ok"] is True
    assert verdict["entries"] == 2_000
    assert verdict["head_hash"] == entries[-1]["hash"]
    entries[1234] = _edit_state(entries[1234])
    with path.open("w", encoding="utf-8") as out:
        write_export(entries[0]["dataset_id"], entries, out, fmt)  # type: ignore[arg-type]
    assert cli.main(["verify", str(path), "--unpinned"]) == 1
    verdict = json.loads(capsys.readouterr().out)
    assert _first_bad(verdict["problems"]) == 1235


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_two_process_verify_finds_what_one_process_finds(
    jobs: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``odometer verify --jobs 2`` walks the chain in a second process; its problems must be
    the single process's. Entry 500's ``actor`` is changed without re-hashing (only the chain
    sees that: replay does not recompute actors) and entry 1700's state is edited (replay
    sees it).

    Shown to fail (2026-11-22) with ``verify_jsonl_file`` not adding the second process's
    chain problems (``replayer.add_chain_problems(chain.result())`` removed): the ``jobs=2``
    case failed, ``_first_bad`` was 1700 instead of 500 (the chain-only tampering was lost).
    """
    entries = list(generate(2_000, seed=5))
    path = tmp_path / "ledger.jsonl"
    with path.open("w", encoding="utf-8") as out:
        write_export(entries[0]["dataset_id"], entries, out, "jsonl")
    assert cli.main(["verify", "--jobs", jobs, str(path), "--unpinned"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert (verdict["ok"], verdict["entries"]) == (True, 2_000)
    entries[499] = {**entries[499], "actor": "mallory"}
    entries[1699] = _edit_state(entries[1699])
    with path.open("w", encoding="utf-8") as out:
        write_export(entries[0]["dataset_id"], entries, out, "jsonl")
    assert cli.main(["verify", "--jobs", jobs, str(path), "--unpinned"]) == 1
    verdict = json.loads(capsys.readouterr().out)
    assert _first_bad(verdict["problems"]) == 500
    # exactly the in-memory verifier's problems, in its order (chain first, then replay)
    assert verdict["problems"] == replay(entries).problems
    assert len(verdict["problems"]) == 3  # 500: hash; 1700: hash and the replayed state


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_binary_float_in_an_export_line_is_refused(
    jobs: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A float where the ledger has a decimal string is refused while parsing (no float walk
    runs on parsed entries), with the line named.

    Shown to fail (2026-11-22) with ``iter_jsonl_export`` parsing by plain ``json.loads`` in
    strict mode: the float reached ``parsed_entry_hash``, which trusts the parser; both cases
    failed with ``assert 300 == 149`` (the line was read as an entry, not refused).
    """
    entries = list(generate(300, seed=9))
    path = tmp_path / "ledger.jsonl"
    with path.open("w", encoding="utf-8") as out:
        write_export(entries[0]["dataset_id"], entries, out, "jsonl")
    lines = path.read_text("utf-8").splitlines(keepends=True)
    assert '"spent_epsilon":"' in lines[149]
    lines[149] = re.sub(r'"spent_epsilon":"([0-9.]+)"', r'"spent_epsilon":\1', lines[149])
    path.write_text("".join(lines), "utf-8")
    assert cli.main(["verify", "--jobs", jobs, str(path), "--unpinned"]) == 1
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["ok"] is False
    assert verdict["entries"] == 149
    assert verdict["problems"][-1].startswith("line 150: not a ledger entry: binary float '")
    assert len(verdict["problems"]) == 1


def test_canonical_encoding_refuses_floats_anywhere() -> None:
    """The write path's float check (iterative since the speed-up) still refuses floats and
    non-string keys at any depth, names where, and leaves the canonical bytes unchanged."""
    from odometer_core.ledger.chain import canonical_bytes, loads_strict

    for value, where in [
        ({"a": [1, {"b": 0.5}]}, "$.a[1].b"),
        ({"a": (1, 2.0)}, "$.a[1]"),
        ([{"x": {"y": [float("nan")]}}], "$[0].x.y[0]"),
    ]:
        with pytest.raises(TypeError, match=re.escape(where) + ": binary floats"):
            canonical_bytes(value)
    with pytest.raises(TypeError, match="keys must be strings"):
        canonical_bytes({"a": {1: "x"}})
    assert canonical_bytes({"b": [1, "é", None, True], "a": {"z": "0.1"}}) == (
        '{"a":{"z":"0.1"},"b":[1,"é",null,true]}'.encode()
    )
    for text in ('{"a":1.5}', '{"a":[NaN]}', '{"a":{"b":1e5}}', '{"a":-Infinity}'):
        with pytest.raises(ValueError, match="binary float"):
            loads_strict(text)
    assert loads_strict('{"a":[1,"2",null]}') == {"a": [1, "2", None]}


def test_chain_walker_process_loads_no_accounting(tmp_path: Path) -> None:
    """The second process of ``verify --jobs 2`` finds the chain's defects without importing
    the accounting core, numpy or scipy (about a second of CPU per run that it never uses).

    Shown to fail (2026-11-30) with the pool started without ``initializer=light_ledger`` (the
    worker then imported ``odometer_core.ledger``'s ``__init__``): the modules listed were
    numpy's, scipy's and the accounting core's instead of none.
    """
    from odometer_core.verify import chain_walker_pool
    from odometer_core.verify_walk import walk_chain_file

    entries = list(generate(300, seed=11))
    entries[99] = {**entries[99], "actor": "mallory"}  # a chain defect only
    path = tmp_path / "ledger.jsonl"
    with path.open("w", encoding="utf-8") as out:
        write_export(entries[0]["dataset_id"], entries, out, "jsonl")
    heavy = (
        "sorted(m for m in __import__('sys').modules"
        " if m.split('.')[0] in {'numpy', 'scipy'} or m.startswith('odometer_core.accounting'))"
    )
    with chain_walker_pool() as pool:
        problems = pool.submit(walk_chain_file, str(path)).result()
        loaded = pool.submit(eval, heavy).result()
    assert loaded == []
    assert [(p.position, p.seq, p.problem) for p in problems] == [
        (100, 100, "hash does not match the entry's content")
    ]
