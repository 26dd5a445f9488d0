"""A bare ASGI application answering every request with its worker's process id: which worker
of a multi-worker ``app.serve`` holds a connection (``tests/api/test_serve.py``)."""

from __future__ import annotations

import os

from starlette.types import ASGIApp, Receive, Scope, Send


def create_app() -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = str(os.getpid()).encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    return app
