"""Running a client command: the connection options, the service's URL and key, datasets,
organisations and principals named by id or by name, and every failure as one ``error: `` line
on stderr (exit status 2 for what is caught before anything is sent, 1 otherwise)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping, Sequence

import httpx

from odometer_client._cli.options import UsageError, read_options
from odometer_client._cli.output import Output, one_line
from odometer_client._core import DEFAULT_URL, resolve
from odometer_client._sync.client import OdometerClient
from odometer_client.errors import ApiError, OdometerError, TransportError

#: A command: its arguments, a client connected to the service, where it writes; the exit status.
Runner = Callable[[argparse.Namespace, OdometerClient, Output], int]


def common_options() -> argparse.ArgumentParser:
    """The options every client command takes (also before the subcommand: ``cli.main``)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", help="server URL (default $ODOMETER_URL or http://127.0.0.1:8000)")
    common.add_argument("--key", help="API key (default $ODOMETER_API_KEY)")
    common.add_argument("--json", action="store_true", help="machine-readable JSON output")
    common.add_argument(
        "--exact",
        action="store_true",
        help="amounts in full, as the server wrote them (default: the server's text for each)",
    )
    return common


#: What to do when the service cannot be reached (the end of that error's line).
START_HINT = "is it running? Start it with `make run`, or point --url or $ODOMETER_URL at it"


def connection(args: argparse.Namespace) -> tuple[str, str]:
    """The service's URL and API key: ``--url``/``--key`` (``cli.main`` merged those given
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


def unreachable(url: str, exc: TransportError) -> str:
    """The one line of a transport failure: cannot connect, or no answer."""
    cause = exc.__cause__
    reason = re.sub(r"^\[Errno -?\d+\] ", "", str(cause)) if cause is not None else str(exc)
    if isinstance(cause, httpx.ConnectTimeout):
        reason = "timed out"
    if cause is None or isinstance(cause, httpx.ConnectError | httpx.ConnectTimeout):
        return f"cannot reach the service at {url} ({reason.lower()}): {START_HINT}"
    what = type(cause).__name__ + (f": {reason}" if reason else "")
    return (
        f"the service at {url} did not answer ({what}): try again, "
        "and if it persists look at the server's log"
    )


def refused(exc: ApiError) -> str:
    """An error answer in one line: a refusal's summary (``summary.text``: which budget bound,
    what is left, what would fit instead), else the error and its detail (older servers, and
    refusals the server sums up otherwise, e.g. by the blocks that refused)."""
    summary = exc.body.get("summary")
    text = summary.get("text") if isinstance(summary, Mapping) else None
    if isinstance(text, str) and text:
        return text
    hint = ": check --key or $ODOMETER_API_KEY" if exc.status_code == 401 else ""
    return f"{exc}{hint}"


# ---------------------------------------------------------------------------- by id or name
#: An id as the service makes them (``ds_`` and 32 hex digits): used as is, without a lookup.
DATASET_ID = re.compile(r"ds_[0-9a-f]{32}")


def _one_named(kind: str, ref: str, named: Sequence[str]) -> str | None:
    """The one id of the ``named`` (a name's matches); several are an error listing them."""
    if len(named) == 1:
        return named[0]
    if named:
        raise OdometerError(
            f"{len(named)} {kind}s are named {ref!r}: give one of their ids: {', '.join(named)}"
        )
    return None


def dataset_id(client: OdometerClient, ref: str) -> str:
    """A dataset named by id or by its exact name (looked up in ``GET /v1/datasets``: the
    datasets visible to the key). A name matching none or several is an error; an unknown
    reference written like an id (``ds_…``) goes to the server as is (its ``404 NotFound``)."""
    if DATASET_ID.fullmatch(ref):
        return ref
    found = client.list_datasets()
    if any(d.id == ref for d in found):
        return ref
    named = _one_named("dataset", ref, [d.id for d in found if d.name == ref])
    if named is not None:
        return named
    if ref.startswith("ds_"):
        return ref
    raise OdometerError(
        f"no dataset {ref!r} (by id or name) is visible to this key: "
        "`odometer datasets list` shows them"
    )


#: A principal's id as the service makes them (``prn_`` and 32 hex digits).
PRINCIPAL_ID = re.compile(r"prn_[0-9a-f]{32}")


def principal_id(
    client: OdometerClient, ref: str, *, organisation: Callable[[], str | None] | None = None
) -> str:
    """A principal named by id or by its exact name (looked up in ``GET /v1/principals``: the
    principals visible to the key). A name several principals share is narrowed to those of
    ``organisation()`` (the dataset's, for a grant) when that leaves one; else it is an error
    listing their ids, as is a name matching none. An unknown reference written like an id
    (``prn_…``) goes to the server as is (its ``404 NotFound``)."""
    if PRINCIPAL_ID.fullmatch(ref):
        return ref
    found = client.principals()
    if any(p.id == ref for p in found):
        return ref
    named = [p for p in found if p.name == ref]
    if len(named) > 1 and organisation is not None:
        inside = organisation()
        named = [p for p in named if p.organisation_id == inside] or named
    one = _one_named("principal", ref, [p.id for p in named])
    if one is not None:
        return one
    if ref.startswith("prn_"):
        return ref
    raise OdometerError(
        f"no principal {ref!r} (by id or name) is visible to this key: "
        "`odometer principals list` shows them"
    )


def organisation_id(client: OdometerClient, ref: str) -> str:
    """An organisation named by id or by its exact name; an unknown or ambiguous reference is
    an error, never a new organisation."""
    found = client.organisations()
    if any(o.id == ref for o in found):
        return ref
    named = _one_named("organisation", ref, [o.id for o in found if o.name == ref])
    if named is not None:
        return named
    raise OdometerError(f"no organisation {ref!r} (by id or name) is visible to this key")


# ---------------------------------------------------------------------------- running
def command(runner: Runner) -> Callable[[argparse.Namespace], int]:
    """``runner`` as a subcommand: options read, connected, ``DATASET`` resolved to its id,
    and every failure one line on stderr (the server's answer as one line of JSON under
    ``--json``)."""

    def run(args: argparse.Namespace) -> int:
        url = ""
        try:
            read_options(args)
            url, key = connection(args)
            with OdometerClient(url, key) as client:
                if getattr(args, "dataset", None) is not None:  # by id or name: the id
                    args.dataset = dataset_id(client, args.dataset)
                return runner(args, client, Output(sys.stdout, exact=args.exact))
        except ApiError as exc:
            if args.json:
                sys.stderr.write(one_line({"status": exc.status_code, **exc.body}) + "\n")
            else:
                sys.stderr.write(f"error: {refused(exc)}\n")
            return 1
        except TransportError as exc:
            sys.stderr.write(f"error: {unreachable(url, exc)}\n")
            return 1
        except UsageError as exc:
            sys.stderr.write(f"error: {exc}\n")
            return 2
        except OdometerError as exc:
            sys.stderr.write(f"error: {exc}\n")
            return 1

    return run
