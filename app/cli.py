"""``odometer``: the offline ledger verifier and a few operator commands.

odometer verify EXPORT [--checkpoints FILE --public-key PEM] [--jobs N]
                                  replay a ledger export (JSON, JSONL or CSV) and check its
                                  chain (JSON lines are streamed: bounded memory), and against
                                  the operator's signed checkpoints (truncation, rewriting)
odometer checkpoint-keygen -o FILE
                                  write a checkpoint signing key, print its public key
odometer openapi [-o FILE]        write the OpenAPI document
odometer create-key --principal ID --role ROLE [--organisation ORG]
                                  issue an API key (uses DATABASE_URL)
odometer bootstrap-admin --name NAME
                                  create an admin principal and print its key once
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.ledger.chain import ChainProblem, ChainWalker
from app.ledger.formats import (
    UnreadableLine,
    iter_jsonl_export,
    load_export,
    looks_like_jsonl,
)

# The commands import what they need when they run: ``odometer verify`` must not load the
# server (FastAPI, SQLAlchemy) and its chain-walking process not even the accounting core. None
# of these deferred imports hides a cycle (tests/architecture/test_layers.py finds none).
if TYPE_CHECKING:
    from app.ledger.checkpoints import CheckpointAudit
    from app.ledger.replay import Replayer

#: From this size on, ``--jobs auto`` walks the hash chain in a second process.
PARALLEL_FROM_BYTES = 16 * 1024 * 1024


def walk_chain_file(path: str) -> list[ChainProblem]:
    """The hash-chain defects of a JSON-lines export (the second process of ``verify``).

    Stops quietly at an unreadable line: the replaying process reads the same bytes and
    reports it.
    """
    walker = ChainWalker(strict_json=True)
    problems: list[ChainProblem] = []
    with Path(path).open(encoding="utf-8") as stream:
        try:
            for entry in iter_jsonl_export(stream, strict=True):
                problems.extend(walker.check(entry))
        except UnreadableLine:
            pass
    return problems


def _feed_all(
    replayer: Replayer, stream: Iterable[str], audit: CheckpointAudit | None
) -> str | None:
    """Feed every entry; the reason the stream stopped early (an unreadable line), if any."""
    try:
        for entry in iter_jsonl_export(stream, strict=True):
            replayer.feed(entry)
            if audit is not None:
                audit.see(replayer.entries, entry)
    except UnreadableLine as exc:
        return str(exc)
    return None


def verify_jsonl_file(path: Path, *, jobs: int, audit: CheckpointAudit | None) -> dict[str, Any]:
    """Chain walk + replay (+ checkpoint audit) of a JSON-lines export, streamed.

    With ``jobs=2`` the chain is walked by a second process over the same file while this one
    replays: the two halves of the work take about as long each, and the machine has cores
    to spare. Both stream, so memory stays bounded in each.
    """
    from app.ledger.replay import Replayer

    replayer = Replayer(check_chain=jobs == 1, strict_json=True)
    if jobs == 1:
        with path.open(encoding="utf-8") as stream:
            stopped = _feed_all(replayer, stream, audit)
    else:
        context = multiprocessing.get_context("spawn")  # no fork of a threaded parent
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            chain = pool.submit(walk_chain_file, str(path))
            with path.open(encoding="utf-8") as stream:
                stopped = _feed_all(replayer, stream, audit)
            try:
                problems = chain.result()
            except BrokenProcessPool:  # the helper died (e.g. killed): walk here instead
                problems = walk_chain_file(str(path))
            replayer.add_chain_problems(problems)
    return _report(replayer.verdict().to_json(), stopped, audit)


def _report(
    verdict: dict[str, Any], stopped: str | None, audit: CheckpointAudit | None
) -> dict[str, Any]:
    """The verdict with an unreadable line and the checkpoint audit folded in."""
    problems: list[str] = verdict["problems"]
    if stopped is not None:
        problems.append(stopped)
    if audit is not None:
        checkpoint_problems = audit.finish(verdict["entries"])
        problems.extend(checkpoint_problems)
        verdict["checkpoints"] = audit.summary()
    verdict["ok"] = not problems
    return verdict


def _load_audit(args: argparse.Namespace) -> CheckpointAudit | None:
    if args.checkpoints is None and args.public_key is None:
        return None
    if args.checkpoints is None or args.public_key is None:
        raise SystemExit("odometer verify: --checkpoints and --public-key go together")
    from app.ledger.checkpoints import CheckpointAudit, load_public_key, read_checkpoints

    try:
        key = load_public_key(Path(args.public_key).read_bytes())
        text = Path(args.checkpoints).read_text("utf-8")
        return CheckpointAudit(read_checkpoints(text), key)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"odometer verify: cannot read the checkpoints or key: {exc}") from None


def _say(verdict: dict[str, Any]) -> int:
    """Print the verdict (JSON on stdout, one human line on stderr); the exit code."""
    print(json.dumps(verdict, indent=2, ensure_ascii=False))
    if verdict["ok"]:
        signed = verdict.get("checkpoints")
        extra = f", {signed['matched']} signed checkpoint(s) match" if signed else ""
        print(f"VERIFIED: {verdict['entries']} entries{extra}", file=sys.stderr)
        return 0
    print(f"FAILED: {verdict['problems'][0]}", file=sys.stderr)
    return 1


def _verify(args: argparse.Namespace) -> int:
    from app.ledger.replay import replay

    audit = _load_audit(args)
    if args.export != "-":
        path = Path(args.export)
        with path.open(encoding="utf-8") as stream:
            first = ""
            for first in stream:
                if first.strip():
                    break
        if looks_like_jsonl(first):
            # Streamed: a JSON-lines export of any length is verified in bounded memory.
            jobs = args.jobs
            if jobs == 0:
                big = path.stat().st_size >= PARALLEL_FROM_BYTES
                jobs = 2 if big and (os.cpu_count() or 1) > 1 else 1
            return _say(verify_jsonl_file(path, jobs=jobs, audit=audit))
    text = sys.stdin.read() if args.export == "-" else Path(args.export).read_text("utf-8")
    entries = load_export(text)
    if audit is None:
        return _say(replay(entries).to_json())
    replayer_input = list(entries)
    verdict = replay(replayer_input).to_json()
    for position, entry in enumerate(replayer_input, start=1):
        audit.see(position, entry)
    return _say(_report(verdict, None, audit))


def _checkpoint_keygen(args: argparse.Namespace) -> int:
    """Write a new Ed25519 private key (PEM, mode 0600, never overwritten unless ``--force``)
    and print its public key: that PEM is what auditors pin, out of band."""
    from app.ledger.checkpoints import generate_key_pem, key_fingerprint, public_pem

    path = Path(args.output)
    pem, public_key = generate_key_pem()
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if args.force else os.O_EXCL)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        print(f"odometer: {path} exists (use --force to replace the key)", file=sys.stderr)
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
    verify.add_argument(
        "--checkpoints",
        metavar="FILE",
        help="signed checkpoints (JSON lines or the JSON of GET …/checkpoints) to check the "
        "export against: signatures, (seq, hash) on the chain, no truncation",
    )
    verify.add_argument(
        "--public-key", metavar="PEM", help="the operator's checkpoint public key (PEM)"
    )
    verify.add_argument(
        "--jobs",
        type=int,
        choices=[0, 1, 2],
        default=0,
        help="processes for a JSON-lines export: 2 walks the chain beside the replay, "
        "0 (default) picks 2 for large files on a multi-core machine",
    )
    verify.set_defaults(run=_verify)
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
