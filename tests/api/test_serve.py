"""The launcher: its listening socket (accepted connections get ``TCP_NODELAY`` from it)."""

from __future__ import annotations

import socket

from app.serve import listening_socket


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
