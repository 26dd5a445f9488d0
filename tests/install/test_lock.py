"""``requirements.lock`` (``make lock``) installs the server as the three ``pyproject.toml``
files declare it: every third-party dependency they name is pinned, within their ranges, with
its files' hashes, for every platform and Python from 3.11, and nothing of the checkout itself
is in it (``make install-locked`` installs the three distributions from the checkout).

Installing from the file needs the package index (the hashes are of its files), so no test
installs it; ``pip install --require-hashes`` itself refuses a lock missing a dependency."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import metadata

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.client.wheelhouse import ROOT

LOCK = ROOT / "requirements.lock"
OWN = {"privacy-odometer", "privacy-odometer-core", "privacy-odometer-client"}
#: Where the lock must install: Linux, macOS and Windows, each Python from 3.11.
ENVIRONMENTS = [
    {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "sys_platform": platform,
        "platform_system": system,
        "os_name": "nt" if platform == "win32" else "posix",
        "platform_python_implementation": "CPython",
        "implementation_name": "cpython",
        "platform_machine": "x86_64" if platform != "darwin" else "arm64",
    }
    for python in ("3.11", "3.12", "3.13", "3.14")
    for platform, system in (("linux", "Linux"), ("darwin", "Darwin"), ("win32", "Windows"))
]


@dataclass(frozen=True)
class Pin:
    name: str
    version: Version
    marker: Marker | None
    hashes: tuple[str, ...]

    def applies(self, environment: dict[str, str] | None = None) -> bool:
        return self.marker is None or self.marker.evaluate(environment)


def pins() -> list[Pin]:
    logical = re.sub(r"\\\n", " ", LOCK.read_text("utf-8"))
    found = []
    for line in logical.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        requirement, *hashes = line.split("--hash=")
        req = Requirement(requirement.strip())
        (spec,) = req.specifier
        assert spec.operator == "==", line
        found.append(
            Pin(
                canonicalize_name(req.name),
                Version(spec.version),
                req.marker,
                tuple(h.strip() for h in hashes),
            )
        )
    return found


def direct() -> list[Requirement]:
    """The runtime requirements of the three distributions, but each other."""
    reqs = []
    for folder in (ROOT, ROOT / "core", ROOT / "client"):
        project = tomllib.loads((folder / "pyproject.toml").read_text("utf-8"))["project"]
        reqs += [Requirement(r) for r in project["dependencies"]]
    return [r for r in reqs if canonicalize_name(r.name) not in OWN]


def test_lock_says_how_it_was_made_and_leaves_the_checkout_out() -> None:
    head = LOCK.read_text("utf-8").splitlines()[:2]
    assert head[1].strip() == "#    make lock", head
    assert {p.name for p in pins()} & OWN == set()


def test_every_pin_has_its_files_hashes() -> None:
    for pin in pins():
        assert pin.hashes, f"{pin.name}: no hash"
        assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in pin.hashes), pin


def test_every_direct_dependency_is_pinned_within_its_range() -> None:
    locked = pins()
    for req in direct():
        candidates = [p for p in locked if p.name == canonicalize_name(req.name)]
        assert candidates, f"{req} is not in requirements.lock: make lock"
        for pin in candidates:
            assert req.specifier.contains(pin.version, prereleases=True), (
                f"{req}: the lock pins {pin.version}: make lock"
            )


@pytest.mark.parametrize(
    "environment",
    ENVIRONMENTS,
    ids=[f"{e['sys_platform']}-py{e['python_version']}" for e in ENVIRONMENTS],
)
def test_one_pin_of_each_dependency_for_each_platform(environment: dict[str, str]) -> None:
    """Universal: wherever the server installs, each of its dependencies has one version."""
    locked = pins()
    for req in direct():
        applicable = [
            p for p in locked if p.name == canonicalize_name(req.name) and p.applies(environment)
        ]
        assert len(applicable) == 1, (req, applicable)


def test_every_dependency_here_is_pinned_too() -> None:
    """Closed on this interpreter: each dependency (with the extras named) of each pinned
    distribution whose locked version is installed here, read from the installed metadata,
    is pinned too."""
    locked = {p.name: p for p in pins() if p.applies()}
    todo: list[Requirement] = direct()
    seen: set[tuple[str, frozenset[str]]] = set()
    checked = 0
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if (name, frozenset(req.extras)) in seen or not (
            req.marker is None or req.marker.evaluate()
        ):
            continue
        seen.add((name, frozenset(req.extras)))
        assert name in locked, f"{name} (for {req}) is not pinned for this interpreter"
        try:
            if Version(metadata.version(name)) != locked[name].version:
                continue  # another version here: its metadata says nothing of the locked one
        except metadata.PackageNotFoundError:
            continue
        checked += 1
        for text in metadata.requires(name) or []:
            inner = Requirement(text)
            if inner.marker is None or any(
                inner.marker.evaluate({"extra": extra}) for extra in ["", *req.extras]
            ):
                todo.append(Requirement(str(inner).split(";")[0]))
    if not checked:
        pytest.skip("no locked version is installed here (`make install-locked dev` installs them)")


def test_setuptools_is_pinned_to_build_the_checkout_offline() -> None:
    """``make install-locked`` builds ./client, ./core and . without build isolation: with the
    locked setuptools, which builds wheels itself from 70.1 on."""
    (setuptools,) = [p for p in pins() if p.name == "setuptools"]
    assert setuptools.version >= Version("70.1") and setuptools.marker is None
