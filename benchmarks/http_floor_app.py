"""The least an HTTP service can do per admission: the raw baseline's transaction behind uvicorn.

A bare ASGI application (no framework, no validation, no authentication, no accounting) that
answers ``POST /<budget id>`` by running exactly the raw baseline's durable work of
``benchmarks/service_load.py`` on PostgreSQL — ``BEGIN``; ``SELECT … FOR UPDATE`` of the budget
row; ``UPDATE`` it; ``INSERT`` one hash-chained ledger row of the service's size; ``COMMIT`` —
through psycopg 3 (async), then a small JSON body. Served the way the service is served
(``python -m app.serve --app benchmarks.http_floor_app:create_app``: uvicorn with httptools and
uvloop, ``TCP_NODELAY``), it measures what the HTTP edge and one process's event loop cost on
this machine before any of the service's own work: ``benchmarks/http_floor.py`` runs it beside
the raw baseline and the service. Benchmark code only; never part of the service.

With ``FLOOR_SQLITE`` (a path) instead of ``FLOOR_DSN``: the SQLite baseline's work
(``BEGIN IMMEDIATE`` … ``COMMIT``, WAL, ``synchronous=FULL``), in a thread of the process's
pool as the service runs its blocking calls, the writers of every process ordered by the
service's own writers' gate (a process lock, then ``flock`` on a file beside the database). As
the service does, a request that is the only one in flight in its process runs the transaction
on the event loop instead (no hand-off to a thread).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from app.db.uow import WriteGate
from benchmarks.service_load import pg_admit, sqlite_admit, sqlite_connect

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class FloorApp:
    def __init__(self, dsn: str, connections: int) -> None:
        self._dsn = dsn
        self._size = connections
        self._pool: asyncio.Queue[Any] | None = None

    async def _startup(self) -> None:
        import psycopg

        pool: asyncio.Queue[Any] = asyncio.Queue()
        for _ in range(self._size):
            pool.put_nowait(await psycopg.AsyncConnection.connect(self._dsn))
        self._pool = pool

    async def _admit(self, budget: str) -> int:
        assert self._pool is not None
        conn = await self._pool.get()
        try:
            return await pg_admit(conn, budget)
        finally:
            self._pool.put_nowait(conn)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await self._startup()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        more = True
        while more:  # drain the request body
            message = await receive()
            more = bool(message.get("more_body"))
        if scope["path"] in ("/readyz", "/healthz"):
            status, body = 200, b'{"status":"ok"}'
        else:
            seq = await self._admit(scope["path"].rsplit("/", 1)[-1])
            status, body = 201, json.dumps({"status": "accepted", "seq": seq}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class SqliteFloorApp(FloorApp):
    """The same on SQLite: the transaction in a thread (one connection per thread), or on the
    event loop when it is the process's only request in flight."""

    def __init__(self, path: str, threads: int) -> None:
        super().__init__("", threads)
        self._path = path
        self._threads = ThreadPoolExecutor(threads, thread_name_prefix="floor")
        self._local = threading.local()
        self._gate = WriteGate.for_database(path)
        self._in_flight = 0

    async def _startup(self) -> None:
        return None

    def _admit_blocking(self, budget: str) -> int:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = sqlite_connect(self._path)
        self._gate.acquire()
        try:
            return sqlite_admit(conn, budget)
        finally:
            self._gate.release()

    async def _admit(self, budget: str) -> int:
        self._in_flight += 1
        try:
            if self._in_flight == 1:
                return self._admit_blocking(budget)
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._threads, self._admit_blocking, budget)
        finally:
            self._in_flight -= 1


def create_app() -> FloorApp:
    size = int(os.environ.get("FLOOR_CONNECTIONS", "12"))
    if "FLOOR_SQLITE" in os.environ:
        return SqliteFloorApp(os.environ["FLOOR_SQLITE"], size)
    return FloorApp(os.environ["FLOOR_DSN"], size)
