"""Mixed-lifecycle load: many clients, every accounting mode, an auditor watching.

The driver runs ``clients`` threads, each with its own keep-alive connection and its own
seeded random stream, doing ``per_client`` operations over a fixed set of datasets (two per
mode: ``basic``, ``zcdp``, ``rdp``, ``gdp``, ``split``): registrations (ODP reservations in
``basic`` sub-budgets), settlements, cancellations, previews, budget changes and replays of
earlier keyed requests. Each client remembers what it was told; the checker compares that
with the ledgers at the end.

The auditor runs alongside: it polls every dataset's status and reads its ledger from where
it stopped, replaying each new entry through the accounting core (:class:`Replayer`). Every
state it sees - each polled status and the state after every ledger entry - must be within
budget in the mode's own units (Decimal comparisons), and each polled status must equal the
status recomputed from the replayed ledger at the polled ``last_seq``.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from app.schemas.shown import status_shown
from odometer_core.accounting.filters import status as filter_status
from odometer_core.accounting.summary import compose
from odometer_core.ledger.blocks import BlockHistory
from odometer_core.ledger.replay import Replayer
from tests.support import AUTH

JSON_HEADERS = {**AUTH, "content-type": "application/json"}

# ---------------------------------------------------------------------------- datasets
#: (name, budget, accounting). Budgets are small enough that every dataset runs out and
#: rejects, so admission at the edge of the budget is exercised in every mode.
DATASETS: list[tuple[str, dict[str, str], dict[str, Any]]] = [
    ("basic-a", {"epsilon": "2", "delta": "0.00001"}, {"mode": "basic"}),
    ("basic-b", {"epsilon": "1", "delta": "0.000001"}, {"mode": "basic"}),
    ("zcdp-a", {"epsilon": "2", "delta": "0.00001"}, {"mode": "zcdp"}),
    ("zcdp-b", {"epsilon": "1", "delta": "0.000001"}, {"mode": "zcdp"}),
    ("rdp-a", {"epsilon": "2", "delta": "0.00001"}, {"mode": "rdp"}),
    ("rdp-b", {"epsilon": "1", "delta": "0.000001"}, {"mode": "rdp"}),
    ("gdp-a", {"epsilon": "2", "delta": "0.00001"}, {"mode": "gdp"}),
    ("gdp-b", {"epsilon": "1", "delta": "0.000001"}, {"mode": "gdp"}),
    (
        "split-a",
        {"epsilon": "4", "delta": "0.00001"},
        {
            "mode": "split",
            "sub_budgets": [
                {"name": "basic", "budget": {"epsilon": "1", "delta": "0.000004"}},
                {
                    "name": "zcdp",
                    "budget": {"epsilon": "1", "delta": "0.000004"},
                    "accounting": {"mode": "zcdp"},
                },
            ],
        },
    ),
    (
        "split-b",
        {"epsilon": "4", "delta": "0.00001"},
        {
            "mode": "split",
            "sub_budgets": [
                {
                    "name": "rdp",
                    "budget": {"epsilon": "1", "delta": "0.000004"},
                    "accounting": {"mode": "rdp"},
                },
                {
                    "name": "gdp",
                    "budget": {"epsilon": "1", "delta": "0.000004"},
                    "accounting": {"mode": "gdp"},
                },
            ],
        },
    ),
]

#: Declarations each leaf mode accounts (a few per mode; ``odp`` only reserves in ``basic``).
DECLARATIONS: dict[str, list[dict[str, Any]]] = {
    "basic": [
        {"type": "pure_dp", "epsilon": "0.01"},
        {"type": "pure_dp", "epsilon": "0.05"},
        {"type": "approx_dp", "epsilon": "0.02", "delta": "0.00000001"},
        {"type": "gaussian", "sigma": "40"},
        {
            "type": "odp",
            "delta": "0.000000001",
            "cells": [{"name": "none", "epsilon": "0.01"}, {"name": "some", "epsilon": "0.06"}],
        },
        {
            "type": "odp",
            "cells": [
                {"name": "a", "epsilon": "0.02"},
                {"name": "b", "epsilon": "0.03"},
                {"name": "c", "epsilon": "0.08"},
            ],
        },
    ],
    "zcdp": [
        {"type": "zcdp", "rho": "0.001"},
        {"type": "pure_dp", "epsilon": "0.03"},
        {"type": "approx_dp", "epsilon": "0.03", "delta": "0.00000001"},
        {"type": "gdp", "mu": "0.05"},
        {"type": "gaussian", "sigma": "25"},
    ],
    "rdp": [
        {"type": "gaussian", "sigma": "25"},
        {"type": "pure_dp", "epsilon": "0.03"},
        {"type": "rdp", "orders": ["2", "8", "32"], "values": ["0.001", "0.004", "0.016"]},
    ],
    "gdp": [
        {"type": "gdp", "mu": "0.05"},
        {"type": "gaussian", "sigma": "30"},
    ],
}

#: Budget-change multipliers of a (sub-)ledger's original ε: lowering may be refused (409
#: BudgetBelowSpent), raising lets more through.
BUDGET_FACTORS = ("0.8", "1", "1.5", "2")


@dataclass
class Target:
    """A dataset, or one sub-budget of a split dataset, that invocations can name."""

    dataset_id: str
    mode: str
    ledger: str | None
    epsilon: Decimal
    delta: str


def targets_of(dataset_id: str, budget: dict[str, str], accounting: dict[str, Any]) -> list[Target]:
    if accounting["mode"] != "split":
        return [
            Target(
                dataset_id, accounting["mode"], None, Decimal(budget["epsilon"]), budget["delta"]
            )
        ]
    return [
        Target(
            dataset_id,
            sub.get("accounting", {"mode": "basic"})["mode"],
            sub["name"],
            Decimal(sub["budget"]["epsilon"]),
            sub["budget"]["delta"],
        )
        for sub in accounting["sub_budgets"]
    ]


# ---------------------------------------------------------------------------- invariants
def _d(text: str) -> Decimal:
    return Decimal(text)


def status_problems(st: dict[str, Any], where: str) -> list[str]:
    """Why ``st`` (a dataset status as served) is over budget; empty when within budget.
    Every comparison is exact (Decimal; RDP floats read from their ``repr``)."""
    mode = st["mode"]
    out: list[str] = []
    if mode == "split":
        total_e = sum((_d(s["budget"]["epsilon"]) for s in st["sub_budgets"].values()), Decimal(0))
        total_d = sum((_d(s["budget"]["delta"]) for s in st["sub_budgets"].values()), Decimal(0))
        if total_e > _d(st["budget"]["epsilon"]) or total_d > _d(st["budget"]["delta"]):
            out.append(f"{where}: sub-budget budgets ({total_e}, {total_d}) exceed the total")
        for name, sub in st["sub_budgets"].items():
            out.extend(status_problems(sub, f"{where}/{name}"))
        return out
    spent = st["spent"]
    if mode == "basic":
        used = _d(spent["epsilon"]) + _d(st["reserved"]["epsilon"])
        if used > _d(st["budget"]["epsilon"]):
            out.append(f"{where}: spent+reserved epsilon {used} > {st['budget']['epsilon']}")
        if _d(spent["delta"]) > _d(st["budget"]["delta"]):
            out.append(f"{where}: delta {spent['delta']} > {st['budget']['delta']}")
        if st["reserved"]["open"] < 0:
            out.append(f"{where}: negative open reservations")
    elif mode == "zcdp":
        if _d(spent["rho"]) > _d(st["rho_budget"]):
            out.append(f"{where}: rho {spent['rho']} > {st['rho_budget']}")
        if _d(spent["delta"]) > _d(st["delta_approx"]):
            out.append(f"{where}: delta {spent['delta']} > {st['delta_approx']}")
    elif mode == "rdp":
        if _d(spent["delta"]) > _d(st["delta_approx"]):
            out.append(f"{where}: delta {spent['delta']} > {st['delta_approx']}")
        live = [
            (_d(s), _d(b))
            for s, b, dead in zip(spent["rdp"], st["thresholds"], spent["dead"], strict=True)
            if not dead
        ]
        if not live:
            out.append(f"{where}: every RDP order is dead")
        out.extend(f"{where}: live order at {s} > threshold {b}" for s, b in live if s > b)
    elif mode == "gdp":
        if _d(spent["mu_squared"]) > _d(st["mu_squared_budget"]):
            out.append(f"{where}: mu^2 {spent['mu_squared']} > {st['mu_squared_budget']}")
    else:
        out.append(f"{where}: unknown mode {mode}")
    return out


# ---------------------------------------------------------------------------- HTTP
@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    replayed: bool

    def json(self) -> Any:
        return json.loads(self.body)


class Http:
    """One keep-alive connection (stdlib: far less client CPU than httpx on 2 cores)."""

    def __init__(self, base_url: str) -> None:
        url = urlsplit(base_url)
        self.host, self.port = str(url.hostname), url.port
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)

    def send(self, method: str, path: str, body: Any = None, key: str | None = None) -> Reply:
        headers = dict(JSON_HEADERS)
        if key is not None:
            headers["Idempotency-Key"] = key
        payload = None if body is None else json.dumps(body)
        self.conn.request(method, path, body=payload, headers=headers)
        response = self.conn.getresponse()
        data = response.read()
        replayed = response.getheader("Idempotent-Replayed") == "true"
        return Reply(response.status, data, replayed)

    def close(self) -> None:
        self.conn.close()


# ---------------------------------------------------------------------------- clients
@dataclass
class Keyed:
    """A keyed request and the first answer to it (replays must repeat it byte for byte)."""

    method: str
    path: str
    body: Any
    key: str
    first: Reply


@dataclass
class Tally:
    """What the clients were told, merged over all clients."""

    ops: Counter[str] = field(default_factory=Counter)
    #: (dataset id, ledger kind, invocation id) of every acknowledged invocation write
    effects: set[tuple[str, str, str]] = field(default_factory=set)
    budget_changes: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)


def _expect(tally: Tally, what: str, reply: Reply, allowed: dict[int, tuple[str, ...]]) -> bool:
    """Record a problem unless ``reply`` has an allowed status (and error code)."""
    codes = allowed.get(reply.status)
    if codes is None or (codes and reply.json().get("error") not in codes):
        tally.problems.append(f"{what}: unexpected {reply.status} {reply.body[:300]!r}")
        return False
    return True


class Client:
    """One simulated analyst/curator: a random walk over the operations."""

    def __init__(
        self,
        n: int,
        seed: int,
        base_url: str,
        targets: list[Target],
        tally: Tally,
        lock: threading.Lock,
    ) -> None:
        self.n = n
        self.rng = random.Random(seed * 1000 + n)
        self.http = Http(base_url)
        self.targets = targets
        self.tally, self.lock = tally, lock
        self.open: list[tuple[Target, str, list[str]]] = []  # my reservations: cells
        self.keyed: list[Keyed] = []
        self.counter = 0
        self.local = Tally()

    def _key(self) -> str:
        self.counter += 1
        return f"mix-c{self.n}-{self.counter}"

    def _keyed(self, method: str, path: str, body: Any) -> Reply:
        key = self._key()
        reply = self.http.send(method, path, body, key)
        self.keyed.append(Keyed(method, path, body, key, reply))
        return reply

    def register(self) -> None:
        target = self.rng.choice(self.targets)
        declaration = self.rng.choice(DECLARATIONS[target.mode])
        body: dict[str, Any] = {"mechanism": declaration}
        if target.ledger is not None:
            body["sub_budget"] = target.ledger
        path = f"/v1/datasets/{target.dataset_id}/invocations"
        reply = self._keyed("POST", path, body)
        if not _expect(self.local, "register", reply, {201: (), 409: ("BudgetExceeded",)}):
            return
        out = reply.json()
        if reply.status == 409:
            self.local.effects.add((target.dataset_id, "invocation_rejected", out["id"]))
            return
        self.local.effects.add((target.dataset_id, f"invocation_{out['status']}", out["id"]))
        if out["status"] == "reserved":
            cells = [c["name"] for c in declaration["cells"]]
            self.open.append((target, out["id"], cells))

    def finish(self, settle: bool) -> None:
        if not self.open:
            self.register()
            return
        target, inv, cells = self.open.pop(self.rng.randrange(len(self.open)))
        base = f"/v1/datasets/{target.dataset_id}/invocations/{inv}"
        if settle:
            reply = self._keyed("POST", f"{base}/settle", {"cell": self.rng.choice(cells)})
        else:
            reply = self._keyed("POST", f"{base}/cancel", None)
        if _expect(self.local, "settle" if settle else "cancel", reply, {200: ()}):
            kind = "invocation_settled" if settle else "invocation_cancelled"
            self.local.effects.add((target.dataset_id, kind, inv))

    def preview(self) -> None:
        target = self.rng.choice(self.targets)
        body: dict[str, Any] = {"mechanism": self.rng.choice(DECLARATIONS[target.mode])}
        if target.ledger is not None:
            body["sub_budget"] = target.ledger
        reply = self.http.send(
            "POST", f"/v1/datasets/{target.dataset_id}/invocations/preview", body
        )
        if _expect(self.local, "preview", reply, {200: ()}) and reply.json()["status"] not in (
            "accepted",
            "reserved",
            "rejected",
        ):
            self.local.problems.append(f"preview: odd status {reply.body[:200]!r}")

    def change_budget(self) -> None:
        target = self.rng.choice(self.targets)
        factor = Decimal(self.rng.choice(BUDGET_FACTORS))
        body: dict[str, Any] = {"epsilon": str(target.epsilon * factor), "delta": target.delta}
        if target.ledger is not None:
            body["sub_budget"] = target.ledger
        reply = self.http.send("PATCH", f"/v1/datasets/{target.dataset_id}/budget", body)
        allowed: dict[int, tuple[str, ...]] = {200: (), 409: ("BudgetBelowSpent",)}
        if _expect(self.local, "budget", reply, allowed) and reply.status == 200:
            self.local.budget_changes[target.dataset_id] += 1

    def replay(self) -> None:
        if not self.keyed:
            self.register()
            return
        old = self.rng.choice(self.keyed)
        again = self.http.send(old.method, old.path, old.body, old.key)
        if (again.status, again.body) != (old.first.status, old.first.body) or not again.replayed:
            self.local.problems.append(
                f"replay of {old.key}: {again.status} {again.body[:200]!r} (replayed="
                f"{again.replayed}) != first {old.first.status} {old.first.body[:200]!r}"
            )

    def run(self, operations: int) -> None:
        choices = (
            (self.register, 40),
            (lambda: self.finish(True), 15),
            (lambda: self.finish(False), 7),
            (self.preview, 15),
            (self.change_budget, 8),
            (self.replay, 15),
        )
        actions = [a for a, _ in choices]
        weights = [w for _, w in choices]
        try:
            for _ in range(operations):
                action = self.rng.choices(actions, weights)[0]
                action()
                self.local.ops["total"] += 1
            # leave a few reservations open, settle the rest: both end states are audited
            while len(self.open) > 1:
                self.finish(self.rng.random() < 0.7)
        except Exception as exc:  # a transport error is a failure of the run, not a crash
            self.local.problems.append(f"client {self.n}: {exc!r}")
        finally:
            self.http.close()
            with self.lock:
                self.tally.ops.update(self.local.ops)
                self.tally.effects |= self.local.effects
                self.tally.budget_changes.update(self.local.budget_changes)
                self.tally.problems.extend(self.local.problems)


# ---------------------------------------------------------------------------- auditor
@dataclass
class Watch:
    """The auditor's replay of one dataset, fed incrementally."""

    replayer: Replayer = field(default_factory=Replayer)
    cursor: int = 0
    #: statuses polled at a ledger seq the replay has not reached yet
    pending: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    #: ledger entries of each kind: kind -> invocation ids (budget changes: seqs)
    kinds: Counter[str] = field(default_factory=Counter)
    invocations: set[tuple[str, str]] = field(default_factory=set)
    broken: bool = False
    last_status: dict[str, Any] | None = None


