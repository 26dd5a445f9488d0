"""Who may spend what: ``odometer grant`` and ``grants`` (analysts on a dataset, with a
quota), ``orgs`` (organisations and their caps), ``principals`` and ``keys``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from odometer_client._cli.options import accounting, accounting_options
from odometer_client._cli.output import Output, text, text_of
from odometer_client._cli.run import command, organisation_id, principal_id
from odometer_client._sync.client import OdometerClient
from odometer_client.errors import OdometerError
from odometer_client.models import (
    decimals,
)
from odometer_client.results import (
    Organisation,
    OrganisationReport,
)


# ---------------------------------------------------------------------------- grants
def _grant(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    quota: dict[str, str] | None = None
    if (args.quota_epsilon is None) != (args.quota_delta is None):
        sys.stderr.write("error: a quota needs both --quota-epsilon and --quota-delta\n")
        return 2
    if args.quota_epsilon is not None:
        quota = {"epsilon": args.quota_epsilon, "delta": args.quota_delta}
    principal = _principal(client, args)
    result = client.grant(args.dataset, principal, quota=quota)
    if args.json:
        out.json(result.raw)
    else:
        shown = text_of(result.raw, "quota")  # the server's text of the quota it granted
        suffix = f" with quota {out.amounts(quota, shown=shown)}" if quota else ""
        out.line(f"granted {_named(args.principal, principal)} on {args.dataset}{suffix}")
    return 0


def _principal(client: OdometerClient, args: argparse.Namespace) -> str:
    """``PRINCIPAL`` by id or name; a name shared across organisations is read in the
    dataset's (``grant``, ``grants revoke``)."""
    dataset = getattr(args, "dataset", None)

    def organisation() -> str | None:
        return None if dataset is None else client.get_dataset(dataset).organisation

    return principal_id(client, args.principal, organisation=organisation)


def _named(ref: str, resolved: str) -> str:
    """A principal as the user named it, with its id when that was a name."""
    return resolved if ref == resolved else f"{ref} ({resolved})"


