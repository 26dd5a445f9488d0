"""A local wheelhouse for installing the repository's distributions into fresh virtual
environments without a package index: the distributions are built from the source tree, and
their third-party dependencies are repacked from this interpreter's installed copies (a wheel is
a zip of the files an installation's RECORD lists). ``pip install --no-index --find-links``
then resolves the real dependency metadata offline."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.tags import sys_tags
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
#: The repository's own distributions and their source folders.
LOCAL = {
    "privacy-odometer-client": ROOT / "client",
    "privacy-odometer-core": ROOT / "core",
}


def build_local(names: list[str], out: Path) -> None:
    """Wheels of the repository's distributions, built from a copy of the source tree (no
    index; the build's scratch folders stay out of the repository)."""
    sources = out / "src"
    for name in names:
        shutil.copytree(
            LOCAL[name],
            sources / name,
            ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".venv"),
        )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(out),
            *(str(sources / n) for n in names),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )


def closure(requirements: list[str]) -> set[str]:
    """The installed third-party distributions that ``requirements`` need, transitively
    (markers evaluated for this interpreter, extras followed when named)."""
    todo = [Requirement(r) for r in requirements]
    seen: set[str] = set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in {canonicalize_name(n) for n in LOCAL}:
            continue
        if name in seen and not req.extras:
            continue
        seen.add(name)
        for text in metadata.requires(req.name) or []:
            inner = Requirement(text)
            wanted = ["", *sorted(req.extras)]
            if inner.marker is None or any(
                inner.marker.evaluate({"extra": extra}) for extra in wanted
            ):
                todo.append(inner)
    return seen


def repack_installed(name: str, out: Path) -> Path:
    """A wheel of an installed distribution, from the files its RECORD lists, named with a tag
    this interpreter installs."""
    dist = metadata.distribution(name)
    files = [f for f in dist.files or [] if not str(f).startswith("..")]
    wheel_text = next(
        (f.read_text() for f in files if f.name == "WHEEL" and ".dist-info" in str(f)), ""
    )
    tags = re.findall(r"^Tag: (.+)$", wheel_text or "", flags=re.M) or ["py3-none-any"]
    # a wheel built for several tags (Deprecated's py2 and py3) is named after one this
    # interpreter installs: pip skips a wheel whose name has none
    supported = {str(tag) for tag in sys_tags()}
    tag = next((t for t in tags if t in supported), tags[0])
    dist_name = re.sub(r"[^\w.]+", "_", dist.metadata["Name"])
    target = out / f"{dist_name}-{dist.version}-{tag}.whl"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as wheel:
        for f in files:
            path = Path(str(f.locate()))
            if path.is_file() and "__pycache__" not in f.parts:
                wheel.write(path, str(f))
    return target


def wheelhouse(distributions: list[str], out: Path) -> Path:
    """Everything ``pip install --no-index --find-links out`` needs for ``distributions``
    (of the repository's own: the client and the core)."""
    out.mkdir(parents=True, exist_ok=True)
    build_local(distributions, out)
    needed: list[str] = []
    for name in distributions:
        needed.extend(metadata.requires(name) or [])
    for name in sorted(closure([r for r in needed if "extra ==" not in r])):
        repack_installed(name, out)
    return out


def fresh_venv(path: Path) -> Path:
    """A new virtual environment (with pip); its interpreter."""
    subprocess.run(
        [sys.executable, "-m", "venv", str(path)], check=True, capture_output=True, timeout=120
    )
    return path / "bin" / "python"


def pip_install(python: Path, house: Path, *names: str) -> None:
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--disable-pip-version-check",
            "--find-links",
            str(house),
            *names,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )


def installed(python: Path) -> set[str]:
    """Canonical names of the distributions installed in an environment."""
    proc = subprocess.run(
        [
            str(python),
            "-I",  # isolated: no current directory, no PYTHONPATH on sys.path
            "-c",
            "from importlib import metadata\n"
            "print('\\n'.join(sorted({d.metadata['Name'] for d in metadata.distributions()})))",
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return {canonicalize_name(n) for n in proc.stdout.split()}