class Auditor:
    """Polls status and the ledger of every dataset until stopped; see the module doc."""

    def __init__(self, base_url: str, dataset_ids: list[str]) -> None:
        self.http = Http(base_url)
        self.watches = {ds: Watch() for ds in dataset_ids}
        self.problems: list[str] = []
        self.polls = 0
        self.entries_checked = 0
        self.statuses_matched = 0

    def poll(self, dataset_id: str) -> None:
        watch = self.watches[dataset_id]
        got = self.http.send("GET", f"/v1/datasets/{dataset_id}")
        if got.status != 200:
            self.problems.append(f"status of {dataset_id}: {got.status} {got.body[:200]!r}")
            return
        ds = got.json()
        self.polls += 1
        self.problems.extend(status_problems(ds["status"], f"{dataset_id} polled"))
        seq = ds["ledger"]["last_seq"]
        if seq == watch.cursor and not watch.broken:  # nothing new since the last read
            self._compare(dataset_id, seq, ds["status"], watch.last_status)
        else:  # later entries: compared when the replay reaches ``seq``
            watch.pending.setdefault(seq, []).append(ds["status"])
        while True:  # the ledger up to the head (at least the polled seq), page by page
            page = self.http.send(
                "GET", f"/v1/datasets/{dataset_id}/ledger?after_seq={watch.cursor}&limit=5000"
            )
            if page.status != 200:
                self.problems.append(f"ledger of {dataset_id}: {page.status}")
                return
            entries = page.json()["entries"]
            for entry in entries:
                self._feed(dataset_id, watch, entry)
            if not entries or page.json()["next_after_seq"] is None:
                break
        for seq in [s for s in watch.pending if s <= watch.cursor]:
            if not watch.broken:
                self.problems.append(f"{dataset_id}: polled seq {seq} is not in the ledger")
            del watch.pending[seq]

    def _feed(self, dataset_id: str, watch: Watch, entry: dict[str, Any]) -> None:
        replayer = watch.replayer
        replayer.feed(entry)
        watch.cursor = entry["seq"]
        watch.kinds[entry["kind"]] += 1
        if entry["invocation_id"] is not None:
            watch.invocations.add((entry["kind"], entry["invocation_id"]))
        if replayer.stopped or replayer.chain_problems:
            if not watch.broken:  # report the first break; later states cannot be compared
                watch.broken = True
                self.problems.extend(
                    f"{dataset_id} replay: {p}"
                    for p in [*replayer.chain_problems, *replayer.replay_problems][:3]
                )
            return
        state = replayer.state
        assert replayer.config is not None and state is not None
        assert not isinstance(state, BlockHistory)  # the lifecycle's datasets are whole
        recomputed = filter_status(replayer.config, state)
        self.entries_checked += 1
        self.problems.extend(status_problems(recomputed, f"{dataset_id} seq {entry['seq']}"))
        watch.last_status = recomputed
        for observed in watch.pending.pop(entry["seq"], []):
            self._compare(dataset_id, entry["seq"], observed, recomputed)

    def _compare(
        self, dataset_id: str, seq: int, observed: dict[str, Any], recomputed: Any
    ) -> None:
        """The served status is the replayed one, and its summary is the replayed status's
        (its reading and what is left; ``more`` counts the last admitted declaration, which
        the status does not hold)."""
        observed = dict(observed)
        # whether the dataset is frozen behind the witness of its heads is the service's to
        # say, not the ledger's: no witness is kept here, so it must be null
        if observed.pop("frozen", None) is not None:
            self.problems.append(f"{dataset_id} seq {seq}: served as frozen")
        # the display text the API adds to a status (``shown``, the core's rounding of the
        # same figures) is the replayed status's too
        shown = observed.pop("shown", None)
        if shown is not None and shown != status_shown(recomputed).model_dump(mode="json"):
            self.problems.append(
                f"{dataset_id} seq {seq}: served display text {shown} != replayed "
                f"{status_shown(recomputed).model_dump(mode='json')}"
            )
        summary, expected = observed.pop("summary", None), compose(recomputed)
        # the wire writes an item's absent order and sub-budget as null
        left = [
            {k: v for k, v in item.items() if v is not None}
            for item in (summary or {}).get("left", [])
        ]
        if (
            summary is None
            or (summary["guarantee"], left) != (expected["guarantee"], expected["left"])
            or not summary["text"].startswith(expected["text"])
        ):
            self.problems.append(
                f"{dataset_id} seq {seq}: served summary {summary} != replayed {expected}"
            )
        if observed != recomputed:
            self.problems.append(
                f"{dataset_id} seq {seq}: served status {observed} != replayed {recomputed}"
            )
        else:
            self.statuses_matched += 1

    def run(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                for dataset_id in self.watches:
                    self.poll(dataset_id)
            for dataset_id in self.watches:  # the final state, after every client finished
                self.poll(dataset_id)
        except Exception as exc:
            self.problems.append(f"auditor: {exc!r}")
        finally:
            self.http.close()


# ---------------------------------------------------------------------------- the run
@dataclass
class LifecycleResult:
    seed: int
    clients: int
    per_client: int
    seconds: float = 0.0
    tally: Tally = field(default_factory=Tally)
    auditor_problems: list[str] = field(default_factory=list)
    polls: int = 0
    entries_checked: int = 0
    statuses_matched: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    final_problems: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        return [*self.tally.problems, *self.auditor_problems, *self.final_problems]

    def summary(self) -> str:
        return (
            f"seed {self.seed}: {self.clients}x{self.per_client} in {self.seconds:.1f}s, "
            f"{self.polls} status polls, {self.entries_checked} ledger states checked, "
            f"{self.statuses_matched} polled statuses matched the replay, kinds "
            f"{dict(sorted(self.kinds.items()))}"
        )


def create_datasets(base_url: str) -> tuple[list[str], list[Target]]:
    http_ = Http(base_url)
    ids: list[str] = []
    targets: list[Target] = []
    try:
        for name, budget, accounting in DATASETS:
            reply = http_.send(
                "POST", "/v1/datasets", {"name": name, "budget": budget, "accounting": accounting}
            )
            assert reply.status == 201, reply.body
            ids.append(reply.json()["id"])
            targets.extend(targets_of(ids[-1], budget, accounting))
    finally:
        http_.close()
    return ids, targets


def _final_check(result: LifecycleResult, auditor: Auditor) -> None:
    """The ledgers hold exactly the acknowledged writes, and replay to the served state."""
    for dataset_id, watch in auditor.watches.items():
        told = {(k, i) for d, k, i in result.tally.effects if d == dataset_id}
        if watch.invocations != told:
            missing = sorted(told - watch.invocations)[:5]
            extra = sorted(watch.invocations - told)[:5]
            result.final_problems.append(
                f"{dataset_id}: ledger != acknowledged writes (missing {missing}, extra {extra})"
            )
        if watch.kinds["budget_changed"] != result.tally.budget_changes[dataset_id]:
            result.final_problems.append(
                f"{dataset_id}: {watch.kinds['budget_changed']} budget entries, "
                f"{result.tally.budget_changes[dataset_id]} acknowledged"
            )
        verdict = watch.replayer.verdict()
        if not verdict.ok or verdict.entries != watch.cursor:
            result.final_problems.append(f"{dataset_id}: final replay {verdict.problems[:3]}")
        result.kinds.update(watch.kinds)


def run_lifecycle(base_url: str, *, clients: int, per_client: int, seed: int) -> LifecycleResult:
    """Create the datasets, run the clients and the auditor, then check the final ledgers."""
    result = LifecycleResult(seed, clients, per_client)
    dataset_ids, targets = create_datasets(base_url)
    lock = threading.Lock()
    auditor = Auditor(base_url, dataset_ids)
    stop = threading.Event()
    watcher = threading.Thread(target=auditor.run, args=(stop,))
    workers = [
        threading.Thread(
            target=Client(n, seed, base_url, targets, result.tally, lock).run, args=(per_client,)
        )
        for n in range(clients)
    ]
    began = time.monotonic()
    watcher.start()
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    stop.set()
    watcher.join()
    result.seconds = time.monotonic() - began
    result.auditor_problems = auditor.problems
    result.polls = auditor.polls
    result.entries_checked = auditor.entries_checked
    result.statuses_matched = auditor.statuses_matched
    _final_check(result, auditor)
    return result
