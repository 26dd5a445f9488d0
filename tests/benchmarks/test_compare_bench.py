"""``python -m benchmarks compare``: two builds, rounds in alternating order, the medians of the
per-round ratios. The in-process workload runs whole here at a tiny size (ten probe processes);
the HTTP workload starts two servers, a long test."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from benchmarks import compare
from benchmarks.__main__ import main as entry_point


def test_the_builds_take_turns_going_first() -> None:
    assert compare.orders(5) == [[0, 1], [1, 0], [0, 1], [1, 0], [0, 1]]


def test_the_ratio_is_the_median_of_the_rounds_ratios_not_a_ratio_of_medians() -> None:
    # round 0 ran on a fast machine, rounds 1-4 on a slower one: B is 10 % faster in each
    a = [100.0, 50.0, 52.0, 54.0, 56.0]
    rows = [
        {"round": r, "build": build, "throughput": x, "cpu_ms": 1000 / x, "errors": 0}
        for r, x_a in enumerate(a)
        for build, x in (("a", x_a), ("b", x_a * 1.1))
    ]
    summary = compare.summarise(rows, "a", "b")["throughput"]
    assert summary["a"] == 54.0 and summary["b"] == pytest.approx(59.4)
    assert summary["ratio"] == pytest.approx(1.1)
    assert summary["low"] == pytest.approx(1.1) and summary["high"] == pytest.approx(1.1)
    assert compare.summarise(rows, "a", "b")["cpu_ms"]["ratio"] == pytest.approx(1 / 1.1)
    builds = [compare.Build(k, k, Path("."), f"`{k}`") for k in ("a", "b")]
    text = compare.render(rows, builds, "heading", "http")
    assert "| registrations/s | 54 | 59 | 1.100 (1.100–1.100) |" in text
    assert "| server CPU ms per registration | 18.519 | 16.835 | 0.909 (0.909–0.909) |" in text


def test_a_git_ref_is_its_commits_tree(tmp_path: Path) -> None:
    build = compare.resolve("base=HEAD", tmp_path)
    head = subprocess.run(
        ["git", "-C", str(compare.ROOT), "rev-parse", "--short=7", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert build.label == "base" and build.described == f"`HEAD` ({head})"
    assert (build.root / "app" / "main.py").is_file()
    assert (build.root / "core" / "odometer_core" / "__init__.py").is_file()
    with pytest.raises(SystemExit, match="neither a directory nor a git ref"):
        compare.resolve("no-such-ref-or-directory", tmp_path)


def test_fewer_than_five_rounds_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        compare.main([".", ".", "--rounds", "4"])
    assert "at least 5" in capsys.readouterr().err


def test_a_tiny_in_process_comparison_with_a_checkpoint_key(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """This checkout against its own last commit through the entry point: five rounds of 20
    registrations per build, each in a fresh process on a fresh copy of the build's database,
    with a checkpoint key made for the run. One run for both: ten probe processes took 40-120 s
    (a smoke test of each path cost two such runs). Without a key the probes differ only by the
    variable :func:`compare.key_env` leaves out (checked by
    ``test_a_checkpoint_key_is_made_for_the_run_or_given``); that a probe given the key signs,
    by ``tests/benchmarks/test_write_path_bench.py``."""
    argv = ["compare", "head=HEAD", "here=.", "--workload", "register", "--count", "20"]
    assert entry_point([*argv, "--checkpoint-key"]) == 0
    out = capsys.readouterr().out
    assert "with a checkpoint key (receipts signed where the build gives them)" in out
    measured = [line for line in out.splitlines() if line.startswith('{"round"')]
    assert [line.split('"build": "')[1].split('"')[0] for line in measured] == [
        "head", "here", "here", "head", "head", "here", "here", "head", "head", "here",
    ]  # fmt: skip
    assert "| | head | here | here / head: median of the per-round ratios (range) |" in out
    row = next(line for line in out.splitlines() if line.startswith("| CPU ms per registration"))
    cells = row.split(" | ")
    assert 0.01 < float(cells[1]) < 100 and 0.01 < float(cells[2]) < 100
    assert "Errors (non-2xx or transport): **0**." in out


@pytest.mark.skipif(
    os.environ.get("ODOMETER_LONG_TESTS") != "1",
    reason="starts a server per build; ODOMETER_LONG_TESTS=1 runs it",
)
def test_a_tiny_http_comparison(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["a=.", "b=.", "--clients", "2", "--workers", "1", "--duration", "0.3"]
    assert compare.main([*argv, "--warmup", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "| registrations/s | " in out and "| server CPU ms per registration | " in out
    assert "Errors (non-2xx or transport): **0**." in out


def test_a_checkpoint_key_is_made_for_the_run_or_given(tmp_path: Path) -> None:
    from odometer_core.ledger.checkpoints import load_private_key

    assert compare.key_env(None, tmp_path) == {}
    made = compare.key_env("", tmp_path)["ODOMETER_CHECKPOINT_KEY"]
    load_private_key(Path(made).read_bytes())  # an Ed25519 PEM both builds read
    assert compare.key_env(made, tmp_path) == {"ODOMETER_CHECKPOINT_KEY": made}
    with pytest.raises(SystemExit, match="not a file"):
        compare.key_env(str(tmp_path / "missing.pem"), tmp_path)
