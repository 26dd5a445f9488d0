"""``python -m app.serve``: uvicorn on a listening socket with ``TCP_NODELAY`` set.

Why not plain ``uvicorn --workers N``: with more than one worker, uvicorn's supervisor binds the
listening socket itself, without naming the TCP protocol, and asyncio then skips its own
``TCP_NODELAY`` set-up on accepted connections (it checks ``sock.proto``). Nagle's algorithm
holds back the response body, written after the headers, until the client's delayed ACK: about
40 ms added to every keep-alive request (measured in ``benchmarks/RESULTS.md``, service
section). On Linux an accepted TCP socket inherits ``TCP_NODELAY`` from its listener, so this
launcher binds the socket itself, sets the option once, and hands the descriptor to uvicorn
(``fd=``, public API) for every worker. ``make run``, the Dockerfile and the multi-worker test
servers start the service this way.

Each worker also tells the app how many connections it has open (:class:`HttpProtocol`): a
worker with one runs its registrations on its event loop instead of handing them to a thread
(:func:`app.api.edge.blocking`).

**Connections shared out between workers.** The workers listen on one socket, and the event
loop of the first to wake up accepts every connection waiting (uvloop's, and asyncio's, accept
until the queue is empty): 8 clients connecting at once all landed on one of 2 workers, in
every one of 3 tries, and 32 split 29 / 3, so the other worker's CPU stood idle while its peer
queued their requests. With several workers each accepts one connection at a time instead, and
a worker holding ``c`` connections lets ``c`` milliseconds (at most
:data:`MAX_ACCEPT_DELAY_MS`) pass before taking the next, while the others, woken by the same
arrival, take it first if they hold fewer (:class:`BalancedServer`). Nothing coordinates the
workers, so none waits on another: a worker that is busy, stuck or gone only leaves the next
connection to the others, and a connection waits at most the delay. Measured in
``benchmarks/RESULTS.md`` (*Connections shared out between 2 workers*).
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import socket
from collections.abc import Callable, Sequence, Sized
from typing import Any, Final

import uvicorn
import uvloop
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

APP = "app.main:create_app"

#: The longest a worker holding connections waits before it accepts one the others left.
MAX_ACCEPT_DELAY_MS: Final = 10

#: What ``accept`` may fail with that a listener outlives: the peer gave up before it was
#: accepted, or the process or the system ran out of descriptors or memory for a moment.
_TRANSIENT: Final = frozenset(
    {errno.ECONNABORTED, errno.EPROTO, errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
)

_log = logging.getLogger("uvicorn.error")

#: This worker's live set of open connections, once its protocol has been built.
_connections: Sized | None = None


class HttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol (what ``http="auto"`` picks with ``uvicorn[standard]``),
    publishing its server's live set of open connections to the lean edge
    (:func:`app.api.edge.publish_connections`). Imported by the workers only: the supervisor
    does not load the app."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from app.api.edge import publish_connections  # the app is loaded by then

        global _connections
        _connections = self.server_state.connections
        publish_connections(self.server_state.connections)


class BalancedServer:
    """A listening socket served one accepted connection at a time, giving way to the other
    workers by how many connections this one holds (the module's docstring says why). What
    uvicorn needs of the server ``loop.create_server`` returns: ``close`` and
    ``wait_closed``."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        protocol_factory: Callable[[], asyncio.Protocol],
        sock: socket.socket,
        held: Callable[[], int],
    ) -> None:
        self._loop = loop
        self._factory = protocol_factory
        self._sock = sock
        self._held = held
        self._waited = False
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._starting: set[asyncio.Task[None]] = set()  # held until their transports are up
        self.sockets = (sock,)
        sock.setblocking(False)
        loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        held = self._held()
        if held and not self._waited:
            # give the workers holding fewer a head start on this connection
            self._loop.remove_reader(self._sock.fileno())
            delay = min(held, MAX_ACCEPT_DELAY_MS) / 1000
            self._timer = self._loop.call_later(delay, self._resume)
            return
        self._waited = False
        try:
            conn, _ = self._sock.accept()
        except (BlockingIOError, InterruptedError):
            return  # another worker took it
        except OSError as exc:
            if exc.errno not in _TRANSIENT:
                raise
            _log.warning("accept failed (%s); listening again in 1 s", exc)
            self._loop.remove_reader(self._sock.fileno())
            self._timer = self._loop.call_later(1.0, self._resume)
            return
        conn.setblocking(False)
        task = self._loop.create_task(self._serve(conn))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    def _resume(self) -> None:
        self._timer = None
        if not self._closed:
            self._waited = True
            self._loop.add_reader(self._sock.fileno(), self._readable)

    async def _serve(self, conn: socket.socket) -> None:
        try:
            await self._loop.connect_accepted_socket(self._factory, conn)
        except OSError:
            conn.close()  # the peer left before its transport was set up

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        self._loop.remove_reader(self._sock.fileno())

    async def wait_closed(self) -> None:
        return None


def _held() -> int:
    return 0 if _connections is None else len(_connections)


class BalancedLoop(uvloop.Loop):
    """uvloop's event loop (what uvicorn's ``loop="auto"`` picks) whose ``create_server`` on a
    given socket answers with a :class:`BalancedServer`: the loop of a worker of several."""

    async def create_server(  # type: ignore[override]
        self, protocol_factory: Callable[[], asyncio.Protocol], *args: Any, **kwargs: Any
    ) -> Any:
        sock = kwargs.get("sock")
        if args or sock is None or kwargs.get("ssl") is not None:
            return await super().create_server(protocol_factory, *args, **kwargs)
        return BalancedServer(self, protocol_factory, sock, _held)


def balanced_loop() -> asyncio.AbstractEventLoop:
    """The event loop factory of a worker of several (uvicorn's ``loop`` setting)."""
    return BalancedLoop()


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
        loop="app.serve:balanced_loop" if args.workers > 1 else "auto",
    )


if __name__ == "__main__":
    main()
