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

This is uvicorn's bug https://github.com/Kludex/uvicorn/issues/3149 (open when this was
written; the fix proposed there names the protocol when the supervisor binds): delete this
launcher once a uvicorn release carries the fix, and start ``uvicorn --factory
app.main:create_app`` instead. The app is the same under either: the launcher only binds the
socket.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Sequence

import uvicorn
from pydantic import ValidationError

from app.settings import get_settings

APP = "app.main:create_app"


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
    try:
        get_settings()  # a setting the service refuses is one line here, not a worker's traceback
    except ValidationError as exc:
        problems = "; ".join(
            str(e.get("msg", "")).removeprefix("Value error, ") for e in exc.errors()
        )
        parser.exit(2, f"python -m app.serve: {problems}\n")
    sock = listening_socket(args.host, args.port)
    uvicorn.run(
        args.app,
        factory=True,
        fd=sock.fileno(),
        workers=args.workers,
        log_level=args.log_level,
        access_log=not args.no_access_log,
        proxy_headers=args.proxy_headers,
    )


if __name__ == "__main__":
    main()
