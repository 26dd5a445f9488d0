"""``odometer datasets``, ``budget`` and ``blocks``: datasets, their budgets and their blocks.

Wherever a dataset's budget is shown, its reading leads: ``status.summary`` (the certified
guarantee so far, what is left in the mode's unit, how many more of the last declaration fit).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from odometer_client._cli.options import accounting, accounting_options
from odometer_client._cli.output import Output, percent, text, text_of
from odometer_client._cli.run import Runner, command
from odometer_client._sync.client import OdometerClient
from odometer_client.models import BlockRange, BlockRun, Dataset


# ---------------------------------------------------------------------------- a dataset's lines
def _partition_text(partition: Mapping[str, Any]) -> str:
    """``day, unit record, Europe/Paris`` (``bucket``: how many; ``named``: the names)."""
    parts = [str(partition.get("kind")), f"unit {partition.get('unit')}"]
    if partition.get("timezone"):
        parts.append(str(partition["timezone"]))
    if partition.get("buckets") is not None:
        parts.append(f"{partition['buckets']} buckets")
    if partition.get("names"):
        parts.append("names " + ", ".join(str(n) for n in partition["names"]))
    if partition.get("immutable_key"):
        parts.append("immutable key")
    return ", ".join(parts)


def _status(ds: Dataset) -> Mapping[str, Any]:
    """The dataset's status as the server sent it (its ``shown`` texts as text)."""
    status = ds.raw.get("status")
    return status if isinstance(status, Mapping) else {}


def _reading(ds: Dataset) -> Mapping[str, str] | None:
    """The certified reading as the server's text (``status.shown.reading``: rounded up)."""
    return text_of(_status(ds), "reading")


def _partitioned_rows(ds: Dataset, out: Output) -> list[tuple[str, str]]:
    """A partitioned dataset: the budget is every block's, the reading the highest over every
    block ever opened, retired ones included (``odometer blocks list`` shows each run of open
    blocks); a ``person`` unit's condition on declarations (``status.blocks.requires``)."""
    assert ds.partition is not None
    blocks = ds.blocks
    opened = ranges_text([BlockRange.from_json(r) for r in blocks.get("opened", ())])
    rows = [
        ("dataset", f"{ds.id}  {ds.name!r}"),
        ("mode / relation", f"{ds.mode} / {ds.relation}"),
        ("partition", _partition_text(ds.partition)),
        ("budget (each block)", out.amounts(ds.budget, shown=text_of(_status(ds), "budget"))),
        ("protects", text(blocks.get("protects"))),
        *([("requires", text(blocks["requires"]))] if blocks.get("requires") else []),
        ("open blocks", f"{text(blocks.get('open'))} in {text(blocks.get('runs'))} runs"),
        ("opened", opened),
        ("highest fraction spent", out.figure(blocks.get("highest_fraction_spent"))),
        *_fractions(ds, "most spent open block: "),
    ]
    if ds.odometer:
        every = "(the highest over every block ever opened, retired ones included)"
        rows.append(("guarantee so far", f"{out.amounts(ds.odometer, shown=_reading(ds))} {every}"))
    return rows


def _fractions(ds: Dataset, whose: str = "") -> list[tuple[str, str]]:
    """The summary's one fraction of the budget spent and what is left of it (they add up to
    1: docs/accounting.md, *One fraction per budget*); none from an older server."""
    summary = ds.summary or {}
    spent, left = summary.get("fraction_spent"), summary.get("fraction_left")
    if spent is None or left is None:
        return []
    return [("fraction spent", f"{whose}{percent(spent)}, left {percent(left)}")]


def _remaining(obj: Mapping[str, Any] | None, sent: Any, out: Output) -> str:
    """What remains, as the server's text (``sent``: the status, or a sub-budget, carrying
    its ``shown``)."""
    return out.amounts(obj, shown=text_of(sent, "remaining"), curve="curve (see --json)")


