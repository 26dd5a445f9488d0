"""The ``odometer`` command line run as its console script runs it, without starting an
interpreter per run: one process imports the command line once, then forks a child per run
whose argv, environment, stdin (``/dev/null``), stdout and stderr (files, read back as
``subprocess.run(..., capture_output=True, text=True)`` reads pipes) are the run's, and which
ends as the interpreter ends ``sys.exit(main())``: ``SystemExit``'s status, or an uncaught
exception's traceback on stderr and status 1.

Each fresh interpreter cost about 0.3 s of CPU in imports; ``tests/client/test_cli_errors.py``
started some fifty of them. A run is answered by the forking process (started once per
:class:`ForkedCli`) over its stdin and stdout, one JSON line each way."""

from __future__ import annotations

import importlib
import io
import json
import locale
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: The console script's callable (``[project.scripts]``: ``odometer``)
ENTRY = "odometer_client.cli:main"


def _exit_status(code: object) -> int:
    """The status the interpreter exits with on ``SystemExit(code)`` (printing a non-integer
    code to stderr, as it does)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _child(request: dict[str, Any], main: Any) -> int:
    os.environ.clear()
    os.environ.update(request["env"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    encoding = request["encoding"]
    unbuffered = bool(request["env"].get("PYTHONUNBUFFERED"))
    # as the interpreter opens them for a file: stdout block-buffered, stderr line-buffered
    sys.stdin = open(0, encoding=encoding, closefd=False)  # noqa: SIM115
    sys.stdout = io.TextIOWrapper(
        open(1, "wb", buffering=0 if unbuffered else -1, closefd=False),  # noqa: SIM115
        encoding=encoding,
        write_through=unbuffered,
    )
    sys.stderr = io.TextIOWrapper(
        open(2, "wb", buffering=0, closefd=False),  # noqa: SIM115
        encoding=encoding,
        errors="backslashreplace",
        line_buffering=True,
    )
    sys.argv = [request["argv0"], *request["argv"]]
    try:
        raise SystemExit(main())
    except SystemExit as exit_:
        status = _exit_status(exit_.code)
    except BaseException:  # the interpreter's own handling of what escapes
        traceback.print_exc()
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            status = 120  # what the interpreter exits with when flushing stdout fails
    return status


def serve(entry: str, preload: Sequence[str]) -> None:
    """The forking process: a request per line on stdin; answers the child's pid, then its
    exit status, each on a line of stdout. ``preload``: modules the commands import when they
    run (the verifier's numpy and scipy cost about 0.5 s of CPU a run), imported once here."""
    module, _, name = entry.partition(":")
    main = getattr(importlib.import_module(module), name)
    for preloaded in preload:
        importlib.import_module(preloaded)
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                status = _child(request, main)
            finally:
                os._exit(status)
        channel.write(f"{pid}\n")
        _, raw = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(raw)
        channel.write(f"{code}\n")


class ForkedCli:
    """Runs the command line in forked children of one process that imported it."""

    def __init__(
        self, env: Mapping[str, str], entry: str = ENTRY, preload: Sequence[str] = ()
    ) -> None:
        self._env = dict(env)
        self._dir = Path(tempfile.mkdtemp(prefix="forked-cli-"))
        self._server = subprocess.Popen(
            [sys.executable, __file__, entry, *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=self._env,
            bufsize=0,
        )
        self._runs = 0

    def _line(self, deadline: float) -> str:
        assert self._server.stdout is not None
        data = b""
        while not data.endswith(b"\n"):
            ready, _, _ = select.select([self._server.stdout], [], [], deadline - time.monotonic())
            if not ready:
                raise TimeoutError
            chunk = os.read(self._server.stdout.fileno(), 1)
            if not chunk:
                raise RuntimeError("the forking process ended")
            data += chunk
        return data.decode()

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float = 60,
        argv0: str = str(Path(sys.executable).parent / "odometer"),
    ) -> subprocess.CompletedProcess[str]:
        """What ``subprocess.run([odometer, *argv], capture_output=True, text=True)`` returns."""
        assert self._server.stdin is not None
        self._runs += 1
        out, err = self._dir / f"{self._runs}.out", self._dir / f"{self._runs}.err"
        encoding = locale.getpreferredencoding(False)
        request = {
            "argv0": argv0,
            "argv": list(argv),
            "env": dict(self._env if env is None else env),
            "stdout": str(out),
            "stderr": str(err),
            "encoding": encoding,
        }
        self._server.stdin.write((json.dumps(request) + "\n").encode())
        deadline = time.monotonic() + timeout
        pid = int(self._line(deadline))
        try:
            code = int(self._line(deadline))
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            self._line(time.monotonic() + 10)
            raise subprocess.TimeoutExpired([argv0, *argv], timeout) from None
        return subprocess.CompletedProcess(
            [argv0, *argv],
            code,
            out.read_text(encoding),
            err.read_text(encoding),
        )

    def close(self) -> None:
        assert self._server.stdin is not None and self._server.stdout is not None
        self._server.stdin.close()
        self._server.wait(timeout=30)
        self._server.stdout.close()
        shutil.rmtree(self._dir, ignore_errors=True)


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2:])
