"""One in-process measurement of ``benchmarks/write_path.py``, in a process of its own.

Run as a script, ``python -P benchmarks/write_path_probe.py PROBE URL COUNT ARG…``, by
:func:`benchmarks.write_path.probe`, with ``PYTHONPATH`` naming the checkout that is measured
(this one, or a ``git worktree`` of an earlier commit) and ``URL`` a database that checkout has
migrated. It prints ``{"cpu_ms": …}``: the process's CPU time (user + system) per registration
after a warm-up. ``PROBE`` is one of:

* ``service`` (``ARG``: ``1`` with an ``Idempotency-Key``, else ``0``): the service's
  ``register_invocation`` in a loop on one dataset (``basic``, pure ε, no HTTP);
* ``edge`` (same ``ARG``): the same request through the app's ASGI interface (routing,
  dependencies, validation, middleware, the thread hop; no sockets, no uvicorn), in one event
  loop, one request at a time;
* ``group`` (``ARG``: ``K hot`` or ``K many``): registrations decided K at a time in one
  transaction, as group commit decides a caller's concurrent ones: the group's runner
  (``_register_together``, what a group commit line runs for a group of one caller's requests)
  called directly, so that the group's size is the measurement's and not the machine's timing;
  ``hot``: the K on one dataset, ``many``: on K datasets.

It imports nothing from ``benchmarks`` (the measured checkout may have none of it) and runs with
``-P``, so that this directory does not shadow the checkout's modules; the ``app`` it imports is
the measured checkout's, typed here against this one's.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
from typing import Any

WARMUP = 200
KEY = "k" * 32


def _cpu() -> float:
    """The process's CPU time; under ``valgrind --tool=callgrind --instr-atstart=no`` with
    ``ODOMETER_PROBE_CALLGRIND=1`` (:mod:`benchmarks.write_path_count`), each call also switches
    callgrind's instrumentation, on at the first (after the warm-up, the heap collected and
    frozen) and off at the second, so that the count holds the measured loop only."""
    if os.environ.get("ODOMETER_PROBE_CALLGRIND") == "1":
        global _counting
        _counting = not _counting
        if _counting:
            # Every build counted from the same collector state: what the warm-up and the
            # imports left is collected, and the rest kept out of later collections, so that
            # a full collection falling inside one build's loop and not another's (170,000
            # instructions a registration over 300) does not decide the comparison.
            gc.collect()
            gc.freeze()
        subprocess.run(
            ["callgrind_control", "-i", "on" if _counting else "off", str(os.getpid())],
            check=True,
            capture_output=True,
        )
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


_counting = False


def _names() -> dict[str, Any]:
    """The register path's module-level names in the measured checkout, wherever it keeps
    them (one ``invocations`` module in earlier checkouts; split by concern since)."""
    import importlib.util

    names: dict[str, Any] = {}
    for module in (
        "app.services.invocations",
        "app.services.registration",
        "app.services.batching",
    ):
        if importlib.util.find_spec(module) is not None:
            names.update(vars(importlib.import_module(module)))
    return names


def _database(settings: Any) -> Any:
    """The measured checkout's database for ``settings``, with the checkpoint signer its app
    would give it (``ODOMETER_CHECKPOINT_KEY``: receipts and checkpoints signed as served)."""
    from dataclasses import replace

    from app.db.uow import Database
    from app.services.checkpoints import signer_from_settings

    db = Database.from_settings(settings)
    signer = signer_from_settings(settings)
    return db if signer is None else replace(db, signer=signer)


def service(url: str, count: int, keyed: bool) -> float:
    """CPU ms per ``register_invocation`` (no HTTP)."""
    from app.db.uow import UnitOfWork
    from app.services import datasets
    from app.services.principals import Principal, Role
    from app.settings import Settings
    from odometer_core.accounting import parse_declaration

    names = _names()
    register = names["register_invocation"]
    db = _database(Settings(database_url=url))
    uow = UnitOfWork(db)
    admin = Principal("admin", Role.ADMIN, None)
    new = datasets.NewDataset(
        name="w",
        epsilon="1000000",
        delta="0.00001",
        relation="add_remove",
        accounting={"mode": "basic"},
    )
    ds = str(datasets.create_dataset(uow, admin, new)["id"])
    request = names["InvocationRequest"](parse_declaration({"type": "pure_dp", "epsilon": "0.001"}))
    for i in range(WARMUP):
        register(uow, admin, ds, request, f"w{i}" if keyed else None)
    start = _cpu()
    for i in range(count):
        register(uow, admin, ds, request, f"k{i}" if keyed else None)
    cpu = _cpu() - start
    db.dispose()
    return 1000 * cpu / count


async def _edge(url: str, count: int, keyed: bool) -> float:
    from app.main import create_app
    from app.settings import Settings

    app = create_app(Settings(database_url=url, admin_key=KEY, charge_workers=0))

    async def call(path: str, body: bytes, key: str | None = None) -> dict[str, Any]:
        headers = [
            (b"host", b"bench"),
            (b"authorization", f"Bearer {KEY}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        if key is not None:
            headers.append((b"idempotency-key", key.encode()))
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(),
            "query_string": b"", "root_path": "", "headers": headers,
            "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80), "state": {},
        }  # fmt: skip
        done = False

        async def receive() -> dict[str, Any]:
            nonlocal done
            if done:
                await asyncio.sleep(3600)
            done = True
            return {"type": "http.request", "body": body, "more_body": False}

        out: dict[str, Any] = {}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                out["status"] = message["status"]
            else:
                out["body"] = out.get("body", b"") + message.get("body", b"")

        await app(scope, receive, send)  # type: ignore[arg-type]
        return out

    async with app.router.lifespan_context(app):
        budget = {"epsilon": "1000000", "delta": "0.00001"}
        created = await call(
            "/v1/datasets",
            json.dumps({"name": "w", "budget": budget, "accounting": {"mode": "basic"}}).encode(),
        )
        path = "/v1/datasets/" + json.loads(created["body"])["id"] + "/invocations"
        body = json.dumps({"mechanism": {"type": "pure_dp", "epsilon": "0.001"}}).encode()
        for i in range(WARMUP):
            assert (await call(path, body, f"w{i}" if keyed else None))["status"] == 201
        start = _cpu()
        for i in range(count):
            out = await call(path, body, f"k{i}" if keyed else None)
            assert out["status"] == 201, out
        cpu = _cpu() - start
    return 1000 * cpu / count


def edge(url: str, count: int, keyed: bool) -> float:
    """CPU ms per registration through the app's ASGI interface."""
    return asyncio.run(_edge(url, count, keyed))