def _whole_rows(ds: Dataset, out: Output) -> list[tuple[str, str]]:
    st, sent = ds.status, _status(ds)
    estimate = ds.spent.get("estimate") is True  # the mode's conversion, not certified
    # a split dataset's spent (ε, δ) is summed by the client: no server text, exact
    spent = out.amounts(ds.spent, shown=text_of(sent, "spent_eps_delta"))
    rows = [
        ("dataset", f"{ds.id}  {ds.name!r}"),
        ("mode / relation", f"{ds.mode} / {ds.relation}"),
        ("budget", out.amounts(st.get("budget"), shown=text_of(sent, "budget"))),
        ("spent (ε, δ)", spent + (" (estimate)" if estimate else "")),
    ]
    if ds.odometer:
        # the guarantee of what was released, valid at any stopping time (certified)
        reading = out.amounts(ds.odometer, shown=_reading(ds))
        rows.append(("guarantee so far", f"{reading} ({ds.odometer['source']})"))
    rows.extend(_fractions(ds))
    if "reserved" in st:
        reserved = st["reserved"]
        held = (text_of(sent, "reserved") or {}).get("epsilon")
        reserved_text = (
            f"{out.figure(reserved.get('epsilon'), shown=held)} ({reserved.get('open', 0)} open)"
        )
        rows.append(("reserved ε", reserved_text))
    if st.get("remaining"):
        rows.append(("remaining", _remaining(st["remaining"], sent, out)))
    subs = (sent.get("shown") or {}).get("sub_budgets") or {}
    for name, sub in st.get("sub_budgets", {}).items():
        # each sub-budget's texts: its shown, as a status's (sub_budgets[name] in shown)
        texts = {"shown": subs.get(name) or {}}
        budget = out.amounts(sub.get("budget"), shown=text_of(texts, "budget"))
        spent_sub = out.amounts(sub.get("spent_eps_delta"), shown=text_of(texts, "spent_eps_delta"))
        rows.append(
            (
                f"  sub-budget {name}",
                f"{sub.get('mode')}: budget {budget}; spent {spent_sub}; "
                f"remaining {_remaining(sub.get('remaining'), texts, out)}",
            )
        )
    return rows


def _frozen(ds: Dataset) -> Mapping[str, Any] | None:
    """``status.frozen``: why the dataset is frozen behind its witness, or ``None``."""
    frozen = ds.status.get("frozen")
    return frozen if isinstance(frozen, Mapping) else None


def frozen_line(frozen: Mapping[str, Any]) -> str:
    """The line a frozen dataset's status starts with: frozen, why, what its reading is worth
    and what the operator can do."""
    return (
        f"FROZEN behind its witness ({frozen.get('reason')}: witness seq "
        f"{frozen.get('witnessed_seq')}, database seq {frozen.get('database_seq')}): "
        f"{frozen.get('reading')}; writes are refused. {frozen.get('detail')}"
    )


def dataset_lines(ds: Dataset, out: Output) -> None:
    """A dataset's status: frozen first if it is, its reading (``summary.text``), then the
    exact figures."""
    frozen = _frozen(ds)
    if frozen is not None:
        out.line(frozen_line(frozen))
    summary = ds.summary
    if summary and summary.get("text"):
        out.line(str(summary["text"]))
    exact = Output(out.stream, exact=True)
    rows = _partitioned_rows(ds, exact) if ds.partitioned else _whole_rows(ds, exact)
    rows.append(("ledger head", f"seq {ds.last_seq}  {ds.head_hash}"))
    if frozen is not None:
        rows.append(("frozen", f"{frozen.get('reason')} (reads served, writes refused)"))
    exact.pairs(rows)


def _certified(ds: Dataset, out: Output) -> tuple[str, str]:
    """The certified (ε, δ) so far: the summary's (rounded up), exact with ``--exact``."""
    summary = ds.summary
    reading = summary.get("guarantee") if summary and not out.exact else ds.odometer
    if not isinstance(reading, Mapping) or "epsilon" not in reading:
        return "-", "-"
    return out.figure(reading["epsilon"]), out.figure(reading.get("delta"))


