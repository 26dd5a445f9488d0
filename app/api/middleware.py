"""ASGI middleware: request body size limit and Prometheus request metrics."""

from __future__ import annotations

import email.message
import json
import time
from collections.abc import Awaitable, Callable
from functools import lru_cache
from typing import Any, Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: How long (seconds) a process that served two requests at once is not taken to be serving
#: one at a time (:meth:`Metrics.alone`).
OVERLAP_MEMORY: Final = 1.0


@lru_cache(maxsize=64)
def is_json(content_type: str | None) -> bool:
    """Whether FastAPI decodes a body of this content type as JSON (``application/json`` or
    ``application/*+json``; none at all is not JSON). Remembered for the last 64 header
    values: the parse builds an ``email.message.Message``, and every request with a body asks
    twice (:class:`BodySizeLimitMiddleware`, then the route)."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


class Metrics:
    """The service's metrics, in a registry of their own (one per app instance)."""

    def __init__(self) -> None:
        #: requests this process is serving now (:class:`MetricsMiddleware` counts them), and
        #: when it last served two at once (:meth:`alone`)
        self.serving = 0
        self.overlapped_at = -OVERLAP_MEMORY
        # no *_created series: they only add noise to scrapes
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "odometer_http_requests",
            "HTTP requests by method, route template and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "odometer_http_request_duration_seconds",
            "HTTP request latency by method and route template",
            ["method", "route"],
            registry=self.registry,
        )
        self.decisions = Counter(
            "odometer_decisions",
            "Budget decisions by outcome (accepted, reserved, rejected, settled, cancelled)",
            ["outcome"],
            registry=self.registry,
        )
        in_flight = Gauge(
            "odometer_http_requests_in_flight",
            "HTTP requests this process is serving now",
            registry=self.registry,
        )
        in_flight.set_function(self.in_flight)
        self.idempotent_replays = Counter(
            "odometer_idempotent_replays",
            "Requests answered from a stored idempotent response",
            registry=self.registry,
        )
        # Each series' child, as ``labels`` returns it, kept by its label values: ``labels``
        # checks and joins them under a lock on every call, three calls a registration. The
        # registry keeps a child per label values already, so these hold no more than it does.
        self._decided: dict[str, Any] = {}
        self._counted: dict[tuple[str, str, int], Any] = {}
        self._timed: dict[tuple[str, str], Any] = {}

    def in_flight(self) -> int:
        return self.serving

    def started(self) -> None:
        self.serving += 1  # on the event loop's thread only: no lock
        if self.serving > 1:
            self.overlapped_at = time.monotonic()

    def finished(self) -> None:
        self.serving -= 1

    def alone(self) -> bool:
        """Whether this process serves one request at a time: the request asking is the only
        one in flight, and none overlapped another for :data:`OVERLAP_MEMORY` seconds. A
        moment with one request in flight between overlapping ones is no sign that the next
        will wait for nobody (the register use case runs a lone request on the event loop,
        :class:`app.services.batching.Registrar`)."""
        return self.serving <= 1 and time.monotonic() - self.overlapped_at > OVERLAP_MEMORY

    def record_decision(self, outcome: str | None) -> None:
        if outcome is None:
            self.idempotent_replays.inc()
        else:
            child = self._decided.get(outcome)
            if child is None:
                child = self._decided[outcome] = self.decisions.labels(outcome)
            child.inc()

    def record_request(self, method: str, template: str, status: int, seconds: float) -> None:
        """One answered request: its count by route template and status, and its latency."""
        counted = self._counted.get((method, template, status))
        if counted is None:
            counted = self.requests.labels(method, template, str(status))
            self._counted[method, template, status] = counted
        counted.inc()
        timed = self._timed.get((method, template))
        if timed is None:
            timed = self._timed[method, template] = self.latency.labels(method, template)
        timed.observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()
        metrics = self.metrics
        metrics.started()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            metrics.finished()
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = str(scope.get("method", ""))
            self.metrics.record_request(method, template, status, time.perf_counter() - start)


#: A route served from :class:`BodySizeLimitMiddleware` once the body is read (the register
#: route's, :class:`app.api.register.RegisterLane`): called with the scope, the body, the
#: request's ``receive`` and ``send``, it answers ``True`` when it has served the request.
Lane = Callable[[Scope, bytes, Receive, Send], Awaitable[bool]]


class BodySizeLimitMiddleware:
    """Refuse bodies above ``max_bytes`` with 413, whether announced by Content-Length or sent
    chunked: the body is read (at most ``max_bytes`` + one chunk) before the app runs. A
    body sent without a JSON content type (every body of the API is JSON) is refused with 415
    and what to send, instead of a validation error about dictionaries. A request ``lane``
    serves (the register route's) is answered there; the others go on to the app."""

    def __init__(self, app: ASGIApp, max_bytes: int, lane: Lane | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.lane = lane

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        content_type = None
        for name, value in scope.get("headers", ()):
            if name == b"content-type":
                content_type = value.decode("latin-1")
            if name == b"content-length":
                try:
                    announced = int(value)
                except ValueError:
                    announced = -1
                if announced > self.max_bytes:
                    await self._too_large(send)
                    return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and not is_json(content_type):
            await self._refuse(
                send,
                415,
                {
                    "error": "UnsupportedMediaType",
                    "detail": "send the body as JSON, with the header Content-Type: "
                    "application/json"
                    + ("" if content_type is None else f" (it was sent as {content_type!r})"),
                },
            )
            return
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        if self.lane is not None and await self.lane(scope, body, replay, send):
            return
        await self.app(scope, replay, send)

    async def _too_large(self, send: Send) -> None:
        await self._refuse(
            send,
            413,
            {
                "error": "PayloadTooLarge",
                "detail": f"request body larger than {self.max_bytes} bytes",
                "limit": self.max_bytes,
            },
        )

    @staticmethod
    async def _refuse(send: Send, status: int, payload: dict[str, object]) -> None:
        body = json.dumps(payload, separators=(",", ":")).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
