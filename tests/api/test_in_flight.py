"""The process's count of requests in flight (the metrics middleware keeps it), what it exports,
and when the process counts as serving one request at a time (the register use case then runs
a registration on the event loop, :class:`app.services.batching.Registrar`)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.api.middleware import OVERLAP_MEMORY, Metrics


def test_one_request_at_a_time_is_alone_and_an_overlap_is_remembered() -> None:
    metrics = Metrics()
    metrics.started()
    assert metrics.alone()
    metrics.started()  # a second request while the first is in flight
    assert not metrics.alone()
    metrics.finished()
    assert metrics.serving == 1 and not metrics.alone()  # one in flight, but just overlapped
    metrics.overlapped_at -= OVERLAP_MEMORY + 0.01  # as if that overlap were older
    assert metrics.alone()
    metrics.started()
    assert not metrics.alone()


def test_the_count_is_exported_and_back_to_zero_between_requests(client: TestClient) -> None:
    text = client.get("/metrics").text
    # the scrape itself is the one request in flight while it is rendered
    assert "odometer_http_requests_in_flight 1.0" in text.splitlines()
    metrics: Metrics = client.app.state.metrics  # type: ignore[attr-defined]
    assert metrics.serving == 0
