"""A dataset or an organisation named on the command line by its exact name: a name several of
them have is an error that lists their ids (whether the server lets one organisation reuse a
name or not, datasets of different organisations can share one, and an admin sees them all)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from odometer_client import OdometerClient
from odometer_client._cli import run
from odometer_client.cli import main
from tests.client.live import ADMIN_KEY, Server

ODOMETER = Path(sys.executable).parent / "odometer"


def test_a_name_two_organisations_use_is_ambiguous_to_an_admin(
    server: Server, client: OdometerClient
) -> None:
    name = f"cli-twin-{uuid.uuid4().hex[:8]}"
    twins = []
    for side in ("a", "b"):
        org = client.create_organisation(f"{name}-org-{side}").id
        curator = client.create_principal(f"{name}-{side}", "curator", organisation_id=org)
        with OdometerClient(server.base_url, client.issue_key(curator.id).key) as cur:
            twins.append(cur.create_dataset(name, "1", "0").id)
    live = ["--url", server.base_url, "--key", ADMIN_KEY]
    proc = subprocess.run(
        [str(ODOMETER), "datasets", "show", name, *live],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (1, "")
    listed = [d.id for d in client.list_datasets() if d.name == name]
    assert sorted(listed) == sorted(twins)
    assert proc.stderr == (
        f"error: 2 datasets are named {name!r}: give one of their ids: {', '.join(listed)}\n"
    )
    for twin in twins:  # an id is never ambiguous
        proc = subprocess.run(
            [str(ODOMETER), "datasets", "show", twin, *live],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0 and twin in proc.stdout.splitlines()[1]


# ---------------------------------------------------------------------------- a canned service
def _dataset(n: int, name: str) -> dict[str, object]:
    return {"id": f"ds_{n:032x}", "name": name, "mode": "basic", "status": {}}


@pytest.fixture
def canned(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], list[str]]]:
    """A service answering the listings only: three datasets named ``twin`` and one ``solo``,
    two organisations named ``acme``; what was asked is recorded."""
    asked: list[str] = []
    datasets = [_dataset(1, "twin"), _dataset(2, "solo"), _dataset(3, "twin"), _dataset(4, "twin")]
    orgs = [{"id": "org_1", "name": "acme"}, {"id": "org_2", "name": "acme"}]

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(f"{request.method} {request.url.path}")
        if request.url.path == "/v1/datasets":
            return httpx.Response(200, json={"datasets": datasets, "next_offset": None})
        if request.url.path == "/v1/organisations":
            return httpx.Response(200, json={"organisations": orgs})
        return httpx.Response(404, json={"error": "NotFound", "detail": "not canned"})

    def connect(url: str, key: str) -> OdometerClient:
        return OdometerClient(url, key, transport=httpx.MockTransport(answer))

    monkeypatch.setattr(run, "OdometerClient", connect)
    yield lambda: asked


CANNED = ["--url", "http://canned", "--key", "k"]


def test_several_datasets_of_one_name_are_listed_by_id(
    canned: Callable[[], list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "twin", *CANNED]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    ids = ", ".join(f"ds_{n:032x}" for n in (1, 3, 4))
    assert captured.err == f"error: 3 datasets are named 'twin': give one of their ids: {ids}\n"
    assert canned() == ["GET /v1/datasets"]  # nothing else was asked, nothing was changed
    assert main(["datasets", "show", "solo", *CANNED]) == 1  # one match: its id is used
    assert canned()[-1] == f"GET /v1/datasets/ds_{2:032x}"
    capsys.readouterr()


def test_several_organisations_of_one_name_are_listed_by_id(
    canned: Callable[[], list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    message = "error: 2 organisations are named 'acme': give one of their ids: org_1, org_2\n"
    assert main(["orgs", "report", "acme", *CANNED]) == 1
    assert capsys.readouterr().err == message
    assert main(["orgs", "cap", "acme", "--remove", *CANNED]) == 1  # nothing is changed
    assert capsys.readouterr().err == message
    assert canned() == ["GET /v1/organisations"] * 2
