"""``odometer verify``: the offline ledger verifier, an auditor's tool.

odometer verify EXPORT [--public-key PEM] [--checkpoints FILE] [--unpinned] [--jobs N]
                [--output INV=FILE …]
    replay a ledger export (JSON, JSONL or CSV) and check its chain (JSON lines are streamed:
    bounded memory); check that a head signed by the operator's key pins its end (its closing
    head, or a checkpoint at its last entry: else it fails, unless ``--unpinned``), against the
    operator's signed checkpoints (truncation, rewriting), and against published outputs (the
    digest and the cell of each one's settlement)
odometer verify EXPORT --since HEAD, odometer verify --since HEAD --head NEW --consistency FILE,
odometer verify-receipt RECEIPTS --head FILE
    an earlier signed tree head extended, receipts checked (:mod:`odometer_core.verify_receipts`)
odometer verify-organisation EXPORT [EXPORT …]
    replay every dataset's export of one organisation, then the organisation cap's decisions
    across them in their organisation order (``odometer_core.ledger.organisation``)

The commands are a plug-in of the client's ``odometer`` command line (entry point group
``odometer.commands``, :mod:`odometer_core.verify_cli`, which holds their arguments and imports
this module only when one of them runs): installing this distribution alone gives an auditor
``odometer verify`` without the server.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from odometer_core.ledger.formats import (
    NotAnExport,
    UnreadableLine,
    iter_jsonl_export,
    load_export,
    load_export_and_head,
    looks_like_jsonl,
)
from odometer_core.verify_walk import light_ledger, walk_chain_file

# The replay imports what it needs when it runs. None of these deferred imports hides a cycle
# (tests/architecture/test_layers.py finds none).
if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from odometer_core.ledger.checkpoints import CheckpointAudit
    from odometer_core.ledger.replay import Replayer

#: From this size on, ``--jobs auto`` walks the hash chain in a second process.
PARALLEL_FROM_BYTES = 16 * 1024 * 1024


class _End:
    """The export's last entry and its closing head, as the entries stream past."""

    def __init__(self) -> None:
        self.last: dict[str, Any] | None = None
        self.heads: list[dict[str, Any]] = []

    @property
    def head(self) -> dict[str, Any] | None:
        return self.heads[-1] if self.heads else None


def _feed_all(
    replayer: Replayer, stream: Iterable[str], audit: CheckpointAudit | None, end: _End
) -> str | None:
    """Feed every entry; the reason the stream stopped early (an unreadable line), if any."""
    try:
        for entry in iter_jsonl_export(stream, strict=True, heads=end.heads):
            replayer.feed(entry)
            end.last = entry
            if audit is not None:
                audit.see(replayer.entries, entry)
    except UnreadableLine as exc:
        return str(exc)
    return None


def chain_walker_pool() -> ProcessPoolExecutor:
    """The second process of ``--jobs 2``: one worker, started by ``spawn`` (no fork of a
    threaded parent), that imports the chain and the export formats alone, not the accounting
    core (:mod:`odometer_core.verify_walk`)."""
    context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=light_ledger)


def verify_jsonl_file(
    path: Path, *, jobs: int, audit: CheckpointAudit | None, end: _End | None = None
) -> dict[str, Any]:
    """Chain walk + replay (+ checkpoint audit) of a JSON-lines export, streamed.

    With ``jobs=2`` the chain is walked by a second process over the same file while this one
    replays. Both stream, so memory stays bounded in each. The walk is the smaller part (a
    10^5-entry export, 2026-11-30: the walk alone 0.7 s of CPU, the whole single-process verify
    3.8 s), so the second process saves at most that much wall time, with a core to spare.
    """
    from odometer_core.ledger.replay import Replayer

    end = end if end is not None else _End()
    replayer = Replayer(check_chain=jobs == 1, strict_json=True)
    if jobs == 1:
        with path.open(encoding="utf-8") as stream:
            stopped = _feed_all(replayer, stream, audit, end)
    else:
        with chain_walker_pool() as pool:
            chain = pool.submit(walk_chain_file, str(path))
            with path.open(encoding="utf-8") as stream:
                stopped = _feed_all(replayer, stream, audit, end)
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


