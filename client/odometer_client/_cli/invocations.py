"""``odometer register`` and ``odometer preview``: declare an invocation, or ask what it would
get. On a whole dataset the decision is followed by the dataset's reading as it now is
(``status.summary``); a refusal is one ``error:`` line, the refusal's own summary, and a
preview's refusal says who would refuse it, why, and what is left there (never a charge of
zero, which read as "free")."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from odometer_client._cli import receipts
from odometer_client._cli.datasets import block_count, ranges_text
from odometer_client._cli.options import BLOCKS_FORMS
from odometer_client._cli.output import Output, text_of
from odometer_client._cli.run import command
from odometer_client._sync.client import OdometerClient
from odometer_client.errors import ApiError
from odometer_client.models import Invocation


def _declared(args: argparse.Namespace) -> dict[str, Any]:
    """What ``register`` and ``preview`` send: the mechanism and the request's options."""
    return {
        "sub_budget": args.sub_budget,
        "conversion_delta": args.conversion_delta,
        "blocks": args.blocks,
        "contribution": args.contribution,
        "neighbours": args.neighbours,
    }


def _reading_now(client: OdometerClient, dataset: str, out: Output) -> None:
    """``now: <summary.text>``: a whole dataset's reading after the decision. Nothing for a
    partitioned dataset (the blocks' lines say what they have left), from a server without
    summaries, or when the key cannot read the dataset."""
    try:
        ds = client.get_dataset(dataset)
    except ApiError:
        return
    summary: Mapping[str, Any] | None = None if ds.partitioned else ds.summary
    if summary and summary.get("text"):
        out.line(f"now: {summary['text']}")


def _charge_text(client: OdometerClient, inv: Invocation, out: Output) -> Mapping[str, str] | None:
    """The server's text of a registration's charge: a registration's answer carries none (it
    is rendered on the write path, where every microsecond counts), the invocation's does
    (``GET …/invocations/{id}``: the same charge); none (exact) with ``--exact``, from an older
    server, or when the key cannot read it."""
    found = text_of(inv.raw, "charge")
    if found is not None or out.exact:
        return found
    try:
        return text_of(client.get_invocation(inv.dataset_id, inv.id).raw, "charge")
    except ApiError:
        return None


def _register(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    with receipts.warnings_said():  # the client keeps the answer's receipt
        inv = client.register(args.dataset, args.mechanism, **_declared(args))
    if args.json:
        out.json(inv.raw)
        return 0
    charge = out.amounts(inv.charge, shown=_charge_text(client, inv, out), symbols=True)
    out.line(f"{inv.status} {inv.id} on {inv.dataset_id}: charge {charge}")
    if inv.blocks is not None:
        count = sum(r.blocks for r in inv.blocks)
        out.line(f"blocks: {ranges_text(inv.blocks)} ({block_count(count)})")
    if inv.status == "reserved":
        out.line(f"reserved cells: {', '.join(inv.cells)} (settle with the released cell)")
    _reading_now(client, inv.dataset_id, out)
    return 0


#: Who refuses, by a refusal's ``level``.
REFUSED_BY = {
    "dataset": "the dataset's budget",
    "sub_budget": "the sub-budget",
    "quota": "your quota on the dataset",
    "organisation": "the organisation's cap",
}


def _refused(preview: Mapping[str, Any], out: Output) -> None:
    """A preview's refusal: refused by whom and why, that nothing would be charged or run, what
    it asks and what is left where it is refused (what a declaration must fit in)."""
    level = preview.get("level")
    by = f" by {REFUSED_BY.get(str(level), f'the {level}')}" if level else ""
    why = f": {preview['reason']}" if preview.get("reason") else ""
    out.line(f"would be refused{by}{why}; registering it would charge nothing and run nothing")
    requested = out.amounts(
        preview.get("requested"), shown=text_of(preview, "requested"), symbols=True
    )
    remaining = preview.get("remaining")
    if remaining:
        where = f" at {REFUSED_BY.get(str(level), str(level))}" if level else ""
        left = out.amounts(remaining, shown=text_of(preview, "remaining"), symbols=True)
        out.line(f"it asks {requested}; left{where}: {left}")
    else:
        out.line(f"it asks {requested}")


def _preview(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    found = client.preview(args.dataset, args.mechanism, **_declared(args))
    if args.json:
        out.json(found.raw)
        return 0
    if found.admitted:
        reason = f" ({found.reason})" if found.reason else ""
        charge = out.amounts(found.charge, shown=text_of(found.raw, "charge"), symbols=True)
        out.line(f"would be {found.status}{reason}: charge {charge}")
    else:
        _refused(found.raw, out)
    on_blocks = found.blocks
    if on_blocks is not None:
        count = sum(r.blocks for r in on_blocks.selected)
        out.line(f"selected: {ranges_text(on_blocks.selected)} ({block_count(count)})")
        out.line(f"affordable: {ranges_text(on_blocks.affordable)}")
        out.line(f"refused: {ranges_text(on_blocks.refused)}")
    fit = found.fit or (on_blocks.fit if on_blocks is not None else None)
    if fit:
        more = f"at least {fit.get('count')}" if fit.get("at_least") else str(fit.get("count"))
        where = " on every selected block" if on_blocks is not None else ""
        if on_blocks is None and fit.get("level") and not fit.get("at_least"):
            # past the limit (10⁶) every level admits at least as many: none is the fewest
            where = f" (the {fit['level']} admits the fewest)"
        after = f" (next refused: {fit['reason']})" if fit.get("reason") else ""
        out.line(f"fit: {more} more in a row{where}{after}")
    _reading_now(client, args.dataset, out)
    return 0


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """``register`` and ``preview``."""
    for name, runner, what in (
        ("register", _register, "declare an invocation before it runs (server)"),
        ("preview", _preview, "the decision a registration would get now (server)"),
    ):
        inv = sub.add_parser(name, parents=[common], help=what)
        inv.add_argument("dataset")
        inv.add_argument(
            "--mechanism",
            required=True,
            help='the declaration as JSON, e.g. \'{"type": "pure_dp", "epsilon": "0.4"}\'',
        )
        inv.add_argument("--blocks", help=f"partitioned datasets: the blocks read, {BLOCKS_FORMS}")
        inv.add_argument("--sub-budget", help="sub-budget of a split dataset")
        inv.add_argument("--conversion-delta", help="δ converting a curve-based declaration")
        inv.add_argument(
            "--contribution",
            choices=("record", "person"),
            help="what the declared guarantee is stated for: 'person' asserts it holds for any "
            "or all of one person's records in each selected block (required on datasets whose "
            "partition's unit is person)",
        )
        inv.add_argument(
            "--neighbours",
            choices=("zero_out",),
            help="tree_aggregation's assumption: each record keeps its leaf when another is "
            "added or removed (required for a tree aggregation on an add_remove dataset)",
        )
        inv.set_defaults(run=command(runner))
