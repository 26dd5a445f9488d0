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
until the queue is empty): 8 clients connecting to 2 idle workers all landed on one in 4 of 8
rounds of ``benchmarks.worker_split``, and 32 in 2 of 8, so the other worker's CPU stood idle
while its peer queued their requests. With several workers each accepts one connection at a
time instead (:class:`BalancedServer`), and the workers publish how many connections each holds
(:class:`LoadBoard`, a small file the supervisor creates and each worker maps): a worker
holding more than another leaves a new connection to it, which the same arrival woke, looking
again every :data:`GIVE_WAY_POLL_S` for at most :data:`GIVE_WAY_S`, then takes it itself if it
still waits (the other is busy, stuck or gone). Workers holding as many accept at once, so a
stream of short connections (clients without keep-alive) is not held back by the rule. Measured in
``benchmarks/RESULTS.md`` (*Connections shared out between 2 workers*).
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import fcntl
import logging
import mmap
import os
import socket
import tempfile
from collections.abc import Callable, Iterator, Sequence, Sized
from contextlib import contextmanager, suppress
from typing import Any, Final

import uvicorn
import uvloop
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

APP = "app.main:create_app"

#: How long at most a worker holding more connections than another leaves a new one to it;
#: then it takes the connection itself if it still waits (the other worker is busy or stuck).
GIVE_WAY_S: Final = 0.01
#: How often a worker giving way looks again whether it still should.
GIVE_WAY_POLL_S: Final = 0.001
#: 64-bit integers per worker on the load board.
SLOT: Final = 2

#: The environment variable naming the workers' load board (:class:`LoadBoard`).
BOARD_ENV: Final = "ODOMETER_WORKER_BOARD"

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
    (:func:`app.api.edge.publish_connections`) and, in a worker of several, their number to the
    other workers (:class:`LoadBoard`). Imported by the workers only: the supervisor does not
    load the app."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from app.api.edge import publish_connections  # the app is loaded by then

        global _connections
        _connections = self.server_state.connections
        publish_connections(self.server_state.connections)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        _published()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        _published()


class LoadBoard:
    """How many connections each worker of a server holds, in a file the supervisor creates
    (:data:`BOARD_ENV` names it) and every worker maps: a slot of two 64-bit integers per
    worker (process id, connections). A worker claims a
    free slot, or a dead worker's, under an exclusive ``flock`` of the file; then it writes only
    its own slot and reads the others' without a lock (an aligned 8-byte store or load is not
    torn on the platforms served)."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_RDWR)
        size = os.fstat(self._fd).st_size
        self._map = mmap.mmap(self._fd, size)
        self._slots = memoryview(self._map).cast("q")
        self._pid = os.getpid()
        self._mine = self._claim()

    def _claim(self) -> int:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            for i in range(0, len(self._slots), SLOT):
                pid = self._slots[i]
                if pid in (0, self._pid) or not _alive(pid):
                    self._slots[i + 1] = 0
                    self._slots[i] = self._pid
                    return i
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        raise RuntimeError("no free slot on the workers' load board")

    def publish(self, connections: int) -> None:
        self._slots[self._mine + 1] = connections

    def fewer_elsewhere(self, connections: int) -> bool:
        """Whether a live worker other than this one holds fewer than ``connections``. Two
        workers cannot each hold fewer than the other, so they never both give way for long:
        on counts read a moment apart, until the next look (:data:`GIVE_WAY_POLL_S`)."""
        slots = self._slots
        for i in range(0, len(slots), SLOT):
            pid = slots[i]
            if i != self._mine and pid and slots[i + 1] < connections and _alive(pid):
                return True
        return False

    def leave(self) -> None:
        self._slots[self._mine] = 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


#: This worker's place on the load board and its listener, in a worker of several.
_board: LoadBoard | None = None
_server: BalancedServer | None = None


def _published() -> None:
    """Tell the other workers how many connections this one holds now."""
    if _board is not None and _server is not None:
        _board.publish(_held() + _server.starting)


class BalancedServer:
    """A listening socket served one accepted connection at a time, letting a worker holding
    fewer connections take it first (the module's docstring says why). What uvicorn needs of the
    server ``loop.create_server`` returns: ``close`` and ``wait_closed``."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        protocol_factory: Callable[[], asyncio.Protocol],
        sock: socket.socket,
        board: LoadBoard | None,
    ) -> None:
        self._loop = loop
        self._factory = protocol_factory
        self._sock = sock
        self._board = board
        self._waited = False
        self._timer: asyncio.TimerHandle | None = None
        self._until = 0.0  # when giving way ends
        self._closed = False
        self._starting: set[asyncio.Task[None]] = set()  # held until their transports are up
        self.sockets = (sock,)
        sock.setblocking(False)
        loop.add_reader(sock.fileno(), self._readable)

    @property
    def starting(self) -> int:
        """Connections accepted whose protocol is not set up yet."""
        return len(self._starting)

    def _readable(self) -> None:
        board = self._board
        if (
            board is not None
            and not self._waited
            and board.fewer_elsewhere(_held() + len(self._starting))
        ):
            # a worker holding fewer connections is woken by the same arrival: leave it to it
            self._loop.remove_reader(self._sock.fileno())
            self._until = self._loop.time() + GIVE_WAY_S
            self._timer = self._loop.call_later(GIVE_WAY_POLL_S, self._recheck)
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
        task.add_done_callback(self._started)
        _published()

    def _started(self, task: asyncio.Task[None]) -> None:
        self._starting.discard(task)
        _published()

    def _recheck(self) -> None:
        """Still giving way: listen again once no live worker holds fewer connections, or once
        :data:`GIVE_WAY_S` has passed, and take the next connection without asking again."""
        board = self._board
        assert board is not None
        if (
            not self._closed
            and self._loop.time() < self._until
            and board.fewer_elsewhere(_held() + len(self._starting))
        ):
            self._timer = self._loop.call_later(GIVE_WAY_POLL_S, self._recheck)
            return
        self._resume()

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
        if self._board is not None:
            self._board.leave()  # no longer takes connections: others must not wait for it

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
        global _board, _server
        path = os.environ.get(BOARD_ENV)
        _board = None
        if path:
            try:
                _board = LoadBoard(path)
            except (OSError, ValueError, RuntimeError) as exc:
                # serve anyway, one connection at a time, without giving way to the others
                _log.warning("workers' load board unusable (%s): accepting without it", exc)
        _server = BalancedServer(self, protocol_factory, sock, _board)
        _published()
        return _server


def balanced_loop() -> asyncio.AbstractEventLoop:
    """The event loop factory of a worker of several (uvicorn's ``loop`` setting)."""
    return BalancedLoop()


@contextmanager
def load_board(workers: int) -> Iterator[None]:
    """A load board for ``workers`` workers (and as many replacements starting while a dead
    one's slot is not yet reclaimed), named to the workers by :data:`BOARD_ENV`, removed when
    the server exits; none for a single worker."""
    if workers <= 1:
        yield
        return
    fd, path = tempfile.mkstemp(prefix="odometer-workers-")
    try:
        os.ftruncate(fd, 8 * SLOT * 2 * workers)
        os.close(fd)
        os.environ[BOARD_ENV] = path
        yield
    finally:
        os.environ.pop(BOARD_ENV, None)
        with suppress(FileNotFoundError):
            os.unlink(path)


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
    with load_board(args.workers):
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