def _load_key(args: argparse.Namespace) -> Ed25519PublicKey | None:
    """``--public-key``: the operator's checkpoint key, which the export's closing head, the
    checkpoints and the witness's signed records are checked against."""
    if args.public_key is None:
        return None
    from odometer_core.ledger.checkpoints import load_public_key

    try:
        return load_public_key(Path(args.public_key).read_bytes())
    except (OSError, ValueError, TypeError) as exc:
        raise SystemExit(f"odometer verify: cannot read the checkpoints or key: {exc}") from None


def _load_audit(args: argparse.Namespace, key: Ed25519PublicKey | None) -> CheckpointAudit | None:
    if args.checkpoints is None:
        return None
    if key is None:
        raise SystemExit("odometer verify: --checkpoints and --public-key go together")
    from odometer_core.ledger.checkpoints import CheckpointAudit, read_checkpoints

    try:
        text = Path(args.checkpoints).read_text("utf-8")
        return CheckpointAudit(read_checkpoints(text), key)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"odometer verify: cannot read the checkpoints or key: {exc}") from None


def _with_end(
    verdict: dict[str, Any],
    args: argparse.Namespace,
    key: Ed25519PublicKey | None,
    end: _End,
    audit: CheckpointAudit | None,
) -> dict[str, Any]:
    """Whether a signed head pins the export's end (``checkpoints.pin_end``): a contradiction
    fails it; an end left unpinned fails it too unless ``--unpinned``, then it is a warning."""
    from odometer_core.ledger.checkpoints import pin_end

    pin = pin_end(
        entries=verdict["entries"],
        last=end.last,
        head=end.head,
        public_key=key,
        checkpoints=audit,
    )
    verdict["end"] = pin.to_json()
    verdict["problems"].extend(pin.problems)
    if pin.reason is not None:
        if args.unpinned:
            verdict.setdefault("warnings", []).append(
                f"the export's end is not pinned: {pin.reason}; entries cut off its end would "
                "go unnoticed"
            )
        else:
            verdict["problems"].append(
                f"{pin.reason} (--unpinned accepts an export whose end nothing pins)"
            )
    verdict["ok"] = not verdict["problems"]
    return verdict


def _say(verdict: dict[str, Any]) -> int:
    """Print the verdict (JSON on stdout, one human line on stderr, then its warnings); the
    exit code."""
    print(json.dumps(verdict, indent=2, ensure_ascii=False))
    try:
        return _say_line(verdict)
    finally:
        for warning in verdict.get("warnings", ()):
            print(f"WARNING: {warning}", file=sys.stderr)


def _say_line(verdict: dict[str, Any]) -> int:
    if verdict["ok"]:
        signed = verdict.get("checkpoints")
        extra = f", {signed['matched']} signed checkpoint(s) match" if signed else ""
        end = verdict.get("end") or {}
        if end.get("pinned"):
            by = "its signed closing head" if end["by"] == "closing head" else "a checkpoint"
            extra += f", the end pinned by {by} (key {end['key_id']})"
        elif end:
            extra += ", the end NOT pinned (--unpinned)"
        print(f"VERIFIED: {verdict['entries']} entries{extra}", file=sys.stderr)
        return 0
    if not verdict["problems"] and verdict.get("forked"):
        for line in verdict["forked"]:
            print(f"FORKED: {line}", file=sys.stderr)
        return 3
    print(f"FAILED: {verdict['problems'][0]}", file=sys.stderr)
    return 1


def run_verify(args: argparse.Namespace) -> int:
    """``odometer verify``; an unreadable export, or a file that is not one, is one line on
    stderr, never a traceback."""
    if args.export is None:
        if args.since is None:
            raise SystemExit(
                "odometer verify: give an EXPORT (or --since with --head and --consistency)"
            )
        from odometer_core.verify_receipts import verify_since_only

        return verify_since_only(args)
    try:
        return _verify_export(args)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SystemExit(f"odometer verify: cannot read {args.export}: {reason}") from None
    except NotAnExport as exc:
        name = "standard input" if args.export == "-" else args.export
        raise SystemExit(
            f"odometer verify: {name} is not a ledger export ({exc}): give the JSON, JSONL or "
            "CSV file `odometer export DATASET -o FILE` writes"
        ) from None


