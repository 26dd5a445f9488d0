"""The synchronous client is generated from the asynchronous one (one source for both)."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

from odometer_client import AsyncOdometerClient, AsyncReservation, OdometerClient, Reservation

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> object:
    spec = importlib.util.spec_from_file_location("generate", ROOT / "client/generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_sync_client_is_generated_from_the_async_source() -> None:
    generator = _generator()
    committed = (ROOT / "client/odometer_client/_sync/client.py").read_text("utf-8")
    assert committed == generator.generated_sync()  # type: ignore[attr-defined]


def test_both_clients_have_the_same_methods_and_signatures() -> None:
    for sync_cls, async_cls in (
        (OdometerClient, AsyncOdometerClient),
        (Reservation, AsyncReservation),
    ):
        sync_api = {n for n in dir(sync_cls) if not n.startswith("_")}
        async_api = {n for n in dir(async_cls) if not n.startswith("_")}
        assert sync_api == async_api
        for name in sync_api:
            member = getattr(sync_cls, name)
            if callable(member):
                sync_params = list(inspect.signature(member).parameters)
                async_params = list(inspect.signature(getattr(async_cls, name)).parameters)
                assert sync_params == async_params, name
        assert inspect.iscoroutinefunction(async_cls.cancel)
        assert not inspect.iscoroutinefunction(sync_cls.cancel)