def _left(ds: Dataset, out: Output) -> str:
    """What is left in the mode's unit (the summary's; an older server: scalar remainders)."""
    summary = ds.summary
    if summary is not None and isinstance(summary.get("left"), list):
        shown = out.left(summary["left"])
    else:
        remaining = text_of(_status(ds), "remaining")
        shown = out.amounts(ds.status.get("remaining"), shown=remaining, symbols=True, curve="-")
    return f"{shown} (most spent block)" if ds.partitioned and shown != "-" else shown


# ---------------------------------------------------------------------------- datasets
def _datasets_create(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    ds = client.create_dataset(
        args.name,
        args.epsilon,
        args.delta,
        args.relation,
        accounting(args),
        partition=args.partition,
    )
    if not args.json:  # under --json they are in the document
        out.warnings(ds.raw)
    if args.json:
        out.json(ds.raw)
    elif args.quiet:
        out.line(ds.id)
    else:
        out.line(f"created {ds.id}")
        dataset_lines(ds, out)
    return 0


def _datasets_list(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    datasets = client.list_datasets()
    if args.json:
        out.json([d.raw for d in datasets])
        return 0
    if not datasets:
        out.line("no datasets")
        return 0
    rows: list[Sequence[str]] = [("id", "name", "mode", "budget", "certified ε", "δ", "remaining")]
    frozen: list[str] = []
    for d in datasets:
        budget = out.amounts(d.budget, shown=text_of(_status(d), "budget"), symbols=True)
        budget += " each block" if d.partitioned else ""
        left = _left(d, out)
        why = _frozen(d)
        if why is not None:
            left = f"FROZEN ({why.get('reason')}); {left}"
            frozen.append(d.id)
        rows.append((d.id, d.name, d.mode, budget, *_certified(d, out), left))
    out.table(rows)
    if frozen:
        out.line(
            f"FROZEN behind the witness: {', '.join(frozen)}: their readings may be rolled "
            "back and writes are refused (`odometer datasets show ID` says why)"
        )
    return 0


def _datasets_show(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    ds = client.get_dataset(args.dataset)
    if args.json:
        out.json(ds.raw)
    else:
        dataset_lines(ds, out)
    return 0


def _budget_set(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    ds = client.change_budget(
        args.dataset,
        args.epsilon,
        args.delta,
        sub_budget=args.sub_budget,
        final_conversion_delta=args.final_conversion_delta,
    )
    if args.json:
        out.json(ds.raw)
    else:
        out.line(f"budget of {ds.id} changed")
        if ds.raw.get("effect"):  # what the change did to the capacity (servers since 1.4.0)
            out.line(str(ds.raw["effect"]))
        dataset_lines(ds, out)
    return 0


# ---------------------------------------------------------------------------- blocks
#: Width of the bar ``odometer blocks list`` draws for a run's fraction spent.
BAR_WIDTH = 20


def bar(fraction: Decimal, width: int = BAR_WIDTH) -> str:
    """``[########............]``: the fraction of a block's budget spent (a spend above zero
    shows at least one mark, a full budget every mark)."""
    share = min(max(fraction, Decimal(0)), Decimal(1))
    filled = int(share * width)
    if share > 0 and filled == 0:
        filled = 1
    return "[" + "#" * filled + "." * (width - filled) + "]"


def ranges_text(ranges: Sequence[BlockRange]) -> str:
    return ", ".join(str(r) for r in ranges) or "none"


def block_count(n: int) -> str:
    return "1 block" if n == 1 else f"{n} blocks"


def _run_row(run: BlockRun, out: Output) -> tuple[str, str, str, str, str]:
    spent = out.figure(run.fraction_spent)
    return run.first, run.last, str(run.blocks), spent, bar(run.fraction_spent)


def _blocks_list(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    page = client.list_blocks(args.dataset, args.first, args.last, args.limit)
    if args.json:
        out.json(page.raw)
        return 0
    if not page.runs:
        out.line(f"no open blocks in {args.dataset} ({page.open} open in all)")
        return 0
    rows: list[Sequence[str]] = [("from", "to", "blocks", "spent", "")]
    rows.extend(_run_row(run, out) for run in page.runs)
    out.table(rows)
    if page.next is not None:
        sys.stderr.write(f"more runs from {page.next}: add --from {page.next}\n")
    return 0


def _blocks_change(action: str) -> Runner:
    def run(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
        change = client.open_blocks if action == "open" else client.retire_blocks
        done = change(args.dataset, args.first, args.last)
        if args.json:
            out.json(done.raw)
        else:
            out.line(
                f"{done.action} {block_count(done.range.blocks)} of {done.dataset_id}: "
                f"{done.range} ({done.open} open)"
            )
        return 0

    return run


# ---------------------------------------------------------------------------- wiring
def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """``datasets``, ``blocks`` and ``budget``."""
    datasets = sub.add_parser("datasets", help="create, list and show datasets (server)")
    dsub = datasets.add_subparsers(dest="datasets_command", required=True)
    create = dsub.add_parser("create", parents=[common], help="create a dataset")
    create.add_argument("name")
    create.add_argument("--epsilon", required=True)
    create.add_argument("--delta", required=True)
    create.add_argument("--relation", default="add_remove", choices=["add_remove", "replace_one"])
    accounting_options(create, '{"mode": "split", …}')
    create.add_argument(
        "--partition",
        help="a partitioned dataset (budget and mode are every block's), e.g. "
        '\'{"kind": "day", "unit": "record", "timezone": "Europe/Paris"}\'',
    )
    create.add_argument("-q", "--quiet", action="store_true", help="print only the new id")
    create.set_defaults(run=command(_datasets_create))
    lst = dsub.add_parser("list", parents=[common], help="datasets with their budget status")
    lst.set_defaults(run=command(_datasets_list))
    show = dsub.add_parser("show", parents=[common], help="one dataset's budget status")
    show.add_argument("dataset")
    show.set_defaults(run=command(_datasets_show))

    blocks = sub.add_parser("blocks", help="a partitioned dataset's blocks (server)")
    blsub = blocks.add_subparsers(dest="blocks_command", required=True)
    blist = blsub.add_parser(
        "list", parents=[common], help="open blocks as runs, with the fraction of budget spent"
    )
    blist.add_argument("dataset")
    blist.add_argument("--from", dest="first", metavar="KEY", help="first block key")
    blist.add_argument("--to", dest="last", metavar="KEY", help="last block key")
    blist.add_argument("--limit", type=int, default=100, help="runs on the page (≤ 1000)")
    blist.set_defaults(run=command(_blocks_list))
    for action, what in (("open", "open blocks (never opened before)"), ("retire", "retire")):
        bchange = blsub.add_parser(
            action, parents=[common], help=f"{what} FROM … TO (keys, both included)"
        )
        bchange.add_argument("dataset")
        bchange.add_argument("first", metavar="FROM")
        bchange.add_argument("last", metavar="TO")
        bchange.set_defaults(run=command(_blocks_change(action)))

    budget = sub.add_parser("budget", help="change a dataset's budget (server)")
    bsub = budget.add_subparsers(dest="budget_command", required=True)
    bset = bsub.add_parser("set", parents=[common], help="new target (ε, δ)")
    bset.add_argument("dataset")
    bset.add_argument("--epsilon", required=True)
    bset.add_argument("--delta", required=True)
    bset.add_argument("--sub-budget", help="sub-budget of a split dataset")
    bset.add_argument("--final-conversion-delta")
    bset.set_defaults(run=command(_budget_set))
