"""The client writes exports byte for byte as the ledger format of the core does, and the
synchronous and asynchronous clients stream the same file."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from odometer_client import AsyncOdometerClient, OdometerClient
from odometer_client import declarations as d
from odometer_client.exports import EXPORT_FORMATS, ExportFormat, write_export
from odometer_core.ledger.formats import write_export as core_write_export
from tests.client.conftest import FAST_RETRY
from tests.client.live import ADMIN_KEY, Server


def _busy_dataset(client: OdometerClient) -> str:
    ds = client.create_dataset("exports", "2", "0.000001").id
    client.register(ds, d.pure_dp("0.1"))
    with client.reserve(ds, d.odp({"none": "0.2", "some": "0.5"}, delta="1e-7")) as r:
        r.settle("none")
    client.register(ds, d.gaussian(4))
    return ds


@pytest.mark.parametrize("format", EXPORT_FORMATS)
def test_client_export_equals_the_core_ledger_format(
    client: OdometerClient, format: ExportFormat
) -> None:
    ds = _busy_dataset(client)
    entries = list(client.ledger(ds))
    assert len(entries) == 5
    ours, core = io.StringIO(), io.StringIO()
    assert write_export(ds, entries, ours, format) == 5
    assert core_write_export(ds, entries, core, format) == 5
    assert ours.getvalue() == core.getvalue()


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
