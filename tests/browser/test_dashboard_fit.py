"""The dashboard's "How many more fit?" form in a real Chromium: on an open dataset's detail an
analyst previews a declaration (prefilled with the last admitted one, which the status's
summary counts) and reads how many more fit in a row, the level that admits the fewest and the
next refusal's reason — the API preview's ``fit``, shown as it is. Past 10⁶ it says "at least
1000000"; on a split dataset the sub-budget is chosen; a quota that binds is named. Screenshots
go to ``$ODOMETER_SCREENSHOTS`` (else ``test-artifacts/browser/``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page

from tests.browser.conftest import watched_page
from tests.browser.test_dashboard import _long_numbers, _screenshot
from tests.concurrency.server import Server, running_server
from tests.support import ADMIN_KEY, fresh_database

GAUSSIAN = {"type": "gaussian", "sigma": "300", "sensitivity": "1"}
SPLIT = {
    "mode": "split",
    "sub_budgets": [
        {"name": "stats", "budget": {"epsilon": "0.5", "delta": "0"}},
        {
            "name": "train",
            "budget": {"epsilon": "0.5", "delta": "0.0000005"},
            "accounting": {"mode": "rdp"},
        },
    ],
}


@dataclass
class World:
    server: Server
    analyst_key: str
    datasets: dict[str, str]  # name → id


def _post(http: httpx.Client, path: str, body: Any, key: str = ADMIN_KEY) -> Any:
    r = http.post(path, json=body, headers={"Authorization": f"Bearer {key}"})
    assert r.status_code in (200, 201), r.text
    return r.json()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """An analyst with grants on a zcdp dataset (one Gaussian registered: the status counts
    more of it), a basic dataset with a quota of ε 0.02 and a split dataset."""
    tmp = tmp_path_factory.mktemp("fit")
    with (
        fresh_database("sqlite", tmp) as backend,
        running_server(backend.url, tmp / "server.log") as server,
        httpx.Client(base_url=server.base_url, timeout=30) as http,
    ):
        org = _post(http, "/v1/organisations", {"name": "fit-org"})["id"]
        analyst = _post(
            http, "/v1/principals", {"name": "ana", "role": "analyst", "organisation_id": org}
        )["id"]
        key = str(_post(http, f"/v1/principals/{analyst}/keys", {})["key"])
        datasets = {}
        for name, epsilon, accounting, quota in (
            ("zcdp-set", "1", {"mode": "zcdp"}, None),
            ("basic-set", "1000", {"mode": "basic"}, {"epsilon": "0.02", "delta": "0"}),
            ("split-set", "1", SPLIT, None),
        ):
            body = {
                "name": name,
                "budget": {"epsilon": epsilon, "delta": "0.000001"},
                "accounting": accounting,
                "organisation_id": org,
            }
            ds = _post(http, "/v1/datasets", body)["id"]
            grant = {"principal_id": analyst} | ({"quota": quota} if quota else {})
            _post(http, f"/v1/datasets/{ds}/grants", grant)
            datasets[name] = ds
        _post(
            http, f"/v1/datasets/{datasets['zcdp-set']}/invocations", {"mechanism": GAUSSIAN}, key
        )
        yield World(server, key, datasets)


def _preview(world: World, ds: str, body: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(
        f"{world.server.base_url}/v1/datasets/{ds}/invocations/preview",
        json=body,
        headers={"Authorization": f"Bearer {world.analyst_key}"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    fit: dict[str, Any] = r.json()["fit"]
    return fit


def _open(
    browser: BrowserContext, world: World, ds: str, key: str | None = None
) -> tuple[Page, list[str]]:
    page, errors = watched_page(browser)
    response = page.goto(f"{world.server.base_url}/dashboard#ds={ds}")
    assert response is not None and response.status == 200
    page.fill("#api-key", key or world.analyst_key)
    page.click("#use-key")
    page.wait_for_selector(f'body[data-loaded="{ds}"]', timeout=20_000)
    return page, errors


def _count(page: Page, declaration: dict[str, Any] | None = None) -> str:
    """Fill the form (or keep what it holds), count, and return what it says."""
    if declaration is not None:
        page.fill("#fit-declaration", json.dumps(declaration))
    page.evaluate("() => { delete document.getElementById('fit-result').dataset.count; }")
    page.click("#fit-count")
    page.wait_for_selector("#fit-result[data-count]", timeout=20_000)
    return page.locator("#fit-result").inner_text()


def test_the_form_counts_what_the_api_preview_counts(world: World, browser: BrowserContext) -> None:
    zcdp = world.datasets["zcdp-set"]
    page, errors = _open(browser, world, zcdp)
    form = page.locator("#fit-form")
    assert form.is_visible() and page.locator("#fit-on").is_hidden()  # no sub-budgets here
    # prefilled with the last admitted declaration, the one the summary's "more" counts
    assert json.loads(page.locator("#fit-declaration").input_value()) == GAUSSIAN
    fit = _preview(world, zcdp, {"mechanism": GAUSSIAN})
    assert fit["count"] > 1000 and fit["level"] == "dataset"
    shown = _count(page)
    assert shown == f"{fit['count']} more fit in a row (the dataset admits the fewest)"
    assert page.locator("#fit-result").get_attribute("data-count") == str(fit["count"])
    assert page.locator("#fit-reason").inner_text() == (
        f"The next one would be refused: {fit['reason']}"
    )
    # the summary's own count of the same declaration agrees
    assert page.locator("#detail-gauge .more").inner_text().startswith(f"{fit['count']} more")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        assert _long_numbers(page) == []
        path: Path = _screenshot(page, f"fit-zcdp-{width}")
        assert path.exists()
    page.set_viewport_size({"width": 1280, "height": 900})
    # another declaration, and one that is not JSON
    other = {"type": "gaussian", "sigma": "3000", "sensitivity": "1"}
    fit = _preview(world, zcdp, {"mechanism": other})
    assert _count(page, other).startswith(f"{fit['count']} more fit in a row")
    page.fill("#fit-declaration", "{not json")
    page.click("#fit-count")
    assert page.locator("#fit-result").inner_text().startswith("The declaration is not JSON")
    assert errors == []
    # previews are an analyst's: the administrator's detail has no form
    page, errors = _open(browser, world, zcdp, ADMIN_KEY)
    assert page.locator("#fit-form").is_hidden()
    assert errors == []


def test_the_form_names_a_binding_quota_says_at_least_and_takes_a_sub_budget(
    world: World, browser: BrowserContext
) -> None:
    basic = world.datasets["basic-set"]
    page, errors = _open(browser, world, basic)
    pure = {"type": "pure_dp", "epsilon": "0.0001"}
    fit = _preview(world, basic, {"mechanism": pure})
    assert (fit["count"], fit["level"]) == (200, "quota")
    assert _count(page, pure) == "200 more fit in a row (the quota admits the fewest)"
    assert page.locator("#fit-reason").inner_text().endswith(fit["reason"])
    # no quota binds a tiny ε on a budget of 1000 before 10⁶: "at least"
    page.close()
    zcdp = world.datasets["zcdp-set"]
    page, errors = _open(browser, world, zcdp)
    tiny = {"type": "gaussian", "sigma": "1000000", "sensitivity": "1"}
    fit = _preview(world, zcdp, {"mechanism": tiny})
    assert fit == {"count": 1_000_000, "at_least": True, "reason": None, "level": "dataset"}
    assert _count(page, tiny) == "at least 1000000 more fit in a row"
    assert page.locator("#fit-reason").inner_text() == ""
    _screenshot(page, "fit-at-least")
    page.close()
    # a split dataset: the sub-budget is chosen in the form
    split = world.datasets["split-set"]
    page, errors = _open(browser, world, split)
    assert page.locator("#fit-on").is_visible()
    page.select_option("#fit-sub-budget", "train")
    fit = _preview(world, split, {"mechanism": GAUSSIAN, "sub_budget": "train"})
    assert (
        _count(page, GAUSSIAN)
        == f"{fit['count']} more fit in a row (the dataset admits the fewest)"
    )
    assert errors == []