def group(url: str, count: int, size: int, spread: str) -> float:
    """CPU ms per registration decided ``size`` at a time (``spread``: ``hot`` or ``many``)."""
    from app.db.uow import UnitOfWork
    from app.services import datasets
    from app.services.principals import Principal, Role
    from app.settings import Settings
    from odometer_core.accounting import parse_declaration

    names = _names()
    db = _database(Settings(database_url=url))
    uow = UnitOfWork(db)
    admin = Principal("admin", Role.ADMIN, None)
    request = names["InvocationRequest"](parse_declaration({"type": "pure_dp", "epsilon": "0.001"}))
    ids = []
    for i in range(size if spread == "many" else 1):
        new = datasets.NewDataset(
            name=f"g{i}",
            epsilon="1000000",
            delta="0.00001",
            relation="add_remove",
            accounting={"mode": "basic"},
        )
        ids.append(str(datasets.create_dataset(uow, admin, new)["id"]))
    together = names["_register_together"]
    if "with_charges" in names:  # the core prepares a registration (one call) since 70d6b86
        prepared = names["registration"]
        items = [prepared(uow, admin, ids[i % len(ids)], request) for i in range(size)]
    else:  # earlier checkouts built it themselves (one named it ``_Registration``)
        registration: Any = names.get("Registration") or names["_Registration"]
        items = [
            registration(admin, ids[i % len(ids)], request, None, "-", None) for i in range(size)
        ]

    def run(groups: int) -> None:
        for _ in range(groups):
            for outcome in together(uow, items):
                assert not isinstance(outcome, BaseException), outcome

    run(max(1, WARMUP // size))
    groups = max(1, count // size)
    start = _cpu()
    run(groups)
    cpu = _cpu() - start
    db.dispose()
    return 1000 * cpu / (groups * size)


def measure(probe: str, url: str, count: int, args: list[str]) -> float:
    """CPU ms per registration of ``probe`` (see the module's docstring for ``args``)."""
    if probe == "group":
        size, spread = args
        return group(url, count, int(size), spread)
    (keyed,) = args
    return {"service": service, "edge": edge}[probe](url, count, keyed == "1")


def main(argv: list[str] | None = None) -> int:
    probe, url, count, *args = argv if argv is not None else sys.argv[1:]
    print(json.dumps({"cpu_ms": measure(probe, url, int(count), args)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
