"""Partitioned datasets from the client (sync and async) and the command line, against a real
server on SQLite and on PostgreSQL (``ODOMETER_TEST_POSTGRES_URL``)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from app.cli import main
from odometer_client import (
    AsyncOdometerClient,
    BudgetExceeded,
    Conflict,
    InvalidRequest,
    OdometerClient,
)
from odometer_client import declarations as d
from odometer_client.models import BlockRange, BlockRun
from tests.client.conftest import FAST_RETRY
from tests.client.forked_cli import ForkedCli
from tests.client.live import ADMIN_KEY, Server

DAYS = {"kind": "day", "unit": "record", "timezone": "Europe/Paris"}
EPS = d.pure_dp("0.4")
#: The runs of November after ε = 0.4 on the 20th … 26th and on the 25th … 28th.
NOVEMBER = [
    ("2026-11-01", "2026-11-19", 19, "0"),
    ("2026-11-20", "2026-11-24", 5, "0.4"),
    ("2026-11-25", "2026-11-26", 2, "0.8"),
    ("2026-11-27", "2026-11-28", 2, "0.4"),
    ("2026-11-29", "2026-11-30", 2, "0"),
]


def _runs(runs: list[BlockRun]) -> list[tuple[str, str, int, str]]:
    return [(r.first, r.last, r.blocks, r.raw["fraction_spent"]) for r in runs]


def _november(api: OdometerClient, name: str) -> str:
    """A daily dataset of ε = 1 per block, November open, charged as in :data:`NOVEMBER`."""
    ds = api.create_dataset(name, "1", "0", partition=DAYS)
    api.open_blocks(ds, "2026-11-01", "2026-11-30")
    api.register(ds, EPS, blocks={"from": "2026-11-20", "to": "2026-11-26"})
    api.register(ds, EPS, blocks={"keys": ["2026-11-25", "2026-11-26", "2026-11-27", "2026-11-28"]})
    return ds.id


def test_open_charge_refuse_and_list_blocks(api: OdometerClient) -> None:
    ds = api.create_dataset("blocks-november", "1", "0", partition=DAYS)
    assert ds.partitioned and ds.partition == DAYS and ds.mode == "basic"
    assert ds.blocks["open"] == 0 and ds.budget == {"epsilon": Decimal(1), "delta": Decimal(0)}
    opened = api.open_blocks(ds, "2026-11-01", "2026-11-30")
    assert (opened.action, opened.open, opened.last_seq) == ("opened", 30, 2)
    assert opened.range == BlockRange("2026-11-01", "2026-11-30", 30)
    with pytest.raises(Conflict) as again:  # a block's history never restarts
        api.open_blocks(ds, "2026-11-30", "2026-12-01")
    assert (again.value.status_code, again.value.error) == (409, "BlockConflict")

    first = api.register(ds, EPS, blocks={"from": "2026-11-20", "to": "2026-11-26"})
    assert first.status == "accepted" and first.charge == {"epsilon": Decimal("0.4"), "delta": 0}
    assert first.blocks == [BlockRange("2026-11-20", "2026-11-26", 7)]
    second = api.register(ds, EPS, blocks={"ranges": [{"from": "2026-11-25", "to": "2026-11-28"}]})
    assert second.blocks == [BlockRange("2026-11-25", "2026-11-28", 4)]
    with pytest.raises(BudgetExceeded) as refused:  # the 25th has 0.2 left (the 26th too)
        api.register(ds, EPS, blocks={"from": "2026-11-22", "to": "2026-11-25"})
    assert refused.value.detail.startswith(
        "1 of the selected blocks cannot afford it (2026-11-25): epsilon budget exceeded"
    )
    assert refused.value.blocks == [
        {
            "from": "2026-11-25",
            "to": "2026-11-25",
            "blocks": 1,
            "remaining": {"epsilon": Decimal("0.2"), "delta": 0},
            "reason": "epsilon budget exceeded",
        }
    ]
    assert refused.value.remaining_epsilon == Decimal("0.2")

    page = api.list_blocks(ds)
    assert _runs(page.runs) == NOVEMBER and page.next is None and page.open == 30
    overlap = page.runs[2]
    assert overlap.fraction_spent == Decimal("0.8") and overlap.raw["fraction_spent"] == "0.8"
    assert overlap.status["spent"] == {"epsilon": Decimal("0.8"), "delta": 0}
    assert overlap.range == BlockRange("2026-11-25", "2026-11-26", 2)
    clipped = api.list_blocks(ds, "2026-11-24", "2026-11-26")
    assert _runs(clipped.runs) == [
        ("2026-11-24", "2026-11-24", 1, "0.4"),
        ("2026-11-25", "2026-11-26", 2, "0.8"),
    ]
    shown = api.get_dataset(ds)
    assert shown.blocks["highest_fraction_spent"] == Decimal("0.8")
    assert shown.blocks["opened"] == [{"from": "2026-11-01", "to": "2026-11-30", "blocks": 30}]
    assert shown.odometer["epsilon"] == Decimal("0.8")  # the highest block's certified reading


def test_pages_follow_next(api: OdometerClient) -> None:
    ds = _november(api, "blocks-pages")
    first = api.list_blocks(ds, limit=2)
    assert _runs(first.runs) == NOVEMBER[:2] and first.next == "2026-11-25"
    second = api.list_blocks(ds, first.next, limit=2)
    assert _runs(second.runs) == NOVEMBER[2:4] and second.next == "2026-11-29"
    assert _runs(list(api.iter_blocks(ds, page_size=2))) == NOVEMBER
    assert _runs(list(api.iter_blocks(ds, "2026-11-26", "2026-11-27", page_size=1))) == [
        ("2026-11-26", "2026-11-26", 1, "0.8"),
        ("2026-11-27", "2026-11-27", 1, "0.4"),
    ]


def test_preview_retire_and_odp_reservations_on_blocks(api: OdometerClient) -> None:
    ds = _november(api, "blocks-preview")
    before = api.get_dataset(ds).last_seq
    preview = api.preview(ds, EPS, blocks={"from": "2026-11-22", "to": "2026-11-28"})
    assert preview.status == "rejected" and preview.reason == "epsilon budget exceeded"
    on_blocks = preview.blocks
    assert on_blocks is not None and on_blocks.unit == "record"
    assert on_blocks.selected == [BlockRange("2026-11-22", "2026-11-28", 7)]
    assert on_blocks.affordable == [
        BlockRange("2026-11-22", "2026-11-24", 3),
        BlockRange("2026-11-27", "2026-11-28", 2),
    ]
    assert on_blocks.refused == [BlockRange("2026-11-25", "2026-11-26", 2)]
    assert on_blocks.fit == {"count": 0, "at_least": False, "reason": "epsilon budget exceeded"}
    fits = api.preview(ds, d.pure_dp("0.1"), blocks="all").blocks
    assert fits is not None and fits.fit["count"] == 2 and fits.refused == []
    assert api.get_dataset(ds).last_seq == before  # nothing written

    odp = d.odp({"none": "0.1", "some": "0.3"}, delta="0")
    with api.reserve(ds, odp, blocks={"keys": ["2026-11-01", "2026-11-02"]}) as r:
        assert r.status == "reserved" and r.invocation.blocks == [
            BlockRange("2026-11-01", "2026-11-02", 2)
        ]
        r.settle("none")
    assert _runs(api.list_blocks(ds, "2026-11-01", "2026-11-03").runs) == [
        ("2026-11-01", "2026-11-02", 2, "0.1"),
        ("2026-11-03", "2026-11-03", 1, "0"),
    ]

    retired = api.retire_blocks(ds, "2026-11-01", "2026-11-05")
    assert (retired.action, retired.open, retired.range.blocks) == ("retired", 25, 5)
    with pytest.raises(Conflict) as not_open:
        api.retire_blocks(ds, "2026-11-05", "2026-11-06")
    assert not_open.value.error == "BlockConflict"
    with pytest.raises(Conflict) as gone:  # a retired block is read no more
        api.register(ds, EPS, blocks={"from": "2026-11-04", "to": "2026-11-06"})
    assert gone.value.error == "BlockConflict"
    assert api.list_blocks(ds).runs[0].first == "2026-11-06"


def test_bad_blocks_are_refused(api: OdometerClient) -> None:
    ds = _november(api, "blocks-bad")
    whole = api.create_dataset("blocks-whole", "1", "0")
    cases: list[tuple[Any, ...]] = [
        (api.register, ds, {"from": "2026-13-01", "to": "2026-13-02"}, "'2026-13-01' is not a day"),
        (api.register, ds, None, "this dataset is partitioned: name the blocks"),
        (api.register, whole, "all", "this dataset is not partitioned: send no 'blocks'"),
        (api.preview, whole, {"keys": ["2026-11-01"]}, "this dataset is not partitioned"),
    ]
    for call, target, blocks, detail in cases:
        with pytest.raises(InvalidRequest) as bad:
            call(target, EPS, blocks=blocks)
        assert (bad.value.status_code, bad.value.error) == (422, "InvalidBlocks")
        assert bad.value.detail.startswith(detail), bad.value.detail
    with pytest.raises(InvalidRequest) as not_partitioned:
        api.open_blocks(whole, "2026-11-01", "2026-11-02")
    assert not_partitioned.value.error == "InvalidBlocks"
    with pytest.raises(InvalidRequest) as bad_key:
        api.list_blocks(ds, "zzz")
    assert bad_key.value.detail.startswith("'zzz' is not a day key")
    with pytest.raises(InvalidRequest) as bad_partition:
        api.create_dataset("blocks-mars", "1", "0", partition={**DAYS, "timezone": "Mars/Olympus"})
    assert bad_partition.value.detail == "unknown time zone 'Mars/Olympus'"
    # refused before sending: shapes the contract does not admit
    for shape, problem in [
        ({"from": "2026-11-01"}, "$.blocks"),
        ("some", "$.blocks"),
        ({"keys": []}, "$.blocks"),
    ]:
        with pytest.raises(InvalidRequest) as client_side:
            api.register(ds, EPS, blocks=shape)  # type: ignore[arg-type]
        assert client_side.value.body["client_side"] is True
        assert problem in client_side.value.detail
    with pytest.raises(InvalidRequest, match="limit: must be 1 … 1000, got 0"):
        api.list_blocks(ds, limit=0)
    with pytest.raises(InvalidRequest, match=r"body\.partition\.kind: Input should be"):
        api.create_dataset("blocks-hours", "1", "0", partition={"kind": "hour", "unit": "record"})
    assert _runs(api.list_blocks(ds).runs) == NOVEMBER  # nothing was charged


def test_bucket_keys_stay_keys(api: OdometerClient) -> None:
    """Bucket keys are numbers: they go out as given and come back as text, never amounts."""
    partition = {"kind": "bucket", "unit": "person", "buckets": 100}
    ds = api.create_dataset(
        "blocks-buckets", "1", "0.000001", accounting={"mode": "zcdp"}, partition=partition
    )
    assert api.open_blocks(ds, 0, "99").range == BlockRange("0", "99", 100)
    inv = api.register(ds, d.gaussian("10", "1"), blocks={"keys": [3, "7"]}, contribution="person")
    assert inv.charge == {"rho": Decimal("0.005"), "delta": 0}
    assert inv.blocks == [BlockRange("3", "3", 1), BlockRange("7", "7", 1)]
    runs = api.list_blocks(ds, 2, 8).runs
    assert [(r.first, r.last, r.blocks) for r in runs] == [
        ("2", "2", 1),
        ("3", "3", 1),
        ("4", "6", 3),
        ("7", "7", 1),
        ("8", "8", 1),
    ]
    assert runs[1].status["spent"] == {"rho": Decimal("0.005"), "delta": 0}
    assert runs[1].fraction_spent == runs[3].fraction_spent > 0 == runs[0].fraction_spent
    assert api.get_dataset(ds).blocks["opened"] == [{"from": "0", "to": "99", "blocks": 100}]


def test_adapter_declarations_register_on_blocks(api: OdometerClient) -> None:
    """The adapters build declarations (they register nothing themselves): ``blocks=`` goes
    with what they build to register, preview and reserve."""
    dp_event = pytest.importorskip("dp_accounting.dp_event")
    dp = pytest.importorskip("opendp.prelude")
    from odometer_client.adapters.dp_accounting import from_dp_event
    from odometer_client.adapters.opendp import declaration

    dp.enable_features("contrib")
    laplace = dp.m.make_laplace(
        dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=5.0
    )
    ds = api.create_dataset("blocks-adapters", "1", "0", partition=DAYS)
    api.open_blocks(ds, "2026-11-01", "2026-11-07")
    sum_query = declaration(laplace, 1.0)  # ε = 1/5, rounded up from OpenDP's float
    inv = api.register(ds, sum_query, blocks={"from": "2026-11-02", "to": "2026-11-03"})
    assert inv.status == "accepted" and inv.blocks == [BlockRange("2026-11-02", "2026-11-03", 2)]
    noise = from_dp_event(dp_event.LaplaceDpEvent(2.5))  # ε = 1/2.5
    preview = api.preview(ds, noise, blocks={"keys": ["2026-11-03"]})
    assert preview.status == "accepted" and preview.charge["epsilon"] == Decimal("0.4")
    with api.reserve(ds, noise, blocks={"keys": ["2026-11-03"]}) as r:
        assert r.status == "accepted"  # not ODP: charged at once, nothing to settle
    spent = {(r.first, r.last): r.status["spent"]["epsilon"] for r in api.list_blocks(ds).runs}
    assert spent[("2026-11-02", "2026-11-02")] == inv.charge["epsilon"] >= Decimal("0.2")
    assert spent[("2026-11-03", "2026-11-03")] == inv.charge["epsilon"] + Decimal("0.4")
    assert spent[("2026-11-04", "2026-11-07")] == 0


def test_async_client_on_blocks(live: Server, api: OdometerClient) -> None:
    ds = api.create_dataset("blocks-async", "1", "0", partition=DAYS)

    async def scenario() -> tuple[list[BlockRun], Decimal]:
        async with AsyncOdometerClient(live.base_url, ADMIN_KEY, retry=FAST_RETRY) as c:
            await c.open_blocks(ds.id, "2026-11-01", "2026-11-30")
            await c.register(ds.id, EPS, blocks={"from": "2026-11-20", "to": "2026-11-26"})
            await c.register(ds.id, EPS, blocks={"from": "2026-11-25", "to": "2026-11-28"})
            runs = [run async for run in c.iter_blocks(ds.id, page_size=2)]
            page = await c.list_blocks(ds.id, "2026-11-25", "2026-11-25")
            return runs, page.runs[0].fraction_spent

    runs, overlap = asyncio.run(scenario())
    assert _runs(runs) == NOVEMBER and overlap == Decimal("0.8")


# ---------------------------------------------------------------------------- the command line
def _cli(live: Server, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--url", live.base_url, "--key", ADMIN_KEY])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_blocks_list_open_retire(live: Server, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(
        live,
        capsys,
        *("datasets", "create", "blocks-cli", "--epsilon", "1", "--delta", "0"),
        *("--partition", json.dumps(DAYS), "-q"),
    )
    assert code == 0
    ds = out.strip()
    code, out, _ = _cli(live, capsys, "blocks", "open", ds, "2026-11-01", "2026-11-30")
    assert (code, out) == (0, f"opened 30 blocks of {ds}: 2026-11-01..2026-11-30 (30 open)\n")
    mechanism = '{"type": "pure_dp", "epsilon": "0.4"}'
    code, out, _ = _cli(
        live, capsys, "register", ds, "--mechanism", mechanism, "--blocks", "2026-11-20..2026-11-26"
    )
    assert code == 0 and out.endswith("blocks: 2026-11-20..2026-11-26 (7 blocks)\n")
    assert out.startswith("accepted inv_") and f" on {ds}: charge ε=0.4 δ=0\n" in out
    keys = "2026-11-25,2026-11-26,2026-11-27,2026-11-28"
    code, out, _ = _cli(live, capsys, "register", ds, "--mechanism", mechanism, "--blocks", keys)
    assert code == 0 and out.endswith("blocks: 2026-11-25..2026-11-28 (4 blocks)\n")
    code, out, err = _cli(
        live, capsys, "register", ds, "--mechanism", mechanism, "--blocks", "2026-11-22..2026-11-25"
    )
    assert (code, out) == (1, "")
    assert err == (
        "error: 409 BudgetExceeded: 1 of the selected blocks cannot afford it (2026-11-25): "
        "epsilon budget exceeded; each block's budget protects one record (an event) of the "
        "block\n"
    )

    code, out, err = _cli(live, capsys, "blocks", "list", ds)
    assert (code, err) == (0, "")
    assert out == (
        "from        to          blocks  spent\n"
        "----------  ----------  ------  -----  ----------------------\n"
        "2026-11-01  2026-11-19  19      0      [....................]\n"
        "2026-11-20  2026-11-24  5       0.4    [########............]\n"
        "2026-11-25  2026-11-26  2       0.8    [################....]\n"
        "2026-11-27  2026-11-28  2       0.4    [########............]\n"
        "2026-11-29  2026-11-30  2       0      [....................]\n"
    )
    code, out, err = _cli(
        live,
        capsys,
        "blocks",
        "list",
        ds,
        "--from",
        "2026-11-21",
        "--to",
        "2026-11-30",
        "--limit",
        "2",
    )
    assert code == 0 and err == "more runs from 2026-11-27: add --from 2026-11-27\n"
    assert out.splitlines()[2:] == [
        "2026-11-21  2026-11-24  4       0.4    [########............]",
        "2026-11-25  2026-11-26  2       0.8    [################....]",
    ]
    code, out, _ = _cli(live, capsys, "blocks", "list", ds, "--from", "2026-11-25", "--json")
    page = json.loads(out)
    assert code == 0 and page["runs"][0]["fraction_spent"] == "0.8" and page["next"] is None

    code, out, _ = _cli(live, capsys, "datasets", "show", ds)
    assert code == 0
    assert "partition               day, unit record, Europe/Paris\n" in out
    assert "open blocks             30 in 5 runs\n" in out
    assert "highest fraction spent  0.8\n" in out
    assert (
        "guarantee so far        epsilon=0.8, delta=0 (the highest over every block ever "
        "opened, retired ones included)\n"
    ) in out

    code, out, _ = _cli(live, capsys, "blocks", "retire", ds, "2026-11-01", "2026-11-10")
    assert (code, out) == (0, f"retired 10 blocks of {ds}: 2026-11-01..2026-11-10 (20 open)\n")
    code, out, err = _cli(live, capsys, "blocks", "open", ds, "2026-11-01", "2026-11-01")
    assert (code, out) == (1, "")
    assert err.startswith("error: 409 BlockConflict: blocks of 2026-11-01") and err.count("\n") == 1
    code, out, _ = _cli(live, capsys, "blocks", "list", ds, "--to", "2026-11-05")
    assert (code, out) == (0, f"no open blocks in {ds} (20 open in all)\n")


def test_cli_preview_and_every_blocks_form(
    live: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    with OdometerClient(live.base_url, ADMIN_KEY, retry=FAST_RETRY) as api:
        ds = _november(api, "blocks-cli-forms")
    tenth = '{"type": "pure_dp", "epsilon": "0.1"}'
    code, out, _ = _cli(
        live, capsys, "preview", ds, "--mechanism", tenth, "--blocks", "2026-11-24..2026-11-27"
    )
    assert (code, out) == (
        0,
        "would be accepted: charge ε=0.1 δ=0\n"
        "selected: 2026-11-24..2026-11-27 (4 blocks)\n"
        "affordable: 2026-11-24..2026-11-27\n"
        "refused: none\n"
        "fit: 2 more in a row on every selected block (next refused: epsilon budget exceeded)\n",
    )
    third = '{"type": "pure_dp", "epsilon": "0.3"}'
    code, out, _ = _cli(live, capsys, "preview", ds, "--mechanism", third, "--blocks", "all")
    assert code == 0 and out.splitlines() == [
        # a refusal says what it means, not "charge ε=0 δ=0" (issue 46)
        "would be refused by the dataset's budget: epsilon budget exceeded; registering it "
        "would charge nothing and run nothing",
        "it asks ε=0.3 δ=0; left at the dataset's budget: ε=0.2 δ=0",
        "selected: 2026-11-01..2026-11-30 (30 blocks)",
        "affordable: 2026-11-01..2026-11-24, 2026-11-27..2026-11-30",
        "refused: 2026-11-25..2026-11-26",
        "fit: 0 more in a row on every selected block (next refused: epsilon budget exceeded)",
    ]
    forms = [
        ("2026-11-01..2026-11-02,2026-11-05", "2026-11-01..2026-11-02, 2026-11-05 (3 blocks)"),
        ("2026-11-10", "2026-11-10 (1 block)"),
        ('{"keys": ["2026-11-11", "2026-11-12"]}', "2026-11-11..2026-11-12 (2 blocks)"),
    ]
    for spec, shown in forms:
        code, out, err = _cli(live, capsys, "register", ds, "--mechanism", tenth, "--blocks", spec)
        assert (code, err) == (0, ""), err
        assert out.splitlines()[1] == f"blocks: {shown}"
    code, out, _ = _cli(
        live, capsys, "register", ds, "--mechanism", tenth, "--blocks", "all", "--json"
    )
    assert code == 0 and json.loads(out)["blocks"] == [
        {"from": "2026-11-01", "to": "2026-11-30", "blocks": 30}
    ]
    code, out, _ = _cli(live, capsys, "blocks", "list", ds, "--to", "2026-11-05")
    assert out.splitlines()[2:] == [
        "2026-11-01  2026-11-02  2       0.2    [####................]",
        "2026-11-03  2026-11-04  2       0.1    [##..................]",
        "2026-11-05  2026-11-05  1       0.2    [####................]",
    ]


BAD = [
    (
        ["--blocks", "2026-11-01..", "--mechanism", "{}"],
        "error: --blocks: cannot read '2026-11-01..'",
    ),
    (
        ["--blocks", "a,,b", "--mechanism", "{}"],
        "error: --blocks: cannot read 'a,,b': give FROM..TO",
    ),
    (["--blocks", "a..b..c", "--mechanism", "{}"], "error: --blocks: cannot read 'a..b..c'"),
    (["--blocks", "{nope", "--mechanism", "{}"], "error: --blocks is not JSON:"),
    (["--blocks", "[1, 2]", "--mechanism", "{}"], "error: --blocks must be a JSON object"),
    (
        [
            "--blocks",
            "2026-13-01..2026-13-02",
            "--mechanism",
            '{"type": "pure_dp", "epsilon": "1"}',
        ],
        "error: 422 InvalidBlocks: '2026-13-01' is not a day key",
    ),
    (
        ["--mechanism", '{"type": "pure_dp", "epsilon": "1"}'],
        "error: 422 InvalidBlocks: this dataset is partitioned: name the blocks",
    ),
]


@pytest.fixture(scope="module")
def forked() -> Iterator[ForkedCli]:
    """The ``odometer`` command line imported once and forked per run (each of the 28 runs
    below in a fresh interpreter cost about 0.3 s of CPU)."""
    runner = ForkedCli(os.environ)
    yield runner
    runner.close()


@pytest.mark.parametrize("command", ["register", "preview"])
@pytest.mark.parametrize("argv,first", BAD, ids=[str(i) for i in range(len(BAD))])
def test_cli_bad_blocks_is_one_line(
    live: Server,
    api: OdometerClient,
    forked: ForkedCli,
    command: str,
    argv: list[str],
    first: str,
) -> None:
    ds = api.create_dataset("blocks-cli-bad", "1", "0", partition=DAYS)
    api.open_blocks(ds, "2026-11-01", "2026-11-02")
    proc = forked.run([command, ds.id, *argv, "--url", live.base_url, "--key", ADMIN_KEY])
    # the command line's own mistake is a usage error (2, as for the JSON options); the
    # server's refusal is a failure (1)
    status = 1 if first.startswith("error: 422 ") else 2
    assert (proc.returncode, proc.stdout) == (status, "")
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(first), proc.stderr
    assert api.get_dataset(ds).last_seq == 2  # nothing was charged or rejected
