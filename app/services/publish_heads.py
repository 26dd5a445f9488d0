"""Heads published to a directory (``odometer publish-heads DIR``): every dataset's signed tree
head written where any static web server can serve it to witnesses, the way transparency logs
publish a ``checkpoint`` file.

Layout (``docs/ledger.md``, *Publishing heads to a directory*)::

    DIR/heads.json                              the index: dataset, size, root, paths
    DIR/odometer/ledger/<dataset id>/checkpoint the signed head (c2sp.org/tlog-checkpoint),
                                                as ``…/ledger/checkpoint`` serves it
    DIR/odometer/ledger/<dataset id>/cosigned   the last head the witness of ledger heads
                                                cosigned (when the server has one)

A file is replaced only when its content changes, atomically (a temporary file in the same
directory, ``fsync``, ``rename``, the directory ``fsync``-ed): a reader sees the old head or
the new, never a torn one. A published head is replaced only by one that **extends** it: a
larger tree whose RFC 9162 consistency proof (from the database's stored roots,
:func:`app.services.proofs.consistency_proof`) verifies against the *published* root, not the
database's idea of it. A smaller tree, or the same size with another root, or a proof that
fails, is refused for that dataset (its files are left as they are) — unless the dataset's
ledger holds an acknowledged loss (``loss_acknowledged``, :func:`app.services.heads.forks`)
that was not there when the head was published and that gave up entries the published head
held: then the new head is published and the acknowledgement named. The index records, per
dataset, the acknowledgements its published head already accounts for.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sqlalchemy import select

from app.db.models import Dataset
from app.db.uow import Database, UnitOfWork
from app.services import heads, proofs
from app.services.errors import ServiceError
from app.services.principals import Principal, Role
from odometer_core.ledger.cosign import Fork, fork_of
from odometer_core.ledger.merkle import EMPTY_ROOT, verify_consistency
from odometer_core.ledger.receipts import ReceiptError, open_head, origin
from odometer_core.ledger.witness import CosignedHeads

INDEX: Final = "heads.json"
INDEX_TYPE: Final = "odometer.heads/v1"
CHECKPOINT: Final = "checkpoint"
COSIGNED: Final = "cosigned"
#: a dataset id used as a path segment (ids are ``ds_<hex>``; any other is not published)
_SAFE_ID: Final = re.compile(r"[A-Za-z0-9_.-]{1,200}")
#: the operator, as the proofs' visibility rule asks (every dataset)
_OPERATOR = Principal("publish-heads", Role.ADMIN, None)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a run did for one dataset: ``published`` (a new head written), ``unchanged``,
    ``cosigned`` (the head unchanged, a newer cosigned head written), ``forked`` (a head
    that does not extend the published one, written because an acknowledged loss explains
    it) or ``refused`` (nothing written); ``message`` says why."""

    dataset_id: str
    status: str
    size: int
    root: str
    message: str = ""


def note_path(dataset_id: str) -> str:
    """The path of a dataset's signed head under the directory (``/``-separated)."""
    return f"{origin(dataset_id)}/{CHECKPOINT}"


def write_atomically(path: Path, data: bytes) -> bool:
    """Write ``data`` at ``path`` unless it holds exactly that already (``False``): a
    temporary file in the same directory, written, ``fsync``-ed, renamed over ``path``, and
    the directory ``fsync``-ed (mode 0644: a web server serves it)."""
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), 0o644)
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return True


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One publisher at a time per directory (``DIR/.publish.lock``, ``flock``)."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / ".publish.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ServiceError(f"{directory}: another publish-heads writes there") from None
        yield
    finally:
        os.close(fd)


def _index(directory: Path) -> dict[str, dict[str, Any]]:
    """The published index's entries by dataset (none when there is no index yet)."""
    try:
        doc = json.loads((directory / INDEX).read_bytes())
        if not isinstance(doc, dict) or doc.get("type") != INDEX_TYPE:
            raise ValueError
        return {str(h["dataset_id"]): dict(h) for h in doc.get("heads") or []}
    except FileNotFoundError:
        return {}
    except (ValueError, KeyError, TypeError):
        raise ServiceError(
            f"{directory / INDEX} is not an {INDEX_TYPE} index (move it away to rebuild it)"
        ) from None


def _forks(uow: UnitOfWork, dataset_id: str) -> list[Fork]:
    """The dataset's acknowledged losses (each proven in its current head by the service)."""
    return [fork_of(f["entry"]) for f in heads.forks(uow, _OPERATOR, dataset_id)["forks"]]


