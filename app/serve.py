"""``python -m app.serve``: uvicorn on a listening socket with ``TCP_NODELAY`` set.

Why not plain ``uvicorn --workers N``: with more than one worker, uvicorn's supervisor binds the
listening socket itself, without naming the TCP protocol, and asyncio then skips its own
``TCP_NODELAY`` set-up on accepted connections (it checks ``sock.proto``). Nagle's algorithm
holds back the response body, written after the headers, until the client's delayed ACK, a wait
added to every keep-alive request (``benchmarks/RESULTS.md``, *Nagle: the plain uvicorn command
line with several workers*). On Linux an accepted TCP socket inherits ``TCP_NODELAY`` from its
listener, so this launcher binds the socket itself, sets the option once, and hands the
descriptor to uvicorn (``fd=``, public API) for every worker. ``make run``, the Dockerfile and
the multi-worker test servers start the service this way.

Each worker also tells the app how many connections it has open (:class:`HttpProtocol`): a
worker with one runs its registrations on its event loop instead of handing them to a thread
(:func:`app.api.edge.blocking`).
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Sequence
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

APP = "app.main:create_app"


class HttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol (what ``http="auto"`` picks with ``uvicorn[standard]``),
    publishing its server's live set of open connections to the lean edge
    (:func:`app.api.edge.publish_connections`). Imported by the workers only: the supervisor
    does not load the app."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from app.api.edge import publish_connections  # the app is loaded by then

        publish_connections(self.server_state.connections)


def listening_socket(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A bound, listening TCP socket with ``TCP_NODELAY`` (inherited by accepted sockets)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family, backlog=backlog)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.set_inheritable(True)
    return sock


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m app.serve", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--no-access-log", action="store_true")
    parser.add_argument("--proxy-headers", action="store_true")
    parser.add_argument("--app", default=APP, help="application factory (import string)")
    args = parser.parse_args(argv)
    sock = listening_socket(args.host, args.port)
    uvicorn.run(
        args.app,
        factory=True,
        fd=sock.fileno(),
        workers=args.workers,
        log_level=args.log_level,
        access_log=not args.no_access_log,
        proxy_headers=args.proxy_headers,
        http="app.serve:HttpProtocol",
    )


if __name__ == "__main__":
    main()
