"""Operator commands of the ``odometer`` command line (a plug-in of the client's, entry point
group ``odometer.commands``; they need the server installed).

odometer checkpoint-keygen -o FILE
                                  write a checkpoint signing key, print its public key
odometer openapi [-o FILE]        write the OpenAPI document
odometer create-key --principal ID --role ROLE [--organisation ORG [--create-organisation]]
                                  issue an API key (uses DATABASE_URL)
odometer bootstrap-admin --name NAME [--force]
                                  create the first admin principal and print its key once
odometer publish-heads DIR [--every SECONDS]
                                  write every dataset's signed tree head under DIR, for
                                  witnesses to poll (uses DATABASE_URL, the checkpoint key)

``python -m app.cli …`` runs the whole ``odometer`` command line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
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


def _publish_heads(args: argparse.Namespace) -> int:
    """Publish every dataset's signed head under DIR (:mod:`app.services.publish_heads`),
    once or every ``--every`` seconds until interrupted. 2 without a checkpoint key; 1 when a
    dataset's head was refused (its published files left as they were)."""
    from dataclasses import replace

    from app.services.checkpoints import signer_from_settings
    from app.services.errors import ServiceError
    from app.services.publish_heads import publish
    from app.settings import get_settings
    from odometer_core.ledger.cosign import cosigner_key
    from odometer_core.ledger.witness import CosignedHeads

    settings = get_settings()
    signer = signer_from_settings(settings)
    if signer is None:
        print(
            "odometer publish-heads: no checkpoint key (set ODOMETER_CHECKPOINT_KEY to the "
            "server's key, odometer checkpoint-keygen): there is no signed head to publish",
            file=sys.stderr,
        )
        return 2
    # the heads the witness of ledger heads cosigned, read where the server keeps them
    # (ODOMETER_WITNESS_DIR/cosigned, with ODOMETER_WITNESS_KEY); never a witness created here
    cosigned = None
    witness_dir = (settings.witness_dir or "").strip()
    witness_key = (settings.witness_key or "").strip()
    store = Path(witness_dir) / "cosigned" if witness_dir else None
    if store is not None and witness_key and store.is_dir():
        cosigned = CosignedHeads(store, cosigner_key(Path(witness_key).read_text("utf-8")))
    database = replace(_database(), signer=signer)
    directory = Path(args.directory)
    code = 0
    try:
        while True:
            try:
                outcomes = publish(database, directory, cosigned)
            except ServiceError as exc:
                print(f"odometer publish-heads: {exc.detail}", file=sys.stderr)
                return 1
            except OSError as exc:
                where = exc.filename if exc.filename is not None else directory
                print(
                    f"odometer publish-heads: cannot write {where}: {exc.strerror}", file=sys.stderr
                )
                return 1
            code = 0
            for o in outcomes:
                where = f"dataset {o.dataset_id}: size {o.size}, root {o.root[:16]}…"
                if o.status == "refused":
                    code = 1
                    print(
                        f"odometer publish-heads: REFUSED {where}: {o.message}; the published "
                        "head is left as it was",
                        file=sys.stderr,
                    )
                elif o.status == "forked":
                    print(f"odometer publish-heads: FORKED {where}: {o.message}", file=sys.stderr)
                elif o.status != "unchanged":
                    print(f"{o.status} {where}" + (f" ({o.message})" if o.message else ""))
            sys.stdout.flush()
            if args.every is None:
                return code
            time.sleep(args.every)
    except KeyboardInterrupt:
        return code
    finally:
        database.dispose()


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
    publish = sub.add_parser(
        "publish-heads",
        help="write every dataset's signed tree head under a directory for witnesses to poll",
    )
    publish.add_argument(
        "directory", metavar="DIR", help="directory a static web server serves (created)"
    )
    publish.add_argument(
        "--every",
        type=float,
        metavar="SECONDS",
        help="publish again every SECONDS until interrupted (default: once)",
    )
    publish.set_defaults(run=_publish_heads)


def main(argv: Sequence[str] | None = None) -> int:
    """The whole ``odometer`` command line (client commands and every installed plug-in)."""
    from odometer_client.cli import main as odometer

    return odometer(argv)


if __name__ == "__main__":
    raise SystemExit(main())
