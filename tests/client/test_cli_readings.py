"""What the command line says is left, in every mode (issue 38, round two): every place that
shows a budget leads with the one reading (``status.summary``), amounts have at most 8
significant digits (readings and spend rounded up, what is left down) except under ``--exact``
and ``--json``, a refusal is its summary's one line, the report attributes the spend to each
analyst in every mode, and all of it degrades gracefully on a server without summaries."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from decimal import ROUND_FLOOR, Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from odometer_client import BudgetExceeded, OdometerClient
from odometer_client import declarations as d
from odometer_client._cli import run
from odometer_client.cli import main
from odometer_client.exports import fmt
from tests.client.conftest import FAST_RETRY
from tests.client.figures import down8, up8
from tests.client.live import ADMIN_KEY, Server

ODOMETER = Path(sys.executable).parent / "odometer"
ENV = {k: v for k, v in os.environ.items() if k not in ("ODOMETER_URL", "ODOMETER_API_KEY")}
GAUSSIAN = d.gaussian("10")
SYMBOL = {"epsilon": "ε", "delta": "δ", "rho": "ρ", "mu_squared": "μ²", "rdp": "RDP"}


def _run(server: Server, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--url", server.base_url, "--key", ADMIN_KEY])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _row(out: str, first: str) -> list[str]:
    """A table row's cells (columns are two or more spaces apart)."""
    line = next(line for line in out.splitlines() if line.startswith(first))
    return re.split(r"\s{2,}", line)


def _percent(fraction: str) -> str:
    share = (Decimal(fraction) * 100).quantize(Decimal("0.01"), rounding=ROUND_FLOOR)
    return f"{format(share.normalize(), 'f')} %"


def _left_cell(item: dict[str, Any]) -> str:
    order = item.get("order")
    where = f" at α={format(Decimal(order).normalize(), 'f')}" if order else ""
    return f"{SYMBOL[item['unit']]} {item['amount']}{where} ({_percent(item['fraction'])})"


