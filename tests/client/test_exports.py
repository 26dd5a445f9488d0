"""The client writes no export format itself: it saves the file the server writes with the
ledger format of the core, byte for byte, and the synchronous and asynchronous clients save the
same file."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import httpx
import pytest

from odometer_client import AsyncOdometerClient, OdometerClient, OdometerError, ServerError, exports
from odometer_client import declarations as d
from odometer_client.exports import EXPORT_FORMATS, ExportFormat
from odometer_core.ledger.formats import load_export, load_export_and_head, write_export
from tests.client.conftest import FAST_RETRY
from tests.client.live import ADMIN_KEY, Server


def _busy_dataset(client: OdometerClient) -> str:
    ds = client.create_dataset("exports", "2", "0.000001").id
    client.register(ds, d.pure_dp("0.1"))
    with client.reserve(ds, d.odp({"none": "0.2", "some": "0.5"}, delta="1e-7")) as r:
        r.settle("none")
    client.register(ds, d.gaussian(4))
    return ds


def test_the_client_has_no_writer_of_the_formats() -> None:
    assert not hasattr(exports, "write_export") and not hasattr(exports, "ExportWriter")


@pytest.mark.parametrize("format", EXPORT_FORMATS)
def test_client_export_equals_the_core_ledger_format(
    client: OdometerClient, tmp_path: Path, format: ExportFormat
) -> None:
    ds = _busy_dataset(client)
    entries = [entry.raw for entry in client.ledger(ds)]
    assert len(entries) == 5
    path = tmp_path / f"export.{format}"
    assert client.export(ds, path, format) == 5
    saved, head = load_export_and_head(path.read_text("utf-8"))
    assert saved == entries
    unsigned = {"signed_at": None, "key_id": None, "algorithm": None, "signature": None}
    # the closing head (docs/ledger.md): unsigned, the test server has no checkpoint key
    assert head == {"dataset_id": ds, "seq": 5, "head_hash": entries[-1]["hash"], **unsigned}
    core = io.StringIO()
    assert write_export(ds, entries, core, format, head) == 5
    assert path.read_bytes() == core.getvalue().encode("utf-8")
    assert load_export(path.read_text("utf-8")) == entries


@pytest.mark.parametrize("format", EXPORT_FORMATS)
def test_sync_and_async_exports_stream_the_same_file(
    server: Server, client: OdometerClient, tmp_path: Path, format: ExportFormat
) -> None:
    ds = _busy_dataset(client)
    sync_path, async_path = tmp_path / f"sync.{format}", tmp_path / f"async.{format}"
    assert client.export(ds, sync_path, format, page_size=2) == 5

    async def export() -> int:
        async with AsyncOdometerClient(server.base_url, ADMIN_KEY, retry=FAST_RETRY) as c:
            return await c.export(ds, async_path, format, page_size=2)

    assert asyncio.run(export()) == 5
    assert sync_path.read_bytes() == async_path.read_bytes()


def test_an_unknown_format_is_refused_before_sending(
    client: OdometerClient, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="format must be one of json, jsonl, csv"):
        client.export("ds_x", tmp_path / "x", "xml")  # type: ignore[arg-type]


def test_jsonl_pages_concatenate_to_the_jsonl_export(
    server: Server, client: OdometerClient, tmp_path: Path
) -> None:
    ds = _busy_dataset(client)
    path = tmp_path / "export.jsonl"
    client.export(ds, path, "jsonl")
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    with httpx.Client(base_url=server.base_url, headers=headers) as http:
        pages = [
            http.get(f"/v1/datasets/{ds}/ledger", params={"format": "jsonl", **q})
            for q in ({"limit": "3"}, {"after_seq": "3", "limit": "3"})
        ]
    assert [p.headers["content-type"] for p in pages] == ["application/x-ndjson"] * 2
    # the export is the pages, then its closing head
    *lines, closing = path.read_bytes().splitlines(keepends=True)
    assert b"".join(p.content for p in pages) == b"".join(lines)
    assert closing.startswith(b'{"head":{"dataset_id":')


def _transport(responses: list[httpx.Response]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.params["export"] == "true"
        return responses.pop(0)

    return httpx.MockTransport(handler)


def test_a_failed_attempt_is_retried_from_the_start(tmp_path: Path) -> None:
    body = b'{"seq":1,"hash":"h"}\n'
    transport = _transport(
        [
            httpx.Response(503, json={"error": "ServiceUnavailable", "detail": "busy"}),
            httpx.Response(200, content=body, headers={"Ledger-Head-Seq": "1"}),
        ]
    )
    path = tmp_path / "x.jsonl"
    with OdometerClient("http://odometer", "k", retry=FAST_RETRY, transport=transport) as c:
        assert c.export("ds_1", path, "jsonl") == 1
    assert path.read_bytes() == body


def test_errors_and_servers_without_whole_exports_are_reported(tmp_path: Path) -> None:
    transport = _transport(
        [httpx.Response(503, json={"error": "ServiceUnavailable", "detail": "busy"})] * 4
        + [httpx.Response(200, json={"dataset_id": "ds_1", "entries": []})]
    )
    with OdometerClient("http://odometer", "k", retry=FAST_RETRY, transport=transport) as c:
        with pytest.raises(ServerError):
            c.export("ds_1", tmp_path / "x.json")
        with pytest.raises(OdometerError, match="does not serve whole exports"):
            c.export("ds_1", tmp_path / "x.json")
