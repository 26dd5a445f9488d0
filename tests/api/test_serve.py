"""The launcher: its listening socket (accepted connections get ``TCP_NODELAY`` from it), its
HTTP protocol (it tells the app how many connections the worker has open) and, with several
workers, how it shares connections out between them."""

from __future__ import annotations

import http.client
import mmap
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from app.serve import BOARD_ENV, SLOT, HttpProtocol, LoadBoard, listening_socket, load_board
from tests.concurrency.server import start_server


def test_accepted_connections_inherit_nodelay() -> None:
    """Without the option on the listener a multi-worker uvicorn leaves Nagle on, and every
    keep-alive answer waited ~40 ms for the client's delayed ACK (51.9 ms median per admission
    with plain ``uvicorn --workers 2`` against 9.2 ms through ``app.serve``, measured once on
    SQLite). The launcher relies on Linux copying the option from listener to accepted socket;
    this checks that premise on the machine the suite runs on."""
    listener = listening_socket("127.0.0.1", 0)
    try:
        assert listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        client = socket.create_connection(listener.getsockname()[:2])
        accepted, _ = listener.accept()
        try:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        finally:
            accepted.close()
            client.close()
    finally:
        listener.close()


def test_a_plain_listener_does_not_have_it() -> None:
    """The control: a socket bound without the option leaves accepted connections with Nagle
    on — which is what made the launcher necessary."""
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        client = socket.create_connection(listener.getsockname()[:2])
        accepted, _ = listener.accept()
        try:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
        finally:
            accepted.close()
            client.close()
    finally:
        listener.close()


def test_the_protocol_publishes_the_servers_open_connections() -> None:
    """What the lean edge hears from a server started by ``app.serve``: its live set of open
    connections (one, then two while a second client is connected, then one again)."""
    from app.api import edge

    async def count(scope: Scope, receive: Receive, send: Send) -> None:
        connections = edge.WORKER.connections
        body = str(-1 if connections is None else len(connections)).encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    saved = edge.WORKER.connections
    listener = listening_socket("127.0.0.1", 0)
    config = uvicorn.Config(count, http=HttpProtocol, lifespan="off", log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    port = listener.getsockname()[1]

    def get(conn: http.client.HTTPConnection) -> str:
        conn.request("GET", "/")
        return conn.getresponse().read().decode()

    try:
        # the socket listens already: the request waits in its backlog until the server runs
        first = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        assert get(first) == "1"
        second = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        assert get(second) == "2"
        assert get(first) == "2"
        second.close()
        deadline = time.monotonic() + 10
        while get(first) != "1":  # the server sees the close when it reads it
            assert time.monotonic() < deadline
            time.sleep(0.02)
        first.close()
    finally:
        server.should_exit = True
        thread.join(10)
        listener.close()
        edge.WORKER.connections = saved


def _worker_of(conn: http.client.HTTPConnection) -> int:
    conn.request("GET", "/")
    return int(conn.getresponse().read())


@pytest.mark.parametrize("clients", [8, 32])
def test_connections_opened_at_once_are_shared_out_between_the_workers(
    tmp_path: Path, clients: int
) -> None:
    """A burst of keep-alive connections to two workers: each worker holds at least a quarter
    of them. With uvloop's own accept the first worker to wake took every connection waiting
    (8 / 0 in 4 of 8 rounds of ``benchmarks.worker_split``, 32 / 0 in 2 of 8) and the other
    worker's CPU stood idle.
    With the workers' loop set back to uvloop's this test failed for 8 clients in each of 3
    runs (8 / 0) and for 32 in 1 of 2 (28 / 4); it passes with the balanced accept
    (``app.serve.BalancedServer`` and its load board)."""
    server = start_server(
        "sqlite://", tmp_path / "server.log", workers=2, factory="tests.api.worker_app:create_app"
    )
    port = int(server.base_url.rsplit(":", 1)[1])
    try:
        # both workers up: the readiness probe reached one; wait until the other answers too
        seen: set[int] = set()
        deadline = time.monotonic() + 30
        while len(seen) < 2:
            assert time.monotonic() < deadline, f"one worker only: {seen}\n{server.log()}"
            probes = [http.client.HTTPConnection("127.0.0.1", port, timeout=10) for _ in range(4)]
            seen.update(_worker_of(conn) for conn in probes)
            for conn in probes:
                conn.close()
        time.sleep(0.5)  # the workers see the probes' connections close
        burst = [http.client.HTTPConnection("127.0.0.1", port, timeout=10) for _ in range(clients)]
        for conn in burst:
            conn.connect()
        held = Counter(_worker_of(conn) for conn in burst)
        for conn in burst:
            conn.close()
        assert set(held) <= seen
        assert len(held) == 2 and min(held.values()) >= clients // 4, held
    finally:
        server.stop()


def test_the_load_board_counts_live_workers_only_and_reclaims_a_dead_ones_slot() -> None:
    """The board the balanced accept reads: another live worker holding fewer connections is
    seen (and one holding as many is not); a dead worker's slot is neither read nor kept, so a
    replacement worker takes it over."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with load_board(2):
        path = os.environ[BOARD_ENV]
        board = LoadBoard(path)  # this process: the first free slot
        board.publish(3)
        with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as raw:
            slots = memoryview(raw).cast("q")
            assert list(slots[:SLOT]) == [os.getpid(), 3]
            slots[SLOT], slots[SLOT + 1] = os.getppid(), 2  # a live worker holding 2
            assert board.fewer_elsewhere(3) and not board.fewer_elsewhere(2)
            slots[SLOT] = gone.pid  # that worker died
            assert not board.fewer_elsewhere(3)
            board.leave()
            replacement = LoadBoard(path)  # the first slot is free again: taken
            assert list(slots[: 2 * SLOT]) == [os.getpid(), 0, gone.pid, 2]
            slots[0] = os.getppid()  # a live worker holds the first slot
            LoadBoard(path)  # the dead worker's slot is taken over, its count reset
            assert list(slots[: 2 * SLOT]) == [os.getppid(), 0, os.getpid(), 0]
            del slots, replacement
    assert not os.path.exists(path) and BOARD_ENV not in os.environ


def test_a_full_load_board_leaves_the_worker_serving_without_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More workers starting than the board has slots (a restart storm): the extra worker
    still serves, accepting without giving way, instead of failing to start."""
    import asyncio

    from app import serve

    async def serve_one(path: str) -> str:
        loop = asyncio.get_running_loop()
        listener = listening_socket("127.0.0.1", 0)
        answered = asyncio.get_running_loop().create_future()

        class Echo(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                answered.set_result(serve._board is None)
                transport.close()

        server = await loop.create_server(Echo, sock=listener)
        try:
            _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
            no_board = await asyncio.wait_for(answered, 10)
            writer.close()
        finally:
            server.close()
            listener.close()
        return f"{type(server).__name__} board={'none' if no_board else 'yes'}"

    with load_board(2):  # 2 workers: 4 slots
        path = os.environ[BOARD_ENV]
        with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as raw:
            slots = memoryview(raw).cast("q")
            for i in range(0, len(slots), SLOT):
                slots[i] = os.getppid()  # every slot held by a live process
            del slots
        monkeypatch.setattr(serve, "_board", None)
        monkeypatch.setattr(serve, "_server", None)
        loop = serve.balanced_loop()
        try:
            assert loop.run_until_complete(serve_one(path)) == "BalancedServer board=none"
        finally:
            loop.close()
