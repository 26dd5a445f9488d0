"""What a worker does once at start-up, before it serves."""

from __future__ import annotations

import gc

from fastapi.testclient import TestClient

from app.db.uow import Database
from app.main import create_app
from app.settings import Settings


def test_startup_freezes_the_objects_built_before_serving(
    settings: Settings, database: Database
) -> None:
    """What the process built before serving leaves the collector's generations (``gc.freeze``:
    full collections no longer walk it), and what a request builds afterwards does not.
    Shown able to fail: without ``freeze_startup_objects()`` in the lifespan the object built
    before start-up is still in a generation and the first assertion fails."""
    gc.unfreeze()
    built_before = [object()]  # a container: tracked by the collector
    assert any(o is built_before for o in gc.get_objects())
    try:
        with TestClient(create_app(settings, database)) as client:
            assert gc.get_freeze_count() > 0
            assert not any(o is built_before for o in gc.get_objects())
            assert client.get("/healthz").status_code == 200
            built_after = [object()]
            assert any(o is built_after for o in gc.get_objects())
    finally:
        gc.unfreeze()
