"""``make lint``'s copied-code check, run as the Makefile runs it, over a small tree written
here: a copy one line longer than ``DUPLICATE_LINES`` fails it (pylint's
``--min-similarity-lines`` reports only copies longer than it), one of ``DUPLICATE_LINES``
passes, and a copy in generated code (the unasync sync client) is left out, as
``docs/development.md`` states."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYLINT = Path(sys.executable).parent / "pylint"


def _make_lint() -> tuple[int, list[str]]:
    """``DUPLICATE_LINES`` and the pylint command of ``make lint`` (without the paths)."""
    makefile = (ROOT / "Makefile").read_text("utf-8")
    threshold = re.search(r"^DUPLICATE_LINES \?= (\d+)$", makefile, re.M)
    command = re.search(r"^\t\$\(BIN\)/pylint ((?:.*\\\n)*.*) \$\(LINTED\)$", makefile, re.M)
    assert threshold is not None and command is not None
    args = command.group(1).replace("\\\n", " ").replace("$(DUPLICATE_LINES)", threshold[1])
    return int(threshold[1]), shlex.split(args)


THRESHOLD, ARGS = _make_lint()


def _copied(lines: int) -> str:
    """A function of ``lines`` distinct statements (none of them an import or a signature,
    which the check does not count)."""
    body = "".join(f"    total = total * {i + 2} + {i}\n" for i in range(lines - 2))
    return f"def f(total: int) -> int:\n    total += 1\n{body}    return total\n"


def _check(tree: Path, copies: dict[str, str]) -> subprocess.CompletedProcess[str]:
    for name, text in copies.items():
        path = tree / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for package in [p for p in path.parents if tree in p.parents]:
            (package / "__init__.py").touch()
        path.write_text(text, "utf-8")
    return subprocess.run(
        [str(PYLINT), *ARGS, *sorted({name.split("/")[0] for name in copies})],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_threshold_is_the_one_the_docs_state() -> None:
    docs = (ROOT / "docs" / "development.md").read_text("utf-8")
    assert f"fails on more than {THRESHOLD} similar lines (`DUPLICATE_LINES`" in docs
    assert f"copied code (over {THRESHOLD} lines)" in docs
    assert f"a copy of {THRESHOLD + 1} lines fails it, one of {THRESHOLD} passes" in docs


@pytest.mark.parametrize("lines,fails", [(THRESHOLD + 1, True), (THRESHOLD, False)])
def test_a_copy_longer_than_the_threshold_fails_the_check(
    tmp_path: Path, lines: int, fails: bool
) -> None:
    code = _copied(lines)
    result = _check(tmp_path, {"app/one.py": code, "app/other.py": code})
    assert (result.returncode != 0) is fails, result.stdout + result.stderr
    pairs = r"Similar lines in 2 files\n==app\.(\w+):\[.*\n==app\.(\w+):"
    flagged = re.findall(pairs, result.stdout)
    assert flagged == ([("one", "other")] if fails else []), result.stdout


def test_generated_code_is_left_out(tmp_path: Path) -> None:
    code = _copied(THRESHOLD + 5)
    generated = "client/odometer_client/_sync/client.py"
    result = _check(tmp_path, {"client/odometer_client/_async/client.py": code, generated: code})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Similar lines" not in result.stdout
