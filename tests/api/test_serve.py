"""The launcher: its listening socket (accepted connections get ``TCP_NODELAY`` from it) and
its HTTP protocol (it tells the app how many connections the worker has open)."""

from __future__ import annotations

import http.client
import socket
import threading
import time

import uvicorn
from starlette.types import Receive, Scope, Send

from app.serve import HttpProtocol, listening_socket


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