def _grants_list(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    grants = client.grants(args.dataset)
    if args.json:
        out.json([decimals(g.raw) for g in grants])
        return 0
    if not grants:
        out.line(f"no grants on {args.dataset}")
        return 0
    rows: list[Sequence[str]] = [("principal", "quota", "quota reading", "granted by", "at")]
    for g in grants:
        # the quota's certified reading (its summary's guarantee, the same in every mode); the
        # stored state holds a mode's own running totals (spent_epsilon, rho, …), no "spent"
        # (rounded up by the server already: printed as it is)
        reading = (g.quota_summary or {}).get("guarantee")
        rows.append(
            (
                g.principal_id,
                out.amounts(g.quota, shown=text_of(g.raw, "quota")),
                out.amounts(reading),
                g.created_by,
                g.created_at,
            )
        )
    out.table(rows)
    return 0


def _grants_revoke(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    principal = _principal(client, args)
    result = client.revoke_grant(args.dataset, principal)
    if args.json:
        out.json(decimals(result.raw))
    else:
        out.line(f"revoked {_named(args.principal, principal)}'s grant on {args.dataset}")
    return 0


# ---------------------------------------------------------------------------- organisations
def _cap_text(org: Organisation, out: Output) -> str:
    """The cap in force: its target and mode (``ε=10 δ=0.00001 zcdp``)."""
    cap = org.cap
    if not cap:
        return "-"
    return f"{out.amounts(cap, shown=text_of(org.raw, 'cap'), symbols=True)} {cap['mode']}"


def _org_rows(orgs: Sequence[Organisation], out: Output) -> None:
    rows: list[Sequence[str]] = [("id", "name", "cap", "mode", "spent", "certified ε", "decisions")]
    for o in orgs:
        status = o.status
        spent = out.amounts(o.spent, shown=text_of(o.raw, "spent"), symbols=True)
        reserved = (o.reserved or {}).get("epsilon")
        if reserved:  # open ODP reservations (basic caps)
            held = (text_of(o.raw, "reserved") or {}).get("epsilon")
            spent += f" (reserved ε={out.figure(reserved, shown=held)})"
        rows.append(
            (
                o.id,
                o.name,
                _cap_text(o, out),
                text(status.get("mode")),
                spent,
                out.figure(
                    (status.get("odometer") or {}).get("epsilon"),
                    shown=(text_of(o.raw.get("status"), "reading") or {}).get("epsilon"),
                ),
                text(o.cap_seq),
            )
        )
    out.table(rows)
    for o in orgs:
        _statement_lines(o, out)


def _statement_lines(org: Organisation, out: Output) -> None:
    """An organisation whose cap was replaced after it counted: its statement (the closed
    phases' readings plus the cap in force's once it counted: what to quote for the
    organisation, the table's certified ε being the cap in force's alone), the server's note
    (its δ exceeds the first cap's), and each closed phase."""
    closed, statement = org.closed, org.statement
    if not closed or not statement:
        return
    phases = statement.get("phases")
    # the readings as the server's text (shown.statement, shown.closed: rounded up)
    found = org.raw.get("shown")
    shown: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    said = out.amounts(statement, shown=text_of(org.raw, "statement"), symbols=True)
    out.line(
        f"statement {said} of {org.name!r} "
        f"({phases} phase{'' if phases == 1 else 's'}): {statement.get('note')}"
    )
    listed = shown.get("closed")
    texts: list[Any] = listed if isinstance(listed, list) else []
    for n, phase in enumerate(closed):
        text_n = texts[n] if n < len(texts) and isinstance(texts[n], Mapping) else None
        out.line(
            f"  closed {phase.get('mode')} cap: {out.amounts(phase, shown=text_n, symbols=True)} "
            f"(until cap decision {phase.get('after_seq')})"
        )


def _orgs_list(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    orgs = client.organisations()
    if args.json:
        out.json([decimals(o.raw) for o in orgs])
    else:
        _org_rows(orgs, out)
    return 0


def _orgs_create(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    org = client.create_organisation(args.name)
    if args.json:
        out.json(decimals(org.raw))
    elif args.quiet:
        out.line(org.id)
    else:
        out.line(f"created organisation {org.id} {org.name!r}")
    return 0


def _orgs_cap(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    chosen = accounting(args)
    amounts = args.epsilon is not None or args.delta is not None
    if args.remove and (amounts or chosen is not None):
        raise OdometerError("--remove takes no amounts and no accounting options")
    if not args.remove and not amounts:
        raise OdometerError("give --epsilon and --delta, or --remove")
    if not args.remove and (args.epsilon is None or args.delta is None):
        raise OdometerError("a cap needs both --epsilon and --delta")
    if args.remove and args.replace:
        raise OdometerError("--replace names the new cap: --epsilon and --delta, not --remove")
    org = client.set_organisation_cap(
        organisation_id(client, args.organisation),
        args.epsilon,
        args.delta,
        chosen,
        replace=args.replace,
    )
    if args.json:
        out.json(decimals(org.raw))
    else:
        _org_rows([org], out)  # with the statement once a cap was replaced
    return 0


def _orgs_capacity(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    found = client.organisation_cap_capacity(
        organisation_id(client, args.organisation),
        args.mechanism,
        args.dataset,
        args.conversion_delta,
    )
    if args.json:
        out.json(decimals(found.raw))
        return 0
    count = f"at least {found.count}" if found.at_least else str(found.count)
    reason = f" (next refused: {found.reason})" if found.reason else ""
    out.line(f"the cap ({found.mode}) admits {count} more of this declaration{reason}")
    return 0


def _orgs_report(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    report = client.organisation_report(organisation_id(client, args.organisation))
    if args.json:
        out.json(decimals(report.raw))
    else:
        _org_report_lines(report, out)
    return 0 if report.verified else 1


def _org_report_lines(report: OrganisationReport, out: Output) -> None:
    """The organisation's report (``GET …/report``) as text: the replay's verdict, the
    certified reading it replayed, and what each dataset drew from the cap."""
    org, reading = report.organisation, report.odometer
    certified = "-"
    if reading:
        replayed = out.amounts(reading, shown=text_of(report.raw, "odometer"), symbols=True)
        certified = f"{replayed} ({text(reading.get('source'))})"
    statement = out.amounts(report.statement, shown=text_of(report.raw, "statement"), symbols=True)
    out.pairs(
        [
            ("organisation", f"{org.id}  {org.name!r}"),
            ("cap", _cap_text(org, out)),
            ("spent", out.amounts(org.spent, shown=text_of(org.raw, "spent"), symbols=True)),
            ("certified reading", certified),
            *(
                [
                    (
                        "statement",
                        f"{statement} (replayed: the "
                        f"sum of {(report.statement or {}).get('phases')} cap phases)",
                    )
                ]
                if report.closed
                else []
            ),
            ("decisions", str(report.decisions)),
            ("replay", "verified" if report.verified else "FAILED"),
        ]
    )
    for problem in report.problems:
        out.line(f"  problem: {problem}")
    table: list[Sequence[str]] = [("dataset", "name", "mode", "decisions", "admitted", "drawn")]
    for d in report.datasets:
        drawn = out.amounts(d.drawn, shown=text_of(d.raw, "drawn"), symbols=True)
        table.append((d.id, d.name, d.mode, str(d.decisions), str(d.admitted), drawn))
    out.line()
    if len(table) == 1:
        out.line("no datasets")
    else:
        out.table(table)


# ---------------------------------------------------------------------------- principals, keys
def _principals_list(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    principals = client.principals()
    if args.json:
        out.json([decimals(p.raw) for p in principals])
        return 0
    rows: list[Sequence[str]] = [("id", "name", "role", "organisation", "created")]
    for p in principals:
        rows.append((p.id, p.name, p.role, text(p.organisation_id), p.created_at))
    out.table(rows)
    return 0


def _principals_create(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    organisation = None if args.organisation is None else organisation_id(client, args.organisation)
    principal = client.create_principal(args.name, args.role, organisation_id=organisation)
    if args.json:
        out.json(decimals(principal.raw))
    elif args.quiet:
        out.line(principal.id)
    else:
        out.line(
            f"created {principal.role} {principal.id} {principal.name!r} "
            f"in {text(principal.organisation_id)}"
        )
    return 0


def _keys_issue(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    key = client.issue_key(principal_id(client, args.principal), expires_at=args.expires_at)
    if args.json:
        out.json(decimals(key.raw))
        return 0
    sys.stderr.write(
        f"key {key.id} for {key.principal_id} (expires {text(key.expires_at)}); "
        "shown once, the server keeps only its hash:\n"
    )
    out.line(key.key)
    return 0


def _keys_revoke(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    result = client.revoke_key(args.key_id)
    if args.json:
        out.json(decimals(result.raw))
    else:
        out.line(f"revoked key {result.id} of {result.principal_id}")
    return 0


# ---------------------------------------------------------------------------- wiring
def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """``grant``, ``grants``, ``orgs``, ``principals`` and ``keys``."""
    grant = sub.add_parser("grant", parents=[common], help="grant an analyst a dataset (server)")
    grant.add_argument("dataset")
    grant.add_argument("principal", help="the principal's id or exact name")
    grant.add_argument("--quota-epsilon", help="the analyst's quota ε inside this dataset")
    grant.add_argument("--quota-delta", help="the analyst's quota δ (with --quota-epsilon)")
    grant.set_defaults(run=command(_grant))

    grants = sub.add_parser("grants", help="list or revoke a dataset's grants (server)")
    gsub = grants.add_subparsers(dest="grants_command", required=True)
    glist = gsub.add_parser("list", parents=[common], help="principals granted a dataset")
    glist.add_argument("dataset")
    glist.set_defaults(run=command(_grants_list))
    grevoke = gsub.add_parser("revoke", parents=[common], help="withdraw a principal's grant")
    grevoke.add_argument("dataset")
    grevoke.add_argument("principal", help="the principal's id or exact name")
    grevoke.set_defaults(run=command(_grants_revoke))

    orgs = sub.add_parser("orgs", help="organisations and their caps (server)")
    osub = orgs.add_subparsers(dest="orgs_command", required=True)
    olist = osub.add_parser("list", parents=[common], help="organisations with cap and spend")
    olist.set_defaults(run=command(_orgs_list))
    ocreate = osub.add_parser("create", parents=[common], help="create an organisation (admin)")
    ocreate.add_argument("name")
    ocreate.add_argument("-q", "--quiet", action="store_true", help="print only the new id")
    ocreate.set_defaults(run=command(_orgs_create))
    ocap = osub.add_parser("cap", parents=[common], help="set or remove an organisation's cap")
    ocap.add_argument("organisation", help="the organisation's id or exact name")
    ocap.add_argument("--epsilon")
    ocap.add_argument("--delta")
    accounting_options(ocap, '{"mode": "rdp", "workload": […]}')
    ocap.add_argument("--remove", action="store_true", help="remove the cap")
    ocap.add_argument(
        "--replace",
        action="store_true",
        help="replace a cap that has counted by this one, in any mode: its reading is kept as "
        "a closed statement, added to the new cap's",
    )
    ocap.set_defaults(run=command(_orgs_cap))
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
    ocapacity.set_defaults(run=command(_orgs_capacity))
    oreport = osub.add_parser(
        "report", parents=[common], help="the cap replayed: what each dataset drew (server)"
    )
    oreport.add_argument("organisation", help="the organisation's id or exact name")
    oreport.set_defaults(run=command(_orgs_report))

    principals = sub.add_parser("principals", help="list and create principals (server)")
    psub = principals.add_subparsers(dest="principals_command", required=True)
    plist = psub.add_parser("list", parents=[common], help="principals visible to the key")
    plist.set_defaults(run=command(_principals_list))
    pcreate = psub.add_parser("create", parents=[common], help="create a principal")
    pcreate.add_argument("name")
    pcreate.add_argument(
        "--role", required=True, choices=["curator", "analyst", "auditor", "admin"]
    )
    pcreate.add_argument(
        "--organisation", help="id or exact name (default: the caller's organisation)"
    )
    pcreate.add_argument("-q", "--quiet", action="store_true", help="print only the new id")
    pcreate.set_defaults(run=command(_principals_create))

    keys = sub.add_parser("keys", help="issue and revoke API keys (server)")
    ksub = keys.add_subparsers(dest="keys_command", required=True)
    kissue = ksub.add_parser("issue", parents=[common], help="a new key for a principal")
    kissue.add_argument("principal", help="the principal's id or exact name")
    kissue.add_argument("--expires-at", help="ISO 8601 time after which the key is refused")
    kissue.set_defaults(run=command(_keys_issue))
    krevoke = ksub.add_parser("revoke", parents=[common], help="revoke a key at once")
    krevoke.add_argument("key_id")
    krevoke.set_defaults(run=command(_keys_revoke))