def _raw(server: Server, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """The server's document at ``path`` (GET, or POST ``body``), as the admin."""
    response = httpx.request(
        "GET" if body is None else "POST",
        f"{server.base_url}{path}",
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        json=body,
    )
    response.raise_for_status()
    document: dict[str, Any] = response.json()
    return document


# ---------------------------------------------------------------------------- datasets
@pytest.mark.parametrize("mode", ["basic", "zcdp", "rdp", "gdp"])
def test_datasets_list_leads_with_the_certified_reading_and_what_is_left(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    ds = client.create_dataset(_name(f"list-{mode}"), "1", "0.000001", accounting={"mode": mode})
    client.register(ds, GAUSSIAN)
    status = _raw(server, f"/v1/datasets/{ds.id}")["status"]
    reading, summary = status["odometer"], status["summary"]
    code, out, err = _run(server, capsys, "datasets", "list")
    assert (code, err) == (0, "")
    header = re.split(r"\s{2,}", out.splitlines()[0])
    assert header == ["id", "name", "mode", "budget", "certified ε", "δ", "remaining"]
    cells = _row(out, ds.id)
    assert cells[:4] == [ds.id, ds.name, mode, "ε=1 δ=0.000001"]
    # the certified reading rounded up to 8 significant digits: the summary's guarantee
    assert len(Decimal(reading["epsilon"]).as_tuple().digits) > 8
    assert cells[4] == up8(reading["epsilon"]) == summary["guarantee"]["epsilon"]
    assert cells[5] == up8(reading["delta"]) == summary["guarantee"]["delta"]
    # what is left, in the mode's unit, rounded down (never overstated)
    left = [item for item in summary["left"] if Decimal(item["budget"]) > 0]
    assert cells[6] == ", ".join(_left_cell(item) for item in left)
    unit = {"basic": "ε", "zcdp": "ρ", "rdp": "RDP", "gdp": "μ²"}[mode]
    assert cells[6].startswith(f"{unit} ") and "%" in cells[6]
    first = left[0]
    if mode == "rdp":
        assert " at α=" in cells[6] and first["order"] is not None
    else:
        exact = {"basic": "epsilon", "zcdp": "rho", "gdp": "mu_squared"}[mode]
        assert first["amount"] == down8(status["remaining"][exact])
    code, out, _ = _run(server, capsys, "datasets", "list", "--exact")
    assert code == 0 and _row(out, ds.id)[4] == reading["epsilon"]  # in full


def test_datasets_show_leads_with_the_summary_then_the_exact_figures(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = client.create_dataset(_name("show-rdp"), "1", "0.000001", accounting={"mode": "rdp"})
    client.register(ds, GAUSSIAN)
    status = _raw(server, f"/v1/datasets/{ds.id}")["status"]
    code, out, _ = _run(server, capsys, "datasets", "show", ds.name)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == status["summary"]["text"]
    assert lines[0].startswith(f"certified ε = {up8(status['odometer']['epsilon'])}, δ = ")
    assert "more gaussian like the last fit" in lines[0]
    guarantee = next(line for line in lines if line.startswith("guarantee so far"))
    # accounting 1.6.0: one Gaussian on a fresh rdp dataset reads its PLD branch's statement
    assert guarantee.endswith(
        f"epsilon={status['odometer']['epsilon']}, delta=0.000001 (pld_branch)"
    )
    assert "remaining         curve (see --json)" in lines
    assert "dead" not in out and "[" not in out  # no raw curve


# ---------------------------------------------------------------------------- register, preview
def test_register_and_preview_say_the_reading_after_the_decision(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = client.create_dataset(_name("reg-zcdp"), "1", "0.000001", accounting={"mode": "zcdp"})
    thirty = json.dumps({"type": "gaussian", "sigma": "30", "sensitivity": "1"})
    code, out, err = _run(server, capsys, "register", ds.id, "--mechanism", thirty)
    assert (code, err) == (0, "")
    decision, now = out.splitlines()
    assert decision.startswith("accepted inv_")
    # ρ = 1/(2·30²) = 0.000555…: the server's text, rounded up to 6 significant digits
    assert decision.endswith(f" on {ds.id}: charge ρ=0.000555556 δ=0")
    assert now == "now: " + _raw(server, f"/v1/datasets/{ds.id}")["status"]["summary"]["text"]
    assert now.endswith("more gaussian like the last fit")
    code, out, _ = _run(server, capsys, "preview", ds.id, "--mechanism", thirty)
    assert code == 0
    preview = _raw(
        server, f"/v1/datasets/{ds.id}/invocations/preview", {"mechanism": json.loads(thirty)}
    )
    assert out.splitlines() == [
        f"would be accepted: charge ρ={preview['shown']['charge']['rho']} δ=0",
        f"fit: {preview['fit']['count']} more in a row (the dataset admits the fewest) "
        "(next refused: rho budget exceeded)",
        "now: " + _raw(server, f"/v1/datasets/{ds.id}")["status"]["summary"]["text"],
    ]
    # past 10⁶ the count stops and says so, with no level as the fewest
    tiny = json.dumps({"type": "gaussian", "sigma": "1000000", "sensitivity": "1"})
    code, out, _ = _run(server, capsys, "preview", ds.id, "--mechanism", tiny)
    assert code == 0 and out.splitlines()[1] == "fit: at least 1000000 more in a row"
    code, out, _ = _run(server, capsys, "register", ds.id, "--mechanism", thirty, "--json")
    registered = json.loads(out)  # the server's document only
    assert code == 0 and registered["status"] == "accepted"
    rho = registered["charge"]["rho"]
    assert len(Decimal(rho).as_tuple().digits) > 8
    code, out, _ = _run(server, capsys, "register", ds.id, "--mechanism", thirty, "--exact")
    assert code == 0 and out.splitlines()[0].endswith(f": charge ρ={rho} δ=0")  # in full


def test_a_refused_registration_is_its_summary_in_one_line(
    server: Server, client: OdometerClient
) -> None:
    ds = client.create_dataset(_name("refused"), "1", "0.000001", accounting={"mode": "rdp"})
    client.register(ds, GAUSSIAN)
    heavy = {"type": "gaussian", "sigma": "0.5", "sensitivity": "1"}
    with pytest.raises(BudgetExceeded) as refused:
        client.register(ds, heavy)
    summary = refused.value.body["summary"]
    assert summary["level"] == "dataset" and summary["instead"]["type"] == "gaussian"
    live = ["--url", server.base_url, "--key", ADMIN_KEY]
    proc = subprocess.run(
        [str(ODOMETER), "register", ds.name, "--mechanism", json.dumps(heavy), *live],
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (1, "")
    assert "Traceback" not in proc.stderr
    assert proc.stderr == f"error: {summary['text']}\n"
    assert proc.stderr.startswith("error: refused by the dataset budget: ")
    assert f"gaussian with sigma ≥ {summary['instead']['sigma']} would fit" in proc.stderr
    proc = subprocess.run(
        [str(ODOMETER), "register", ds.id, "--mechanism", json.dumps(heavy), "--json", *live],
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
        check=False,
    )
    body = json.loads(proc.stderr)  # --json: the server's answer, one line of JSON
    assert (proc.returncode, body["status"], body["summary"]) == (1, 409, summary)


# ---------------------------------------------------------------------------- report
def test_report_leads_with_the_reading_and_attributes_each_analysts_spend(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = client.create_dataset(_name("report-rdp"), "3", "0.00001", accounting={"mode": "rdp"})
    analyst = client.create_principal(_name("analyst"), "analyst", organisation_id=ds.organisation)
    client.grant(ds, analyst.id)
    client.register(ds, GAUSSIAN)
    with OdometerClient(server.base_url, client.issue_key(analyst.id).key, retry=FAST_RETRY) as ana:
        ana.register(ds, d.gaussian("20"))
        ana.register(ds, d.gaussian("20"))
    report = client.report(ds)
    assert report is not None and report.status is not None
    code, out, _ = _run(server, capsys, "report", ds.id)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == report.status["summary"]["text"]
    assert "spent:                  RDP curve (--exact prints it)" in lines
    assert "dead=" not in out and "rdp=[" not in out  # no raw curves by default
    title = lines.index(
        "per analyst, attribution (not certified): the (ε, δ) of each analyst's own"
    )
    header = re.split(r"\s{2,}", lines[title + 2])
    assert header[-3:] == ["charged", "attributed ε", "δ"]
    for row in report.analysts:
        cells = _row(out, row["actor"])
        attribution = row.get("attribution")
        expected = (
            ("-", "-") if attribution is None else (attribution["epsilon"], attribution["delta"])
        )
        assert cells[-3:] == ["RDP curve", *expected]
        if attribution is not None:  # the server's attribution: not certified, 8 digits
            assert attribution["certified"] is False
            assert len(Decimal(attribution["epsilon"]).as_tuple().digits) <= 8
    assert {r["actor"] for r in report.analysts} == {"admin", analyst.id}
    code, out, _ = _run(server, capsys, "report", ds.id, "--exact")  # the raw figures, as before
    assert code == 0 and "dead=[True" in out and "rdp=['" in out


def test_report_in_basic_shows_the_charged_epsilon_and_delta(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = client.create_dataset(_name("report-basic"), "2", "0.000001")
    client.register(ds, GAUSSIAN)  # ε = 0.44707842418651294603…, δ = 1e-7
    report = client.report(ds)
    assert report is not None and report.status is not None
    (admin,) = report.analysts
    code, out, _ = _run(server, capsys, "report", ds.id)
    assert code == 0 and out.splitlines()[0] == report.status["summary"]["text"]
    assert "per analyst (epsilon):" in out
    charged = admin["charged"]
    assert len(Decimal(charged["epsilon"]).as_tuple().digits) > 8
    # the server's text: charges up to 6 significant digits, what remains down
    assert report.raw["shown"]["analysts"]["admin"]["charged"] == {
        "epsilon": "0.447079",
        "delta": "0.0000001",
    }
    assert _row(out, "admin")[-3:] == ["0.447079", "0.0000001", "0"]
    remaining = report.raw["status"]["shown"]["remaining"]
    assert remaining["epsilon"] == "1.55292"  # 2 - 0.447078424… = 1.552921575…, down
    assert f"remaining:              epsilon={remaining['epsilon']}, delta=" in out


# ---------------------------------------------------------------------------- older servers
class _OlderServer(httpx.BaseTransport):
    """The live server as one from before summaries, attributions and display text: those
    fields (and the report's per-analyst ``curve``) dropped."""

    DROPPED = frozenset({"summary", "attribution", "curve", "shown"})

    def __init__(self, *, report_route: bool = True) -> None:
        self._inner = httpx.HTTPTransport()
        self._report_route = report_route

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not self._report_route and request.url.path.endswith("/report"):
            return httpx.Response(404, json={"detail": "Not Found"})  # the framework's 404
        response = self._inner.handle_request(request)
        content = response.read()
        if not response.headers.get("content-type", "").startswith("application/json"):
            return httpx.Response(response.status_code, content=content)
        return httpx.Response(response.status_code, json=self._drop(json.loads(content)))

    def close(self) -> None:
        self._inner.close()

    def _drop(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self._drop(v) for k, v in value.items() if k not in self.DROPPED}
        if isinstance(value, list):
            return [self._drop(v) for v in value]
        return value


@pytest.fixture(params=[True, False], ids=["report-route", "no-report-route"])
def older_server(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> bool:
    """The command line talks to :class:`_OlderServer`, with or without ``GET …/report``."""
    report_route: bool = request.param

    def connect(url: str, key: str) -> OdometerClient:
        transport = _OlderServer(report_route=report_route)
        return OdometerClient(url, key, transport=transport, retry=FAST_RETRY)

    monkeypatch.setattr(run, "OdometerClient", connect)
    return report_route


def test_a_server_without_summaries(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str], older_server: bool
) -> None:
    basic = client.create_dataset(_name("older-basic"), "1", "0.000001")
    rdp = client.create_dataset(_name("older-rdp"), "1", "0.000001", accounting={"mode": "rdp"})
    for ds in (basic, rdp):
        client.register(ds, GAUSSIAN)
    code, out, err = _run(server, capsys, "datasets", "list")
    assert (code, err) == (0, "")
    reading = client.get_dataset(basic).odometer
    remaining = client.get_dataset(basic).status["remaining"]
    # no text from the server: every amount exact (the command line rounds nothing)
    left = f"ε={fmt(remaining['epsilon'])} δ={fmt(remaining['delta'])}"
    assert _row(out, basic.id)[4:] == [fmt(reading["epsilon"]), "0.0000001", left]
    assert _row(out, rdp.id)[4:] == [
        fmt(client.get_dataset(rdp).odometer["epsilon"]),
        "0.000001",
        "-",
    ]
    code, out, _ = _run(server, capsys, "datasets", "show", rdp.id)
    assert code == 0 and out.startswith("dataset ")  # no reading to lead with: the figures
    code, out, _ = _run(server, capsys, "report", rdp.id)
    if older_server:  # the server's report, without attributions
        assert code == 0 and out.startswith("dataset:")
        assert _row(out, "admin")[-3:] == ["δ=0", "-", "-"]  # no attribution to show
    code, out, _ = _run(server, capsys, "report", basic.id)
    assert code == 0
    if not older_server:  # summed up and replayed here: the dataset's figures, per actor
        charged = client.get_dataset(basic).spent
        assert out.startswith("dataset ")
        assert _row(out, "admin")[-3:] == [fmt(charged["epsilon"]), "0.0000001", "0"]
        assert "\nreplay verification: OK (2 entries, head " in out
    code, out, _ = _run(
        server, capsys, "register", basic.id, "--mechanism", json.dumps(GAUSSIAN.to_json())
    )
    assert code == 0 and len(out.splitlines()) == 1  # the decision, no reading
    heavy = json.dumps({"type": "pure_dp", "epsilon": "5"})
    code, out, err = _run(server, capsys, "register", basic.id, "--mechanism", heavy)
    assert (code, out) == (1, "") and err == "error: 409 BudgetExceeded: epsilon budget exceeded\n"
