"""Operator commands of the ``odometer`` command line (a plug-in of the client's, entry point
group ``odometer.commands``; they need the server installed).

odometer checkpoint-keygen -o FILE
                                  write a checkpoint signing key, print its public key
odometer openapi [-o FILE]        write the OpenAPI document
odometer create-key --principal ID --role ROLE [--organisation ORG [--create-organisation]]
                                  issue an API key (uses DATABASE_URL)
odometer bootstrap-admin --name NAME [--force]
                                  create the first admin principal and print its key once

``python -m app.cli …`` runs the whole ``odometer`` command line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _checkpoint_keygen(args: argparse.Namespace) -> int:
    """Write a new Ed25519 private key (PEM, mode 0600, never overwritten unless ``--force``)
    and print its public key: that PEM is what auditors pin, out of band."""
    from odometer_core.ledger.checkpoints import generate_key_pem, key_fingerprint, public_pem

    path = Path(args.output)
    pem, public_key = generate_key_pem()
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if args.force else os.O_EXCL)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        print(f"odometer: {path} exists (use --force to replace the key)", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"odometer: cannot create {path}: {exc.strerror}", file=sys.stderr)
        return 1
    with os.fdopen(fd, "wb") as out:
        os.fchmod(out.fileno(), 0o600)  # also when --force replaced an older, laxer file
        out.write(pem)
    print(
        f"private key written to {path} (mode 0600); set ODOMETER_CHECKPOINT_KEY={path}\n"
        f"key_id {key_fingerprint(public_key)}; public key (give it to auditors):",
        file=sys.stderr,
    )
    sys.stdout.write(public_pem(public_key))
    return 0


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


def _database() -> Any:
    from app.db.uow import Database
    from app.settings import get_settings

    return Database.from_settings(get_settings())


def _create_key(args: argparse.Namespace) -> int:
    from app.db.uow import UnitOfWork
    from app.services.errors import ServiceError
    from app.services.principals import Role, operator_key

    database = _database()
    try:
        organisation, token = operator_key(
            UnitOfWork(database),
            args.principal,
            Role(args.role),
            args.organisation,
            create_organisation=args.create_organisation,
        )
    except ServiceError as exc:
        print(f"odometer create-key: {exc.detail}", file=sys.stderr)
        return 1
    finally:
        database.dispose()
    where = f" in organisation {organisation}" if organisation else ""
    print(f"{args.role} key for {args.principal}{where} (shown once):", file=sys.stderr)
    print(token)
    return 0


def _bootstrap_admin(args: argparse.Namespace) -> int:
    from app.db.uow import UnitOfWork
    from app.services.errors import ServiceError
    from app.services.principals import bootstrap_admin

    database = _database()
    try:
        principal_id, token = bootstrap_admin(UnitOfWork(database), args.name, force=args.force)
    except ServiceError as exc:
        print(f"odometer bootstrap-admin: {exc.detail}", file=sys.stderr)
        return 1
    finally:
        database.dispose()
    print(f"admin principal {principal_id}; key (shown once, stored hashed):", file=sys.stderr)
    print(token)
    return 0


def register(sub: Any) -> None:
    """Add the operator commands to the ``odometer`` command line."""
    keygen = sub.add_parser(
        "checkpoint-keygen",
        help="write an Ed25519 checkpoint signing key (PEM, 0600) and print its public key",
    )
    keygen.add_argument("-o", "--output", required=True, help="private key file to create")
    keygen.add_argument("--force", action="store_true", help="replace an existing file")
    keygen.set_defaults(run=_checkpoint_keygen)
    openapi = sub.add_parser("openapi", help="write the OpenAPI document")
    openapi.add_argument("-o", "--output", default="-")
    openapi.set_defaults(run=_openapi)
    key = sub.add_parser("create-key", help="issue an API key (stored hashed)")
    key.add_argument("--principal", required=True, help="principal id (created when missing)")
    key.add_argument("--role", required=True, choices=["curator", "analyst", "auditor", "admin"])
    key.add_argument(
        "--organisation",
        help="organisation id or exact name (a new principal: default 'default'); an unknown "
        "one is an error",
    )
    key.add_argument(
        "--create-organisation",
        action="store_true",
        help="create the organisation named by --organisation if there is none",
    )
    key.set_defaults(run=_create_key)
    bootstrap = sub.add_parser(
        "bootstrap-admin", help="create the first admin principal and print its key once"
    )
    bootstrap.add_argument("--name", required=True)
    bootstrap.add_argument(
        "--force", action="store_true", help="create another admin even if one exists"
    )
    bootstrap.set_defaults(run=_bootstrap_admin)


def main(argv: Sequence[str] | None = None) -> int:
    """The whole ``odometer`` command line (client commands and every installed plug-in)."""
    from odometer_client.cli import main as odometer

    return odometer(argv)


if __name__ == "__main__":
    raise SystemExit(main())
