"""The installation as the docs give it, tried without a package index.

Once per test session, ``make dist`` runs in a copy of the working tree (so its scratch folders
stay out of the repository) and its three wheels go into a wheelhouse beside every third-party
distribution they need, repacked from this interpreter's installed copies
(``tests/client/wheelhouse.py``). A documented ``pip install`` command then runs verbatim in a
fresh virtual environment, in that copy of the tree, with pip told by its environment to use the
wheelhouse and no index: what it installs is what the command installs, resolved by pip from the
real metadata, and no network is needed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest

from tests.client.wheelhouse import ROOT, closure, repack_installed

#: The repository's three distributions, as ``make dist`` names their wheels.
DISTRIBUTIONS = ("privacy-odometer", "privacy-odometer-core", "privacy-odometer-client")
#: What a copy of the working tree leaves out: version control, virtual environments, build
#: scratch and earlier wheels, caches, databases.
IGNORE = shutil.ignore_patterns(
    ".git",
    ".venv",
    ".venv-*",  # the Makefile's other environments (adapters, Tumult): gigabytes
    "venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
    "test-artifacts",
    "node_modules",
    "*.db",
    "*.db-wal",
    "*.db-shm",
    "*.db-writer.lock",
    ".odometer-admin-key",
    ".odometer-checkpoint-key*",
)


@dataclass(frozen=True)
class Wheels:
    tree: Path  # a copy of the working tree, where `make dist` ran and the docs' commands run
    dist: Path  # tree/dist: the three wheels `make dist` built
    house: Path  # those wheels and every third-party distribution they need (with extras)


def offline_env(house: Path) -> dict[str, str]:
    """This process's environment for a pip that must not reach an index: no configuration file
    (the machine's may name other indexes), no index, the wheelhouse as the only source.

    pip reads a ``--no-X`` option from ``PIP_NO_X`` as the value of the positive option, so
    ``PIP_NO_BUILD_ISOLATION=0`` turns build isolation off (a build uses the environment's own
    setuptools instead of fetching one) and ``PIP_NO_COMPILE=0`` skips byte-compiling."""
    env = {
        k: v
        for k, v in os.environ.items()
        # nothing of this interpreter's environment, of an enclosing make or of pip's settings
        if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV", "MAKE", "MFLAGS"))
    }
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(house),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
        PIP_NO_BUILD_ISOLATION="0",
        PIP_NO_COMPILE="0",
    )
    return env


def copy_tree(target: Path) -> Path:
    shutil.copytree(ROOT, target, ignore=IGNORE)
    return target


def make_dist(tree: Path) -> Path:
    """``make dist`` in ``tree``, with this interpreter's virtual environment as the Makefile's
    (its setuptools builds the wheels: nothing is fetched)."""
    venv = Path(sys.prefix)
    if sys.prefix == sys.base_prefix or not (venv / "bin" / "python").exists():
        pytest.skip("make dist needs the suite to run in a virtual environment (make dev)")
    proc = subprocess.run(
        ["make", "-s", "-C", str(tree), "dist", f"VENV={venv}"],
        env=offline_env(tree / "no-wheelhouse"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"make dist failed:\n{proc.stdout}{proc.stderr}"
    return tree / "dist"


def third_party() -> list[str]:
    """The runtime requirements of the three distributions, the client's documented
    ``opendp`` extra, pip and setuptools (``fresh_env``)."""
    needed = ["opendp", "setuptools", "pip"]
    for name in DISTRIBUTIONS:
        needed += [r for r in metadata.requires(name) or [] if "extra ==" not in r]
    return needed


def build_wheels(root: Path) -> Wheels:
    root.mkdir(parents=True, exist_ok=True)
    tree = copy_tree(root / "tree")
    dist = make_dist(tree)
    house = root / "house"
    house.mkdir()
    for wheel in dist.glob("*.whl"):
        shutil.copy2(wheel, house)
    for name in sorted(closure(third_party()) - set(DISTRIBUTIONS)):
        repack_installed(name, house)
    return Wheels(tree, dist, house)


_BUILT: dict[Path, Wheels] = {}


def shared_wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    """One tree copy, ``make dist`` and wheelhouse per test session, whichever test asks first
    (``tests/client/test_distribution.py`` and ``tests/install``)."""
    base = tmp_path_factory.getbasetemp()
    if base not in _BUILT:
        _BUILT[base] = build_wheels(base / "install-wheels")
    return _BUILT[base]


def run_documented(command: str, venv: Path, wheels: Wheels) -> subprocess.CompletedProcess[str]:
    """A documented shell command, verbatim, in the copy of the tree, with ``venv`` activated
    and pip offline."""
    env = offline_env(wheels.house)
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        cwd=wheels.tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def fresh_env(venv: Path, house: Path, *, build: bool) -> Path:
    """A new virtual environment (no system site packages) with pip, and with a current
    setuptools when ``build`` (what pip's build isolation would fetch from an index to build
    ``./client``, ``./core`` and ``.``); its interpreter.

    ``venv`` without pip, then pip from the wheelhouse (this environment's own, as ``make``'s
    ``.venv`` upgrades it) installed by this interpreter's pip: a third of the time of
    ``ensurepip``, which byte-compiles its bundled pip."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    python = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "pip"]
        + (["setuptools>=70.1"] if build else []),
        env=offline_env(house),
        check=True,
        capture_output=True,
        timeout=300,
    )
    return python
