"""``odometer`` subcommands for curators and auditors, talking to a running server.

    odometer datasets create NAME --epsilon E --delta D [--mode M | --accounting JSON]
                             [--partition JSON]
    odometer datasets list | odometer datasets show DATASET
    odometer blocks list DATASET [--from KEY] [--to KEY] [--limit N]
    odometer blocks open DATASET FROM TO | odometer blocks retire DATASET FROM TO
    odometer register DATASET --mechanism JSON [--blocks SPEC] [--sub-budget NAME]
    odometer preview DATASET --mechanism JSON [--blocks SPEC] [--sub-budget NAME]
    odometer budget set DATASET --epsilon E --delta D [--sub-budget NAME]
    odometer grant DATASET PRINCIPAL [--quota-epsilon E --quota-delta D]
    odometer grants list DATASET | odometer grants revoke DATASET PRINCIPAL
    odometer orgs list | create NAME | report ORG
    odometer orgs cap ORG (--epsilon E --delta D [--mode M | --accounting JSON] | --remove)
    odometer orgs capacity ORG --mechanism JSON [--dataset DATASET]
    odometer principals list | create NAME --role ROLE [--organisation ORG]
    odometer keys issue PRINCIPAL [--expires-at T] | odometer keys revoke KEY_ID
    odometer export DATASET -o FILE [--format jsonl|csv|json]
    odometer report DATASET

Every command takes ``--url`` (``$ODOMETER_URL``), ``--key`` (``$ODOMETER_API_KEY``) and
``--json`` (machine-readable output), before or after the subcommand (the subcommand's wins).
``DATASET`` is an id or an exact name. ``odometer verify FILE`` (offline) reads every export.
Every error is one line on stderr beginning ``error: `` that says what to do, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from decimal import Decimal
from typing import Any, NoReturn, TextIO, cast

import httpx

from odometer_client._core import DEFAULT_URL, BlocksLike, resolve
from odometer_client._sync.client import OdometerClient
from odometer_client.errors import ApiError, OdometerError, TransportError
from odometer_client.exports import EXPORT_FORMATS, fmt
from odometer_client.ledger import summarize
from odometer_client.models import BlockRange, BlockRun, Dataset

Runner = Callable[[argparse.Namespace, OdometerClient, TextIO], int]


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return fmt(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _dump(value: Any, out: TextIO) -> None:
    out.write(json.dumps(value, indent=2, ensure_ascii=False, default=_default) + "\n")


def _table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")
        if n == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, Decimal):
        return fmt(value)  # plain notation, as the server writes amounts
    return str(value)


def _eps_delta(obj: Mapping[str, Any] | None) -> str:
    if not obj:
        return "-"
    parts = [f"{k}={_text(obj[k])}" for k in ("epsilon", "delta") if k in obj]
    return ", ".join(parts) if parts else "-"


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


def _partitioned_lines(ds: Dataset, out: TextIO) -> None:
    """A partitioned dataset: the budget is every block's, the reading the highest over its
    open blocks (``odometer blocks list`` shows each run of blocks)."""
    assert ds.partition is not None
    blocks = ds.blocks
    opened = ", ".join(str(BlockRange.from_json(r)) for r in blocks.get("opened", ())) or "none"
    rows = [
        ("dataset", f"{ds.id}  {ds.name!r}"),
        ("mode / relation", f"{ds.mode} / {ds.relation}"),
        ("partition", _partition_text(ds.partition)),
        ("budget (each block)", _eps_delta(ds.budget)),
        ("protects", _text(blocks.get("protects"))),
        ("open blocks", f"{_text(blocks.get('open'))} in {_text(blocks.get('runs'))} runs"),
        ("opened", opened),
        ("highest fraction spent", _text(blocks.get("highest_fraction_spent"))),
    ]
    if ds.odometer:
        rows.append(("guarantee so far", f"{_eps_delta(ds.odometer)} (the highest block)"))
    rows.append(("ledger head", f"seq {ds.last_seq}  {ds.head_hash}"))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        out.write(f"{k.ljust(width)}  {v}\n")


def _dataset_lines(ds: Dataset, out: TextIO) -> None:
    if ds.partitioned:
        _partitioned_lines(ds, out)
        return
    st = ds.status
    rows = [
        ("dataset", f"{ds.id}  {ds.name!r}"),
        ("mode / relation", f"{ds.mode} / {ds.relation}"),
        ("budget", _eps_delta(st.get("budget"))),
        ("spent (ε, δ)", _eps_delta(ds.spent)),
    ]
    if ds.odometer:
        # the guarantee of what was released, valid at any stopping time (certified)
        rows.append(("guarantee so far", f"{_eps_delta(ds.odometer)} ({ds.odometer['source']})"))
    if "reserved" in st:
        rows.append(
            (
                "reserved ε",
                f"{_text(st['reserved'].get('epsilon'))} ({st['reserved'].get('open', 0)} open)",
            )
        )
    if "epsilon" in st.get("remaining", {}):
        rows.append(("remaining", _eps_delta(st["remaining"])))
    for name, sub in st.get("sub_budgets", {}).items():
        rem = sub.get("remaining", {})
        remaining = _eps_delta(rem) if "epsilon" in rem else "curve (see --json)"
        rows.append(
            (
                f"  sub-budget {name}",
                f"{sub.get('mode')}: budget {_eps_delta(sub.get('budget'))}; "
                f"spent {_eps_delta(sub.get('spent_eps_delta'))}; remaining {remaining}",
            )
        )
    rows.append(("ledger head", f"seq {ds.last_seq}  {ds.head_hash}"))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        out.write(f"{k.ljust(width)}  {v}\n")


# ---------------------------------------------------------------------------- commands
class UsageError(OdometerError):
    """The command line itself is wrong (exit status 2, as argparse's usage errors)."""


def _not_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _json_object(text: str, option: str, example: str) -> dict[str, Any]:
    """A JSON object given on the command line; anything else is a :class:`UsageError` naming
    the option, what is wrong and an example."""
    hint = f"give a JSON object in single quotes, e.g. '{example}'"
    try:
        parsed = json.loads(text, parse_constant=_not_json_constant)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}" if exc.lineno > 1 else f"column {exc.colno}"
        raise UsageError(f"{option} is not JSON: {exc.msg} at {where}: {hint}") from None
    except RecursionError:
        raise UsageError(f"{option} is not JSON: nested too deeply: {hint}") from None
    except ValueError as exc:  # NaN, Infinity; an integer of more than 4300 digits
        raise UsageError(f"{option} is not JSON: {exc}: {hint}") from None
    if not isinstance(parsed, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
        got = kind.get(type(parsed), "a number")
        raise UsageError(f"{option} must be a JSON object, not {got}: {hint}")
    return parsed


#: The options taking a JSON object: what their error suggests.
_JSON_OPTIONS = {
    "accounting": '{"mode": "zcdp"}',
    "partition": '{"kind": "day", "unit": "record"}',
    "mechanism": '{"type": "pure_dp", "epsilon": "0.4"}',
}


def _read_options(args: argparse.Namespace) -> None:
    """The JSON options (and ``--blocks``) read in place, before anything is sent: a bad one
    is one error line, exit status 2."""
    for name, example in _JSON_OPTIONS.items():
        text = getattr(args, name, None)
        if isinstance(text, str):
            setattr(args, name, _json_object(text, f"--{name}", example))
    blocks = getattr(args, "blocks", None)
    if isinstance(blocks, str):
        args.blocks = _blocks_option(blocks)


def _accounting(args: argparse.Namespace) -> dict[str, Any] | None:
    """The accounting of :func:`_accounting_options`: ``--accounting`` (in full) or
    ``--mode``, with ``--final-conversion-delta`` if given; ``None``: the server's default."""
    accounting: dict[str, Any] | None = None
    if args.accounting is not None:
        accounting = dict(args.accounting)
    elif args.mode:
        accounting = {"mode": args.mode}
    if args.final_conversion_delta is not None:
        if accounting is None:
            raise OdometerError("--final-conversion-delta needs --mode zcdp or rdp")
        accounting["final_conversion_delta"] = args.final_conversion_delta
    return accounting


def _datasets_create(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    ds = client.create_dataset(
        args.name,
        args.epsilon,
        args.delta,
        args.relation,
        _accounting(args),
        partition=args.partition,
    )
    if args.json:
        _dump(ds.raw, out)
    elif args.quiet:
        out.write(f"{ds.id}\n")
    else:
        out.write(f"created {ds.id}\n")
        _dataset_lines(ds, out)
    return 0


def _datasets_list(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    datasets = client.list_datasets()
    if args.json:
        _dump([d.raw for d in datasets], out)
        return 0
    rows: list[Sequence[str]] = [("id", "name", "mode", "budget", "spent (ε, δ)", "remaining")]
    for d in datasets:
        rem = d.status.get("remaining", {})
        if d.partitioned:  # every block has the budget: the most spent of them, as a fraction
            spent = f"per block (max {_text(d.blocks.get('highest_fraction_spent'))})"
            rows.append((d.id, d.name, d.mode, f"{_eps_delta(d.budget)} each", spent, "-"))
            continue
        rows.append(
            (
                d.id,
                d.name,
                d.mode,
                _eps_delta(d.budget),
                _eps_delta(d.spent),
                _eps_delta(rem) if "epsilon" in rem else "-",
            )
        )
    if len(rows) == 1:
        out.write("no datasets\n")
    else:
        _table(rows, out)
    return 0


def _datasets_show(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    ds = client.get_dataset(args.dataset)
    if args.json:
        _dump(ds.raw, out)
    else:
        _dataset_lines(ds, out)
    return 0


#: Width of the bar ``odometer blocks list`` draws for a run's fraction spent.
BAR_WIDTH = 20


def _bar(fraction: Decimal, width: int = BAR_WIDTH) -> str:
    """``[########............]``: the fraction of a block's budget spent (a spend above zero
    shows at least one mark, a full budget every mark)."""
    share = min(max(fraction, Decimal(0)), Decimal(1))
    filled = int(share * width)
    if share > 0 and filled == 0:
        filled = 1
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _run_row(run: BlockRun) -> tuple[str, str, str, str, str]:
    return run.first, run.last, str(run.blocks), fmt(run.fraction_spent), _bar(run.fraction_spent)


def _blocks_list(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    page = client.list_blocks(args.dataset, args.first, args.last, args.limit)
    if args.json:
        _dump(page.raw, out)
        return 0
    if not page.runs:
        out.write(f"no open blocks in {args.dataset} ({page.open} open in all)\n")
        return 0
    rows: list[Sequence[str]] = [("from", "to", "blocks", "spent", "")]
    rows.extend(_run_row(run) for run in page.runs)
    _table(rows, out)
    if page.next is not None:
        sys.stderr.write(f"more runs from {page.next}: add --from {page.next}\n")
    return 0


def _blocks_change(action: str) -> Runner:
    def run(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
        change = client.open_blocks if action == "open" else client.retire_blocks
        done = change(args.dataset, args.first, args.last)
        if args.json:
            _dump(done.raw, out)
        else:
            out.write(
                f"{done.action} {_count(done.range.blocks)} of {done.dataset_id}: {done.range} "
                f"({done.open} open)\n"
            )
        return 0

    return run


_BLOCKS_FORMS = "FROM..TO, KEY[,KEY…] (ranges too: A..B,C), all, or a JSON object"


def _blocks_option(text: str) -> BlocksLike:
    """``--blocks``: ``FROM..TO``; keys ``A,B,C``; ranges and keys
    ``A..B,C..D,E``; ``all``; or the selection as JSON (``{"keys": [...]}``, …). Keys are sent
    as written."""
    text = text.strip()
    if text == "all":
        return "all"
    if text.startswith(("{", "[", '"')):
        return _json_object(text, "--blocks", '{"keys": ["2026-11-01", "2026-11-03"]}')
    ranges: list[tuple[str, str]] = []
    for piece in text.split(","):
        ends = [end.strip() for end in piece.split("..")]
        if len(ends) > 2 or not all(ends):
            raise UsageError(f"--blocks: cannot read {text!r}: give {_BLOCKS_FORMS}")
        ranges.append((ends[0], ends[-1]))
    if len(ranges) == 1 and ".." in text:
        return {"from": ranges[0][0], "to": ranges[0][1]}
    if ".." not in text:
        return {"keys": [first for first, _ in ranges]}
    return {"ranges": [{"from": first, "to": last} for first, last in ranges]}


def _ranges_text(ranges: Sequence[BlockRange]) -> str:
    return ", ".join(str(r) for r in ranges) or "none"


def _count(n: int) -> str:
    return "1 block" if n == 1 else f"{n} blocks"


def _declared(args: argparse.Namespace) -> dict[str, Any]:
    """What ``register`` and ``preview`` send: the mechanism and the request's options."""
    return {
        "sub_budget": args.sub_budget,
        "conversion_delta": args.conversion_delta,
        "blocks": args.blocks,
    }


def _register(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    mechanism = args.mechanism
    inv = client.register(args.dataset, mechanism, **_declared(args))
    if args.json:
        _dump(inv.raw, out)
        return 0
    out.write(f"{inv.status} {inv.id} on {inv.dataset_id}: charge {_currency(inv.charge)}\n")
    if inv.blocks is not None:
        count = sum(r.blocks for r in inv.blocks)
        out.write(f"blocks: {_ranges_text(inv.blocks)} ({_count(count)})\n")
    if inv.status == "reserved":
        out.write(f"reserved cells: {', '.join(inv.cells)} (settle with the released cell)\n")
    return 0


def _preview(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    mechanism = args.mechanism
    found = client.preview(args.dataset, mechanism, **_declared(args))
    if args.json:
        _dump(found.raw, out)
        return 0
    reason = f" ({found.reason})" if found.reason else ""
    out.write(f"would be {found.status}{reason}: charge {_currency(found.charge)}\n")
    on_blocks = found.blocks
    if on_blocks is not None:
        count = sum(r.blocks for r in on_blocks.selected)
        out.write(f"selected: {_ranges_text(on_blocks.selected)} ({_count(count)})\n")
        out.write(f"affordable: {_ranges_text(on_blocks.affordable)}\n")
        out.write(f"refused: {_ranges_text(on_blocks.refused)}\n")
        fit = on_blocks.fit
        if fit:
            more = f"at least {fit.get('count')}" if fit.get("at_least") else str(fit.get("count"))
            after = f" (next refused: {fit['reason']})" if fit.get("reason") else ""
            out.write(f"fit: {more} more in a row on every selected block{after}\n")
    return 0


def _budget_set(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    ds = client.change_budget(
        args.dataset,
        args.epsilon,
        args.delta,
        sub_budget=args.sub_budget,
        final_conversion_delta=args.final_conversion_delta,
    )
    if args.json:
        _dump(ds.raw, out)
    else:
        out.write(f"budget of {ds.id} changed\n")
        if ds.raw.get("effect"):  # what the change did to the capacity (servers since 1.4.0)
            out.write(f"{ds.raw['effect']}\n")
        _dataset_lines(ds, out)
    return 0


def _grant(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    quota: dict[str, str] | None = None
    if (args.quota_epsilon is None) != (args.quota_delta is None):
        sys.stderr.write("error: a quota needs both --quota-epsilon and --quota-delta\n")
        return 2
    if args.quota_epsilon is not None:
        quota = {"epsilon": args.quota_epsilon, "delta": args.quota_delta}
    result = client.grant(args.dataset, args.principal, quota=quota)
    if args.json:
        _dump(result, out)
    else:
        suffix = f" with quota {_eps_delta(quota)}" if quota else ""
        out.write(f"granted {args.principal} on {args.dataset}{suffix}\n")
    return 0


def _grants_list(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    grants = client.grants(args.dataset)
    if args.json:
        _dump(grants, out)
        return 0
    rows: list[Sequence[str]] = [("principal", "quota", "quota spent", "granted by", "at")]
    for g in grants:
        spent = (g.get("quota_state") or {}).get("spent")
        rows.append(
            (
                g["principal_id"],
                _eps_delta(g.get("quota")),
                _eps_delta(spent),
                g.get("created_by", "-"),
                g.get("created_at", "-"),
            )
        )
    if len(rows) == 1:
        out.write(f"no grants on {args.dataset}\n")
    else:
        _table(rows, out)
    return 0


def _grants_revoke(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    result = client.revoke_grant(args.dataset, args.principal)
    if args.json:
        _dump(result, out)
    else:
        out.write(f"revoked {args.principal}'s grant on {args.dataset}\n")
    return 0


def _organisation_id(client: OdometerClient, ref: str) -> str:
    """An organisation named by id or by its exact name; an unknown or ambiguous reference is
    an error, never a new organisation."""
    found = client.organisations()
    by_id = [str(o["id"]) for o in found if o["id"] == ref]
    by_name = [str(o["id"]) for o in found if o["name"] == ref]
    if by_id:
        return by_id[0]
    if len(by_name) == 1:
        return by_name[0]
    if by_name:
        raise OdometerError(f"{len(by_name)} organisations are named {ref!r}: give its id")
    raise OdometerError(f"no organisation {ref!r} (by id or name) is visible to this key")


#: The amounts of a cap's currency and their symbols: ε and δ (basic), ρ and δ (zcdp), μ² (gdp).
_CURRENCY = (("epsilon", "ε"), ("rho", "ρ"), ("mu_squared", "μ²"), ("delta", "δ"))


def _currency(obj: Mapping[str, Any] | None) -> str:
    """Amounts in their currency (``ρ=0.015 δ=0``); an RDP curve (rdp mode) is ``curve``."""
    if not obj:
        return "-"
    if "rdp" in obj:
        return "curve"
    return " ".join(f"{sym}={_text(obj[k])}" for k, sym in _CURRENCY if k in obj) or "-"


def _cap_text(cap: Mapping[str, Any] | None) -> str:
    """The cap in force: its target and mode (``ε=10 δ=0.00001 zcdp``)."""
    return f"{_currency(cap)} {cap['mode']}" if cap else "-"


def _org_rows(orgs: Sequence[Mapping[str, Any]], out: TextIO) -> None:
    rows: list[Sequence[str]] = [("id", "name", "cap", "mode", "spent", "certified ε", "decisions")]
    for o in orgs:
        status = o.get("status") or {}
        spent = _currency(o.get("spent"))
        reserved = (o.get("reserved") or {}).get("epsilon")
        if reserved:  # open ODP reservations (basic caps)
            spent += f" (reserved ε={_text(reserved)})"
        rows.append(
            (
                o["id"],
                o["name"],
                _cap_text(o.get("cap")),
                _text(status.get("mode")),
                spent,
                _text((status.get("odometer") or {}).get("epsilon")),
                _text(o.get("cap_seq")),
            )
        )
    _table(rows, out)


def _orgs_list(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    orgs = client.organisations()
    if args.json:
        _dump(orgs, out)
    else:
        _org_rows(orgs, out)
    return 0


def _orgs_create(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    org = client.create_organisation(args.name)
    if args.json:
        _dump(org, out)
    elif args.quiet:
        out.write(f"{org['id']}\n")
    else:
        out.write(f"created organisation {org['id']} {org['name']!r}\n")
    return 0


def _orgs_cap(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    accounting = _accounting(args)
    amounts = args.epsilon is not None or args.delta is not None
    if args.remove and (amounts or accounting is not None):
        raise OdometerError("--remove takes no amounts and no accounting options")
    if not args.remove and not amounts:
        raise OdometerError("give --epsilon and --delta, or --remove")
    if not args.remove and (args.epsilon is None or args.delta is None):
        raise OdometerError("a cap needs both --epsilon and --delta")
    org = client.set_organisation_cap(
        _organisation_id(client, args.organisation), args.epsilon, args.delta, accounting
    )
    if args.json:
        _dump(org, out)
    else:
        _org_rows([org], out)
    return 0


def _orgs_capacity(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    mechanism = args.mechanism
    found = client.organisation_cap_capacity(
        _organisation_id(client, args.organisation),
        mechanism,
        args.dataset,
        args.conversion_delta,
    )
    if args.json:
        _dump(found, out)
        return 0
    count = f"at least {found['count']}" if found["at_least"] else str(found["count"])
    reason = f" (next refused: {found['reason']})" if found.get("reason") else ""
    out.write(f"the cap ({found['mode']}) admits {count} more of this declaration{reason}\n")
    return 0


def _orgs_report(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    report = client.organisation_report(_organisation_id(client, args.organisation))
    if args.json:
        _dump(report, out)
    else:
        _org_report_lines(report, out)
    return 0 if report["verified"] else 1


def _org_report_lines(report: Mapping[str, Any], out: TextIO) -> None:
    """The organisation's report (``GET …/report``) as text: the replay's verdict, the
    certified reading it replayed, and what each dataset drew from the cap."""
    org, reading = report["organisation"], report.get("odometer")
    certified = "-"
    if reading:
        certified = f"{_currency(reading)} ({_text(reading.get('source'))})"
    rows = [
        ("organisation", f"{org['id']}  {org['name']!r}"),
        ("cap", _cap_text(org.get("cap"))),
        ("spent", _currency(org.get("spent"))),
        ("certified reading", certified),
        ("decisions", str(report["decisions"])),
        ("replay", "verified" if report["verified"] else "FAILED"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        out.write(f"{k.ljust(width)}  {v}\n")
    for problem in report["problems"]:
        out.write(f"  problem: {problem}\n")
    table: list[Sequence[str]] = [("dataset", "name", "mode", "decisions", "admitted", "drawn")]
    for d in report["datasets"]:
        table.append(
            (
                d["id"],
                d["name"],
                d["mode"],
                str(d["decisions"]),
                str(d["admitted"]),
                _currency(d.get("drawn")),
            )
        )
    out.write("\n")
    if len(table) == 1:
        out.write("no datasets\n")
    else:
        _table(table, out)


def _principals_list(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    principals = client.principals()
    if args.json:
        _dump(principals, out)
        return 0
    rows: list[Sequence[str]] = [("id", "name", "role", "organisation", "created")]
    for p in principals:
        rows.append(
            (p["id"], p["name"], p["role"], _text(p.get("organisation_id")), p["created_at"])
        )
    _table(rows, out)
    return 0


def _principals_create(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    organisation = (
        None if args.organisation is None else _organisation_id(client, args.organisation)
    )
    principal = client.create_principal(args.name, args.role, organisation_id=organisation)
    if args.json:
        _dump(principal, out)
    elif args.quiet:
        out.write(f"{principal['id']}\n")
    else:
        out.write(
            f"created {principal['role']} {principal['id']} {principal['name']!r} "
            f"in {_text(principal.get('organisation_id'))}\n"
        )
    return 0


def _keys_issue(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    key = client.issue_key(args.principal, expires_at=args.expires_at)
    if args.json:
        _dump(key, out)
        return 0
    sys.stderr.write(
        f"key {key['id']} for {key['principal_id']} (expires {_text(key.get('expires_at'))}); "
        "shown once, the server keeps only its hash:\n"
    )
    out.write(f"{key['key']}\n")
    return 0


def _keys_revoke(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    result = client.revoke_key(args.key_id)
    if args.json:
        _dump(result, out)
    else:
        out.write(f"revoked key {result['id']} of {result['principal_id']}\n")
    return 0


def _export(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    try:
        count = client.export(args.dataset, args.output, args.format)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise OdometerError(
            f"cannot write {args.output}: {reason}: give -o a writable path"
        ) from None
    if args.json:
        _dump({"dataset_id": args.dataset, "entries": count, "path": args.output}, out)
    else:
        out.write(f"wrote {count} entries of {args.dataset} to {args.output} ({args.format})\n")
    return 0


def _report(args: argparse.Namespace, client: OdometerClient, out: TextIO) -> int:
    server_report = client.report(args.dataset)
    if server_report is not None:
        report = server_report
    else:
        ds = client.get_dataset(args.dataset)
        report = summarize(ds.raw, list(client.ledger(ds, page_size=10_000)), verify=args.verify)
        report["source"] = "client"
    if report.get("source") != "client":
        if args.json:
            _dump(report, out)
        else:
            _server_report_lines(report, out)
        return 0 if report["verification"]["ok"] else 1
    if args.json:
        _dump(report, out)
        return 0
    _dataset_lines(client.get_dataset(args.dataset), out)
    ledger = report["ledger"]
    out.write(f"\nledger: {ledger['entries']} entries; by kind:\n")
    for kind, n in ledger["kinds"].items():
        out.write(f"  {kind:<22} {n}\n")
    out.write(f"refunded ε (settlements and cancellations): {report['refunded_epsilon']}\n")
    if report["curve_charges"]:
        out.write(f"curve-based charges (no scalar ε per entry): {report['curve_charges']}\n")
    actors = report["actors"]
    if actors:
        out.write("\nper actor:\n")
        rows: list[Sequence[str]] = [
            (
                "actor",
                "invocations",
                "rejected",
                "settled",
                "cancelled",
                "net ε",
                "net δ",
                "refunded ε",
            )
        ]
        for actor, row in actors.items():
            rows.append(
                (
                    actor,
                    str(row["invocations"]),
                    str(row["rejected"]),
                    str(row["settled"]),
                    str(row["cancelled"]),
                    row["epsilon"],
                    row["delta"],
                    row["refunded_epsilon"],
                )
            )
        _table(rows, out)
    verification = report.get("verification")
    if verification is not None:
        verdict = "OK" if verification["ok"] else "FAILED"
        out.write(
            f"\nreplay verification: {verdict} ({verification['entries']} entries, "
            f"head {verification['head_hash']})\n"
        )
        for problem in verification["problems"]:
            out.write(f"  problem: {problem}\n")
        return 0 if verification["ok"] else 1
    return 0


def _amounts(obj: Mapping[str, Any] | None) -> str:
    """Every scalar amount of a report field (ε, δ, ρ, μ²), exact as the server wrote it."""
    return ", ".join(f"{k}={v}" for k, v in (obj or {}).items()) or "-"


def _server_report_lines(report: Mapping[str, Any], out: TextIO) -> None:
    """The server's report (``GET …/report``) as text: guarantee and status, refunds,
    rejections, ledger summary, per-analyst totals, chain head and the replay verdict."""
    ds, st, unit = report["dataset"], report["status"], report["series"]["unit"]
    rows: list[Sequence[str]] = [
        ("dataset", f"{ds['id']}  {ds['name']!r}"),
        ("mode / relation", f"{ds['mode']} / {ds['relation']}"),
        ("budget", _amounts(st.get("budget"))),
        ("spent", _amounts(st.get("spent"))),
        ("remaining", _amounts(st.get("remaining"))),
        ("refunds (ODP savings)", _amounts(report["refunds"]["odp_savings"])),
        ("refunds (all)", _amounts(report["refunds"]["total"])),
    ]
    rejections = report["rejections"]
    levels = ", ".join(f"{k}: {n}" for k, n in rejections["by_level"].items())
    rows.append(("rejections", f"{rejections['total']}" + (f" ({levels})" if levels else "")))
    for name, value in rows:
        out.write(f"{name + ':':<24}{value}\n")
    for reason, n in rejections["by_reason"].items():
        out.write(f"  {n:>5}  {reason}\n")
    ledger = report["ledger"]
    out.write(f"\nledger: {ledger['entries']} entries; by kind:\n")
    for kind, n in ledger["kinds"].items():
        out.write(f"  {kind:<22} {n}\n")
    if report["analysts"]:
        out.write(f"\nper analyst ({unit}):\n")
        table: list[Sequence[str]] = [
            (
                "actor",
                "name",
                "accepted",
                "reserved",
                "rejected",
                "settled",
                "cancelled",
                "charged",
                "refunded",
            )
        ]
        for a in report["analysts"]:
            table.append(
                (
                    a["actor"],
                    a["name"] or "-",
                    *(str(a[k]) for k in ("accepted", "reserved", "rejected", "settled")),
                    str(a["cancelled"]),
                    a["charged"].get(unit, "0"),
                    a["refunded"].get(unit, "0"),
                )
            )
        _table(table, out)
    head, verdict = report["chain_head"], report["verification"]
    out.write(f"\nchain head: seq {head['seq']} {head['hash']}\n")
    outcome = "OK" if verdict["ok"] else "FAILED"
    out.write(f"replay verification: {outcome} ({verdict['entries']} entries)\n")
    for problem in verdict["problems"]:
        out.write(f"  problem: {problem}\n")


# ---------------------------------------------------------------------------- wiring
def _connection_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", help="server URL (default $ODOMETER_URL or http://127.0.0.1:8000)")
    common.add_argument("--key", help="API key (default $ODOMETER_API_KEY)")
    common.add_argument("--json", action="store_true", help="machine-readable JSON output")
    return common


#: What to do when the service cannot be reached (the end of that error's line).
_START_HINT = "is it running? Start it with `make run`, or point --url or $ODOMETER_URL at it"


def _connection(args: argparse.Namespace) -> tuple[str, str]:
    """The service's URL and API key: ``--url``/``--key`` (:func:`main` merged those given
    before the subcommand), else ``$ODOMETER_URL``/``$ODOMETER_API_KEY`` (else the default
    URL); a URL that is not one or no key at all is a usage error."""
    url, key = resolve(args.url, args.key)
    try:
        parsed: httpx.URL | None = httpx.URL(url)
    except httpx.InvalidURL:
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        source = "--url" if args.url else "$ODOMETER_URL"
        guess = f" (http://{url}?)" if parsed is not None and "://" not in url else ""
        raise UsageError(
            f"{source} {url!r} is not a service URL{guess}: give http://HOST:PORT "
            f"(default {DEFAULT_URL})"
        )
    if not key:
        raise UsageError(
            "no API key given: pass --key KEY or set $ODOMETER_API_KEY "
            "(`make run` prints the demo admin key)"
        )
    return url, key


def _unreachable(url: str, exc: TransportError) -> str:
    """The one line of a transport failure: cannot connect, or no answer."""
    cause = exc.__cause__
    reason = re.sub(r"^\[Errno -?\d+\] ", "", str(cause)) if cause is not None else str(exc)
    if isinstance(cause, httpx.ConnectTimeout):
        reason = "timed out"
    if cause is None or isinstance(cause, httpx.ConnectError | httpx.ConnectTimeout):
        return f"cannot reach the service at {url} ({reason.lower()}): {_START_HINT}"
    what = type(cause).__name__ + (f": {reason}" if reason else "")
    return (
        f"the service at {url} did not answer ({what}): try again, "
        "and if it persists look at the server's log"
    )


#: An id as the service makes them (``ds_`` and 32 hex digits): used as is, without a lookup.
_DATASET_ID = re.compile(r"ds_[0-9a-f]{32}")


def _dataset_id(client: OdometerClient, ref: str) -> str:
    """A dataset named by id or by its exact name (looked up in ``GET /v1/datasets``: the
    datasets visible to the key). A name matching none or several is an error; an unknown
    reference written like an id (``ds_…``) goes to the server as is (its ``404 NotFound``)."""
    if _DATASET_ID.fullmatch(ref):
        return ref
    found = client.list_datasets()
    if any(d.id == ref for d in found):
        return ref
    named = [d.id for d in found if d.name == ref]
    if len(named) == 1:
        return named[0]
    if named:
        raise OdometerError(
            f"{len(named)} datasets are named {ref!r}: give one of their ids: {', '.join(named)}"
        )
    if ref.startswith("ds_"):
        return ref
    raise OdometerError(
        f"no dataset {ref!r} (by id or name) is visible to this key: "
        "`odometer datasets list` shows them"
    )


def _one_line(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=_default)


def _client_command(runner: Runner) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        out = sys.stdout
        url = ""
        try:
            _read_options(args)
            url, key = _connection(args)
            with OdometerClient(url, key) as client:
                if getattr(args, "dataset", None) is not None:  # by id or name: the id
                    args.dataset = _dataset_id(client, args.dataset)
                return runner(args, client, out)
        except ApiError as exc:
            if args.json:
                sys.stderr.write(_one_line({"status": exc.status_code, **exc.body}) + "\n")
            else:
                hint = ": check --key or $ODOMETER_API_KEY" if exc.status_code == 401 else ""
                sys.stderr.write(f"error: {exc}{hint}\n")
            return 1
        except TransportError as exc:
            sys.stderr.write(f"error: {_unreachable(url, exc)}\n")
            return 1
        except UsageError as exc:
            sys.stderr.write(f"error: {exc}\n")
            return 2
        except OdometerError as exc:
            sys.stderr.write(f"error: {exc}\n")
            return 1

    return run


def _accounting_options(parser: argparse.ArgumentParser, example: str) -> None:
    """The accounting options (read by :func:`_accounting`): ``datasets create``, ``orgs cap``."""
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--mode", choices=["basic", "zcdp", "rdp", "gdp"])
    mode.add_argument("--accounting", help=f"full accounting JSON, e.g. '{example}'")
    parser.add_argument(
        "--final-conversion-delta", help="δ of the final conversion to (ε, δ) (zcdp, rdp)"
    )


def register(sub: Any) -> None:
    """Add the client subcommands to the ``odometer`` parser's subparsers."""
    common = _connection_options()

    datasets = sub.add_parser("datasets", help="create, list and show datasets (server)")
    dsub = datasets.add_subparsers(dest="datasets_command", required=True)
    create = dsub.add_parser("create", parents=[common], help="create a dataset")
    create.add_argument("name")
    create.add_argument("--epsilon", required=True)
    create.add_argument("--delta", required=True)
    create.add_argument("--relation", default="add_remove", choices=["add_remove", "replace_one"])
    _accounting_options(create, '{"mode": "split", …}')
    create.add_argument(
        "--partition",
        help="a partitioned dataset (budget and mode are every block's), e.g. "
        '\'{"kind": "day", "unit": "record", "timezone": "Europe/Paris"}\'',
    )
    create.add_argument("-q", "--quiet", action="store_true", help="print only the new id")
    create.set_defaults(run=_client_command(_datasets_create))
    lst = dsub.add_parser("list", parents=[common], help="datasets with their budget status")
    lst.set_defaults(run=_client_command(_datasets_list))
    show = dsub.add_parser("show", parents=[common], help="one dataset's budget status")
    show.add_argument("dataset")
    show.set_defaults(run=_client_command(_datasets_show))

    blocks = sub.add_parser("blocks", help="a partitioned dataset's blocks (server)")
    blsub = blocks.add_subparsers(dest="blocks_command", required=True)
    blist = blsub.add_parser(
        "list", parents=[common], help="open blocks as runs, with the fraction of budget spent"
    )
    blist.add_argument("dataset")
    blist.add_argument("--from", dest="first", metavar="KEY", help="first block key")
    blist.add_argument("--to", dest="last", metavar="KEY", help="last block key")
    blist.add_argument("--limit", type=int, default=100, help="runs on the page (≤ 1000)")
    blist.set_defaults(run=_client_command(_blocks_list))
    for action, what in (("open", "open blocks (never opened before)"), ("retire", "retire")):
        bchange = blsub.add_parser(
            action, parents=[common], help=f"{what} FROM … TO (keys, both included)"
        )
        bchange.add_argument("dataset")
        bchange.add_argument("first", metavar="FROM")
        bchange.add_argument("last", metavar="TO")
        bchange.set_defaults(run=_client_command(_blocks_change(action)))

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
        inv.add_argument("--blocks", help=f"partitioned datasets: the blocks read, {_BLOCKS_FORMS}")
        inv.add_argument("--sub-budget", help="sub-budget of a split dataset")
        inv.add_argument("--conversion-delta", help="δ converting a curve-based declaration")
        inv.set_defaults(run=_client_command(runner))

    budget = sub.add_parser("budget", help="change a dataset's budget (server)")
    bsub = budget.add_subparsers(dest="budget_command", required=True)
    bset = bsub.add_parser("set", parents=[common], help="new target (ε, δ)")
    bset.add_argument("dataset")
    bset.add_argument("--epsilon", required=True)
    bset.add_argument("--delta", required=True)
    bset.add_argument("--sub-budget", help="sub-budget of a split dataset")
    bset.add_argument("--final-conversion-delta")
    bset.set_defaults(run=_client_command(_budget_set))

    grant = sub.add_parser("grant", parents=[common], help="grant an analyst a dataset (server)")
    grant.add_argument("dataset")
    grant.add_argument("principal")
    grant.add_argument("--quota-epsilon", help="the analyst's quota ε inside this dataset")
    grant.add_argument("--quota-delta", help="the analyst's quota δ (with --quota-epsilon)")
    grant.set_defaults(run=_client_command(_grant))

    grants = sub.add_parser("grants", help="list or revoke a dataset's grants (server)")
    gsub = grants.add_subparsers(dest="grants_command", required=True)
    glist = gsub.add_parser("list", parents=[common], help="principals granted a dataset")
    glist.add_argument("dataset")
    glist.set_defaults(run=_client_command(_grants_list))
    grevoke = gsub.add_parser("revoke", parents=[common], help="withdraw a principal's grant")
    grevoke.add_argument("dataset")
    grevoke.add_argument("principal")
    grevoke.set_defaults(run=_client_command(_grants_revoke))

    orgs = sub.add_parser("orgs", help="organisations and their caps (server)")
    osub = orgs.add_subparsers(dest="orgs_command", required=True)
    olist = osub.add_parser("list", parents=[common], help="organisations with cap and spend")
    olist.set_defaults(run=_client_command(_orgs_list))
    ocreate = osub.add_parser("create", parents=[common], help="create an organisation (admin)")
    ocreate.add_argument("name")
    ocreate.add_argument("-q", "--quiet", action="store_true", help="print only the new id")
    ocreate.set_defaults(run=_client_command(_orgs_create))
    ocap = osub.add_parser("cap", parents=[common], help="set or remove an organisation's cap")
    ocap.add_argument("organisation", help="the organisation's id or exact name")
    ocap.add_argument("--epsilon")
    ocap.add_argument("--delta")
    _accounting_options(ocap, '{"mode": "rdp", "workload": […]}')
    ocap.add_argument("--remove", action="store_true", help="remove the cap")
    ocap.set_defaults(run=_client_command(_orgs_cap))
    ocapacity = osub.add_parser(
        "capacity", parents=[common], help="how many more of a declaration the cap admits"
    )
    ocapacity.add_argument("organisation", help="the organisation's id or exact name")
    ocapacity.add_argument(
        "--mechanism",
        required=True,
        help='the declaration as JSON, e.g. \'{"type": "gaussian", "sigma": "10", '
        '"sensitivity": "1"}\'',
    )
    ocapacity.add_argument(
        "--dataset", help="the dataset it would read (the cap charges under its relation)"
    )
    ocapacity.add_argument(
        "--conversion-delta", help="δ converting a curve-based declaration (basic caps)"
    )
    ocapacity.set_defaults(run=_client_command(_orgs_capacity))
    oreport = osub.add_parser(
        "report", parents=[common], help="the cap replayed: what each dataset drew (server)"
    )
    oreport.add_argument("organisation", help="the organisation's id or exact name")
    oreport.set_defaults(run=_client_command(_orgs_report))

    principals = sub.add_parser("principals", help="list and create principals (server)")
    psub = principals.add_subparsers(dest="principals_command", required=True)
    plist = psub.add_parser("list", parents=[common], help="principals visible to the key")
    plist.set_defaults(run=_client_command(_principals_list))
    pcreate = psub.add_parser("create", parents=[common], help="create a principal")
    pcreate.add_argument("name")
    pcreate.add_argument(
        "--role", required=True, choices=["curator", "analyst", "auditor", "admin"]
    )
    pcreate.add_argument(
        "--organisation", help="id or exact name (default: the caller's organisation)"
    )
    pcreate.add_argument("-q", "--quiet", action="store_true", help="print only the new id")
    pcreate.set_defaults(run=_client_command(_principals_create))

    keys = sub.add_parser("keys", help="issue and revoke API keys (server)")
    ksub = keys.add_subparsers(dest="keys_command", required=True)
    kissue = ksub.add_parser("issue", parents=[common], help="a new key for a principal")
    kissue.add_argument("principal", help="the principal's id")
    kissue.add_argument("--expires-at", help="ISO 8601 time after which the key is refused")
    kissue.set_defaults(run=_client_command(_keys_issue))
    krevoke = ksub.add_parser("revoke", parents=[common], help="revoke a key at once")
    krevoke.add_argument("key_id")
    krevoke.set_defaults(run=_client_command(_keys_revoke))

    export = sub.add_parser(
        "export", parents=[common], help="stream a dataset's whole ledger to a file (server)"
    )
    export.add_argument("dataset")
    export.add_argument("-o", "--output", required=True)
    export.add_argument("--format", default="jsonl", choices=EXPORT_FORMATS)
    export.set_defaults(run=_client_command(_export))

    report = sub.add_parser(
        "report", parents=[common], help="status, ledger summary and replay verification (server)"
    )
    report.add_argument("dataset")
    report.add_argument(
        "--no-verify",
        dest="verify",
        action="store_false",
        help="skip the local replay (servers without a report route; the server always replays)",
    )
    report.set_defaults(run=_client_command(_report))


# ---------------------------------------------------------------------------- the command line
#: Entry-point group of commands other distributions add: ``verify`` (privacy-odometer-core)
#: and the operator commands (the server).
PLUGIN_GROUP = "odometer.commands"


def _verify_missing(args: argparse.Namespace) -> int:
    sys.stderr.write(
        "odometer verify: the offline verifier is not installed: "
        "pip install privacy-odometer-core\n"
    )
    return 2


def _add_plugins(sub: Any) -> None:
    from importlib.metadata import entry_points

    for entry in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        try:
            entry.load()(sub)
        except Exception as exc:  # a broken plug-in must not take the client commands down
            sys.stderr.write(f"odometer: commands of {entry.value} unavailable: {exc}\n")
    if "verify" not in sub.choices:
        missing = sub.add_parser(
            "verify", help="replay a ledger export (needs privacy-odometer-core)"
        )
        missing.add_argument("args", nargs=argparse.REMAINDER)
        missing.set_defaults(run=_verify_missing)
        return


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, as every error (the full usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


class _ReaderGone(BaseException):
    """The reader of stdout went away (``odometer … | head -1``). Not an ``OSError``: no
    ``except OSError`` on the way (the verifier's "cannot read FILE") takes it for another."""


class _Stdout:
    """``sys.stdout`` while a command runs: a broken pipe is :class:`_ReaderGone`."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise _ReaderGone from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise _ReaderGone from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _quiet_broken_pipe() -> int:
    """No traceback and nothing more written: stdout now goes nowhere, so the interpreter's
    last flush cannot fail either."""
    with suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 141  # 128 + SIGPIPE: what a shell reports of a writer the pipe stopped


def main(argv: Sequence[str] | None = None) -> int:
    """``odometer``: the client commands and every installed plug-in's."""
    parser = _Parser(prog="odometer", description="Command line of the privacy odometer service.")
    parser.add_argument(
        "--url", dest="url_before", metavar="URL", help="server URL, for every command"
    )
    parser.add_argument(
        "--key", dest="key_before", metavar="KEY", help="API key, for every command"
    )
    parser.add_argument(
        "--json", dest="json_before", action="store_true", help="machine-readable JSON output"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    register(sub)
    _add_plugins(sub)
    stdout = sys.stdout
    sys.stdout = cast(TextIO, _Stdout(stdout))
    try:
        try:
            args = parser.parse_args(argv)
            # given before the subcommand and after it: the subcommand's (the later) wins
            if getattr(args, "url", None) is None and hasattr(args, "url"):
                args.url = args.url_before
            if getattr(args, "key", None) is None and hasattr(args, "key"):
                args.key = args.key_before
            if hasattr(args, "json"):
                args.json = args.json or args.json_before
            code: int = args.run(args)
        finally:  # also after --help and usage errors (SystemExit): all written, or none
            sys.stdout.flush()
    except (_ReaderGone, BrokenPipeError):
        sys.stdout = stdout
        return _quiet_broken_pipe()
    finally:
        sys.stdout = stdout
    return code


if __name__ == "__main__":
    raise SystemExit(main())
