"""``odometer``: the offline ledger verifier and a few operator commands.

odometer verify EXPORT            replay a ledger export (JSON, JSONL or CSV) and check its
                                  chain (JSON lines are streamed: bounded memory)
odometer openapi [-o FILE]        write the OpenAPI document
odometer create-key --principal ID --role ROLE [--organisation ORG]
                                  issue an API key (uses DATABASE_URL)
odometer bootstrap-admin --name NAME
                                  create an admin principal and print its key once
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from app.ledger_chain import PAYLOAD_FIELDS
from app.services.replay import replay

#: Export columns holding JSON objects (empty cell = null).
_OBJECT_COLUMNS = frozenset(
    {
        "declaration",
        "request",
        "charge",
        "requested",
        "refund",
        "reservation",
        "config",
        "state",
        "org",
        "quota",
    }
)
_NULLABLE_TEXT_COLUMNS = frozenset({"invocation_id", "reason"})


def load_export(text: str) -> list[dict[str, Any]]:
    """Entries from a JSON export (``{"entries": [...]}`` or a list), a JSON-lines export
    (``odometer export --format jsonl``) or a CSV export."""
    from app.client.ledger import jsonl_entries

    rows = jsonl_entries(text)
    if rows is not None:
        return rows
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        doc = json.loads(text)
        entries = doc["entries"] if isinstance(doc, dict) else doc
        if not isinstance(entries, list):
            raise ValueError("a JSON export must hold a list of entries")
        return entries
    return _entries_from_csv(text)


def _entries_from_csv(text: str) -> list[dict[str, Any]]:
    reader = csv.DictReader(io.StringIO(text))
    expected = [*PAYLOAD_FIELDS, "hash"]
    if reader.fieldnames != expected:
        raise ValueError(f"CSV columns must be {', '.join(expected)}")
    entries: list[dict[str, Any]] = []
    for row in reader:
        entry: dict[str, Any] = {}
        for column, cell in row.items():
            if column == "seq":
                entry[column] = int(cell)
            elif column in _OBJECT_COLUMNS:
                entry[column] = json.loads(cell) if cell else None
            elif column in _NULLABLE_TEXT_COLUMNS:
                entry[column] = cell or None
            else:
                entry[column] = cell
        entries.append(entry)
    return entries


def iter_jsonl_export(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The entries of a JSON-lines export, parsed one line at a time (bounded memory)."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        if not isinstance(row, dict):
            raise ValueError(f"line {number}: a JSON-lines export holds one entry per line")
        yield row


def _looks_like_jsonl(first_line: str) -> bool:
    """True if the first line of an export is a whole entry (JSON lines), not the start of a
    JSON document or a CSV header."""
    try:
        row = json.loads(first_line)
    except json.JSONDecodeError:
        return False
    return isinstance(row, dict) and "seq" in row and "hash" in row


def _verify(args: argparse.Namespace) -> int:
    if args.export != "-":
        with Path(args.export).open(encoding="utf-8") as stream:
            first = ""
            for first in stream:
                if first.strip():
                    break
            if _looks_like_jsonl(first):
                # Streamed: a JSON-lines export of any length is verified in bounded memory.
                verdict = replay(iter_jsonl_export(itertools.chain([first], stream)))
                print(json.dumps(verdict.to_json(), indent=2, ensure_ascii=False))
                return 0 if verdict.ok else 1
    text = sys.stdin.read() if args.export == "-" else Path(args.export).read_text("utf-8")
    verdict = replay(load_export(text))
    print(json.dumps(verdict.to_json(), indent=2, ensure_ascii=False))
    return 0 if verdict.ok else 1


def _openapi(args: argparse.Namespace) -> int:
    from app.main import create_app
    from app.settings import Settings

    document = create_app(Settings(database_url="sqlite://")).openapi()
    text = json.dumps(document, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, "utf-8")
    return 0


def _create_key(args: argparse.Namespace) -> int:
    from app.db.uow import Database, UnitOfWork
    from app.services.principals import Role, issue_api_key
    from app.settings import get_settings

    database = Database.from_settings(get_settings())
    try:
        token = issue_api_key(
            UnitOfWork(database), args.principal, Role(args.role), args.organisation
        )
    finally:
        database.dispose()
    print(token)
    return 0


def _bootstrap_admin(args: argparse.Namespace) -> int:
    from app.db.uow import Database, UnitOfWork
    from app.services.principals import bootstrap_admin
    from app.settings import get_settings

    database = Database.from_settings(get_settings())
    try:
        principal_id, token = bootstrap_admin(UnitOfWork(database), args.name)
    finally:
        database.dispose()
    print(f"admin principal {principal_id}; key (shown once, stored hashed):", file=sys.stderr)
    print(token)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="odometer", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    verify = sub.add_parser("verify", help="replay a ledger export and check its hash chain")
    verify.add_argument(
        "export", help="JSON or CSV export of one dataset's whole ledger ('-' = stdin)"
    )
    verify.set_defaults(run=_verify)
    openapi = sub.add_parser("openapi", help="write the OpenAPI document")
    openapi.add_argument("-o", "--output", default="-")
    openapi.set_defaults(run=_openapi)
    key = sub.add_parser("create-key", help="issue an API key (stored hashed)")
    key.add_argument("--principal", required=True)
    key.add_argument("--role", required=True, choices=["curator", "analyst", "auditor", "admin"])
    key.add_argument("--organisation", default="default")
    key.set_defaults(run=_create_key)
    bootstrap = sub.add_parser(
        "bootstrap-admin", help="create the first admin principal and print its key once"
    )
    bootstrap.add_argument("--name", required=True)
    bootstrap.set_defaults(run=_bootstrap_admin)
    from app.client.cli import register as register_client_commands

    register_client_commands(sub)  # datasets, budget, grant, export, report (app/client/cli.py)
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