def _load_outputs(args: argparse.Namespace) -> dict[str, Any]:
    """``--output INV=FILE``: each published output, read as strict JSON (no binary floats:
    the ledger's digest is over canonical JSON, which has none)."""
    from odometer_core.ledger.chain import loads_strict

    outputs: dict[str, Any] = {}
    for item in args.output or ():
        inv, sep, path = item.partition("=")
        if not sep or not inv or not path:
            raise SystemExit(f"odometer verify: --output wants INVOCATION_ID=FILE, got {item!r}")
        try:
            outputs[inv] = loads_strict(Path(path).read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise SystemExit(f"odometer verify: cannot read the output {path}: {exc}") from None
    return outputs


def _with_outputs(
    verdict: dict[str, Any], outputs: dict[str, Any], entries: Iterable[dict[str, Any]]
) -> dict[str, Any]:
    """The verdict with the published outputs matched against their settle entries."""
    if not outputs:
        return verdict
    from odometer_core.ledger.outputs import check_outputs

    found = check_outputs(entries, outputs)
    for problems in found.values():
        verdict["problems"].extend(problems)
    verdict["outputs"] = {"checked": len(found), "matched": sum(not p for p in found.values())}
    verdict["ok"] = not verdict["problems"]
    return verdict


def _verify_export(args: argparse.Namespace) -> int:
    from odometer_core.ledger.replay import replay

    key = _load_key(args)
    audit = _load_audit(args, key)
    outputs = _load_outputs(args)
    end = _End()
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
            verdict = verify_jsonl_file(path, jobs=jobs, audit=audit, end=end)
            if outputs:  # a second streamed pass, for the few invocations named
                # an unreadable line is already in the replay's verdict (not ok)
                with path.open(encoding="utf-8") as stream, suppress(UnreadableLine):
                    verdict = _with_outputs(
                        verdict, outputs, iter_jsonl_export(stream, strict=True)
                    )
            verdict = _with_witness(verdict, args, key, _Streamed(path))
            verdict = _with_end(verdict, args, key, end, audit)
            return _say(_with_since(verdict, args, key, _Streamed(path)))
    text = sys.stdin.read() if args.export == "-" else Path(args.export).read_text("utf-8")
    entries, head = load_export_and_head(text)
    end.last = entries[-1] if entries else None
    end.heads = [head] if head is not None else []
    if audit is None:
        verdict = _with_outputs(replay(entries).to_json(), outputs, entries)
        verdict = _with_witness(verdict, args, key, entries)
        return _say(_with_since(_with_end(verdict, args, key, end, audit), args, key, entries))
    replayer_input = list(entries)
    verdict = replay(replayer_input).to_json()
    for position, entry in enumerate(replayer_input, start=1):
        audit.see(position, entry)
    verdict = _with_outputs(_report(verdict, None, audit), outputs, replayer_input)
    verdict = _with_witness(verdict, args, key, replayer_input)
    verdict = _with_end(verdict, args, key, end, audit)
    return _say(_with_since(verdict, args, key, replayer_input))


def _with_since(
    verdict: dict[str, Any],
    args: argparse.Namespace,
    key: Ed25519PublicKey | None,
    entries: Iterable[dict[str, Any]],
) -> dict[str, Any]:
    """``--since HEAD``: the export's tree extends the signed head held earlier
    (:mod:`odometer_core.verify_receipts`)."""
    if args.since is None:
        return verdict
    from odometer_core.verify_receipts import since

    if key is None:
        raise SystemExit("odometer verify: --since needs --public-key (the operator's key)")
    from odometer_core.verify_receipts import say_since

    found = since(args, key, entries)
    say_since(found)
    verdict["since"] = found.to_json(args.since)
    if found.problems and found.forks:
        # explained by an acknowledged fork: reported as such (exit 3), never a pass
        verdict["forked"] = [f"the head held in {args.since}: {f.says()}" for f in found.forks]
        verdict.setdefault("warnings", []).append(f"--since: {found.problems[0]}")
    else:
        verdict["problems"].extend(found.problems)
    verdict["ok"] = not verdict["problems"] and not verdict.get("forked")
    return verdict


def _with_witness(
    verdict: dict[str, Any],
    args: argparse.Namespace,
    key: Ed25519PublicKey | None,
    entries: Iterable[dict[str, Any]],
) -> dict[str, Any]:
    """``--witness DIR``: the export reaches its dataset's witnessed head, with the same hash
    there (``odometer_core.ledger.witness``; a signed record's signature is checked with
    ``--public-key`` when given)."""
    if args.witness is None:
        return verdict
    from odometer_core.ledger.witness import WitnessAudit, read_directory

    try:
        records = read_directory(args.witness)
    except (OSError, ValueError, KeyError) as exc:
        reason = f"cannot read the witness {args.witness}: {exc}"
        raise SystemExit(f"odometer verify: {reason}") from None
    audit: WitnessAudit | None = None
    count = 0
    for count, entry in enumerate(entries, start=1):
        if audit is None:
            record = records.get(str(entry.get("dataset_id")))
            if record is None:
                verdict["problems"].append(
                    f"the witness holds no head for dataset {entry.get('dataset_id')!r}"
                )
                break
            audit = WitnessAudit(record)
        audit.see(count, entry)
    if audit is not None:
        verdict["problems"].extend(audit.finish(count))
        record = audit.record
        if key is not None and record.signature is not None:
            from odometer_core.ledger.checkpoints import signature_problem

            problem = signature_problem(record.checkpoint(), key)
            if problem is not None:
                verdict["problems"].append(f"witness record of seq {record.seq}: {problem}")
        verdict["witness"] = {
            "seq": record.seq,
            "epoch": record.epoch,
            "signed": record.signature is not None,
            "matched": audit.matched,
        }
    verdict["ok"] = not verdict["problems"]
    return verdict


def _is_jsonl(path: Path) -> bool:
    with path.open(encoding="utf-8") as stream:
        first = next((line for line in stream if line.strip()), "")
    return looks_like_jsonl(first)


class _Streamed:
    """A JSON-lines export read from its file at each pass (bounded memory)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __iter__(self) -> Iterator[dict[str, Any]]:
        with self.path.open(encoding="utf-8") as stream:
            yield from iter_jsonl_export(stream, strict=True)


def _entries(path: Path) -> Iterable[dict[str, Any]]:
    """An export's entries: a JSON-lines file streamed, a JSON or CSV one in memory."""
    return _Streamed(path) if _is_jsonl(path) else load_export(path.read_text("utf-8"))


def _cannot_read(name: str, exc: BaseException) -> SystemExit:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return SystemExit(f"odometer verify-organisation: cannot read {name}: {reason}")


def run_verify_organisation(args: argparse.Namespace) -> int:
    """``odometer verify-organisation``: each export replayed (its chain and decisions), then
    the cap across all of them; the verdict as JSON on stdout, one line on stderr."""
    from odometer_core.ledger.organisation import replay_organisation
    from odometer_core.ledger.replay import Replayer

    ledgers: list[Iterable[dict[str, Any]]] = []
    problems: list[str] = []
    try:
        for name in args.exports:  # each export replayed on its own, streamed when JSON lines
            entries = _entries(Path(name))
            replayer = Replayer(strict_json=isinstance(entries, _Streamed))
            for entry in entries:
                replayer.feed(entry)
            problems += [f"{name}: {p}" for p in replayer.verdict().problems]
            ledgers.append(entries)
        verdict = cast(dict[str, Any], replay_organisation(ledgers).to_json())  # then the cap
    except (OSError, UnicodeDecodeError, ValueError, KeyError, UnreadableLine) as exc:
        raise _cannot_read(name, exc) from None
    verdict["problems"] = problems + verdict["problems"]
    verdict["ok"] = not verdict["problems"]
    verdict["ledgers"] = len(ledgers)
    print(json.dumps(verdict, indent=2, ensure_ascii=False))
    if verdict["ok"]:
        print(
            f"VERIFIED: {verdict['decisions']} cap decisions across {len(ledgers)} ledgers",
            file=sys.stderr,
        )
        return 0
    if not verdict["problems"] and verdict.get("forked"):
        for line in verdict["forked"]:
            print(f"FORKED: {line}", file=sys.stderr)
        return 3
    print(f"FAILED: {verdict['problems'][0]}", file=sys.stderr)
    return 1