def _extends(
    uow: UnitOfWork, dataset_id: str, old: tuple[int, bytes], new: tuple[int, bytes]
) -> str:
    """Why the tree ``new`` (size, root) does not extend the published ``old`` ("" if it
    does): the consistency proof is the database's, checked against the published root."""
    (m, old_root), (n, new_root) = old, new
    if n < m:
        return f"the database's head (size {n}) is smaller than the published one (size {m})"
    if n == m:
        return (
            ""
            if new_root == old_root
            else (
                f"the database's tree of size {n} has another root ({new_root.hex()[:16]}…) than "
                f"the published head ({old_root.hex()[:16]}…)"
            )
        )
    if m == 0:
        return "" if old_root == EMPTY_ROOT else "the published empty head has a root"
    try:
        made = proofs.consistency_proof(uow, _OPERATOR, dataset_id, m, n)
    except RuntimeError as error:  # the stored roots disagree with the entries
        return f"no consistency proof from size {m} to {n}: {error}"
    if made.new.root != new_root or not verify_consistency(m, n, old_root, new_root, made.path):
        return (
            f"the database's tree of size {n} does not extend the published head of size {m} "
            f"(the consistency proof fails against the published root): the ledger was "
            f"rewritten at or before entry {m}"
        )
    return ""


def publish(database: Database, directory: Path, cosigned: CosignedHeads | None) -> list[Outcome]:
    """Publish every dataset's signed head under ``directory`` (see the module's docstring);
    the outcome of each dataset. :class:`app.services.checkpoints.CheckpointsDisabled` without
    a checkpoint key."""
    signer = database.signer
    if signer is None:
        raise heads.disabled()
    public_key = signer.private_key.public_key()
    uow = UnitOfWork(database)
    with _locked(directory):
        index = _index(directory)
        with uow.read_only():
            rows = uow.session.execute(
                select(Dataset.id, Dataset.last_seq, Dataset.merkle_json).order_by(Dataset.id)
            ).all()
        outcomes: list[Outcome] = []
        for dataset_id, size, doc in rows:
            view = heads.head_view(signer, cosigned, dataset_id, size, doc)
            outcome, entry = _publish_one(uow, directory, view, index.get(dataset_id), public_key)
            outcomes.append(outcome)
            if entry is not None:
                index[dataset_id] = entry
        document = {
            "type": INDEX_TYPE,
            "witness_vkey": None if cosigned is None else cosigned.verifier.vkey(),
            "heads": [index[d] for d in sorted(index)],
        }
        data = (json.dumps(document, indent=1, sort_keys=True) + "\n").encode()
        write_atomically(directory / INDEX, data)
    return outcomes


def _entry(dataset_id: str, size: int, root: str, folder: Path, forks: list[str]) -> dict[str, Any]:
    """A dataset's entry in the index: what its files under ``folder`` hold."""
    cosigned = (folder / COSIGNED).exists()
    return {
        "dataset_id": dataset_id,
        "size": size,
        "root": root,
        "checkpoint": note_path(dataset_id),
        "cosigned": f"{origin(dataset_id)}/{COSIGNED}" if cosigned else None,
        "forks": forks,
    }


def _publish_one(
    uow: UnitOfWork,
    directory: Path,
    view: heads.PublishedHead,
    indexed: dict[str, Any] | None,
    public_key: Any,
) -> tuple[Outcome, dict[str, Any] | None]:
    """One dataset: its outcome, and its index entry (``None``: keep the one there is)."""
    dataset_id, size, root = view["dataset_id"], view["size"], view["root"]
    if _SAFE_ID.fullmatch(dataset_id) is None or set(dataset_id) == {"."}:
        why = "its id is not a safe path segment: not published"
        return Outcome(dataset_id, "refused", size, root, why), None
    folder = directory / origin(dataset_id)
    status, message = "published", ""
    known = [] if indexed is None else list(indexed.get("forks") or [])
    try:
        held = (folder / CHECKPOINT).read_text("utf-8")
    except FileNotFoundError:
        held = None
    if held is not None:
        try:
            old = open_head(held, public_key)
        except ReceiptError as error:
            why = f"the published head {folder / CHECKPOINT} is not this key's: {error}"
            return Outcome(dataset_id, "refused", size, root, why), None
        why = _extends(uow, dataset_id, (old.size, old.root), (size, bytes.fromhex(root)))
        if why:
            new = [
                f
                for f in _forks(uow, dataset_id)
                if f.kept < old.size and f.entry_hash not in known
            ]
            if not new:
                # the index keeps describing the files left as they were
                kept = _entry(dataset_id, old.size, old.root.hex(), folder, known)
                return Outcome(dataset_id, "refused", size, root, why), (
                    None if indexed is not None else kept
                )
            status = "forked"
            message = f"{why}; published: {'; '.join(f.says() for f in new)}"
        elif old.size == size:
            status = "unchanged"
    if held is None or indexed is None or status == "forked":
        known = [f.entry_hash for f in _forks(uow, dataset_id)]
    if status != "unchanged":
        write_atomically(folder / CHECKPOINT, view["note"].encode())
    cosigned = view["cosigned"]
    wrote = cosigned is not None and write_atomically(folder / COSIGNED, cosigned["note"].encode())
    if wrote and cosigned is not None and status == "unchanged":
        status = "cosigned"
        message = f"the witness of ledger heads cosigned size {cosigned['size']}"
    entry = _entry(dataset_id, size, root, folder, known)
    return Outcome(dataset_id, status, size, root, message), entry
