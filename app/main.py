"""The FastAPI application factory."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from importlib.metadata import version
from typing import Any

from anyio import to_thread
from fastapi import FastAPI
from fastapi.routing import APIRoute

from app.api import docs
from app.api.errors import install_error_handlers
from app.api.middleware import BodySizeLimitMiddleware, Metrics, MetricsMiddleware
from app.api.register import register_lane
from app.api.routers import (
    checkpoints,
    datasets,
    grants,
    heads,
    health,
    invocations,
    ledger,
    organisations,
    principals,
    reports,
    witness,
)
from app.db.uow import Database
from app.services.batching import Registrar
from app.services.charging import ChargeWorkers
from app.services.checkpoints import signer_from_settings
from app.services.gauges import BudgetGauges
from app.services.reads import reads_from_settings
from app.services.verify_behind import BehindVerifier
from app.services.witness import witness_from_settings, witness_loop
from app.settings import Settings, get_settings
from app.writepath import WritePath, bind
from app.writepath.groups import GroupCommit
from app.writepath.queue import FairQueue

#: The API's version, as the OpenAPI document states it: the distribution's (the server, the
#: core and the client are versioned together).
API_VERSION = version("privacy-odometer")


def _operation_id(route: APIRoute) -> str:
    # Stable operation ids: the route's explicit name (e.g. "register_invocation").
    return route.name


def freeze_startup_objects() -> None:
    """Exempt what the process built before serving from the cyclic garbage collector's full
    passes (:func:`gc.freeze`). The app, its dependencies (numpy, scipy, SQLAlchemy, pydantic)
    and their module objects are a great many tracked objects that live as long as the
    process; every full (oldest-generation) collection walked them all: a stall of every
    request of the worker, and of the other workers' requests on the dataset whose lock it
    held, which showed in the p99 with many clients on a hot dataset (``benchmarks/RESULTS.md``,
    *Server CPU at one client*, *Levers, measured side by side*; *The HTTP floor*)."""
    gc.collect()
    gc.freeze()


def create_app(settings: Settings | None = None, database: Database | None = None) -> FastAPI:
    """Build the app. ``settings`` default to the environment; ``database`` to its URL.

    Every long-lived object of the app is made here and kept on ``app.state``, where the
    dependencies of :mod:`app.api.deps` hand them to the routes: the database (with this
    app's checkpoint signer), its write path (:class:`~app.writepath.WritePath`: the writers'
    queue, the group commit lines, the write path's caches and the witness guard, bound to the
    database), the charge workers, the register use case's front
    (:class:`~app.services.batching.Registrar`) and the metrics."""
    settings = settings or get_settings()
    owns_database = database is None
    # The checkpoint signer is this app's (its settings'), passed to every unit of work
    # through the database it opens them on; the engine is shared with ``database``.
    charges = ChargeWorkers(
        settings.charge_workers, settings.charge_cpu_seconds, settings.charge_wait_seconds
    )
    base = database or Database.from_settings(settings)
    # The fair queue on PostgreSQL only: there, serving a dataset's writers in arrival order
    # raised throughput and brought p99 close to p50 on a hot dataset; on SQLite the file lock
    # between processes decides the order and the queue only cost throughput
    # (benchmarks/RESULTS.md, *Fair queueing*).
    fair = settings.fair_queue and base.engine.dialect.name == "postgresql"
    signer = signer_from_settings(settings)
    # every committed head recorded outside the database (docs/witness.md), handed over by the
    # unit of work's commit
    guard = witness_from_settings(settings, signer)
    db = replace(base, signer=signer, after_commit=None if guard is None else guard.record)
    groups: GroupCommit[Any, Any] = GroupCommit(settings.group_commit)
    path = bind(db, WritePath(FairQueue() if fair else None, guard, groups))
    # heavy reads on the read replica when one is set (app/services/reads.py)
    reads = reads_from_settings(
        db,
        settings.read_database_url,
        pool_size=settings.read_pool_size,
        wait_seconds=settings.read_replica_wait_seconds,
    )
    if reads.replica is not None:
        bind(reads.replica, path)  # its reads see the same witness (a frozen dataset says so)
    metrics = Metrics()
    if settings.metrics_datasets:  # the listed datasets' budgets, read at each scrape
        metrics.registry.register(BudgetGauges(db, settings.metrics_datasets))
    registrar = Registrar(db, charges, groups, metrics.alone)
    # fragmented ledgers verified as they grow, so that a first report re-runs only the tail
    verifier = BehindVerifier(db, settings.verify_behind_seconds)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        charges.start()  # the workers import the accounting core while the server starts
        # the database compared with the witness before the first request, then periodically
        watcher = await witness_loop(db, settings.witness_check_seconds)
        freeze_startup_objects()
        verifier.start()
        try:
            yield
        finally:
            await to_thread.run_sync(verifier.close)
            if watcher is not None:
                watcher.cancel()
            if path.witness is not None:  # what is pending is written before the process ends
                await to_thread.run_sync(path.witness.close)
            charges.close()  # requests still waiting for a worker get their 503 now
            reads.dispose()
            if owns_database:
                db.dispose()

    app = FastAPI(
        title="Privacy odometer",
        version=API_VERSION,
        summary="Per-dataset differential-privacy budgets with an append-only, hash-chained ledger",
        lifespan=lifespan,
        generate_unique_id_function=_operation_id,
        docs_url=None,  # served from the installed package instead (app/api/docs.py)
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.database = db
    app.state.writepath = path
    app.state.charges = charges
    app.state.registrar = registrar
    app.state.reads = reads
    app.state.verifier = verifier
    app.state.metrics = metrics
    install_error_handlers(app)
    # The invocations router first: a request is matched against the routes in order, and
    # registration is the route on every analyst's hot path (benchmarks/RESULTS.md,
    # *Measurements once quoted in the code*).
    for module in (invocations, organisations, principals, datasets, grants, ledger, health):
        app.include_router(module.router)
    app.include_router(reports.router)  # dataset reports and the dashboard
    app.include_router(checkpoints.router)  # signed ledger-head checkpoints
    app.include_router(heads.router)  # published heads, cosigned, and acknowledged forks
    app.include_router(witness.router)  # the witness of ledger heads (admin)
    app.include_router(docs.router)  # /docs and /redoc, no CDN
    # Added last = outermost: metrics see every response, including 413s. The register route
    # is served from the body limit's middleware, once the body is read (app/api/register.py,
    # RegisterLane): the first route the router would try, past the layers that do nothing
    # for it.
    app.add_middleware(
        BodySizeLimitMiddleware,
        max_bytes=settings.max_body_bytes,
        lane=register_lane(invocations.router.routes),
    )
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app
