"""A client generated in another language type-checks against the committed OpenAPI document.

openapi-typescript (the npm registry's most used OpenAPI → TypeScript generator) turns
``openapi/openapi.json`` into ``schema.d.ts``; ``generated_client/register_and_read_status.ts``
types a registration's body with it (a Gaussian declaration), reads the 201 response's
``charge`` as one of the four typed amounts (narrowed by its keys) and a dataset's
``status.summary.guarantee.epsilon`` as text, and ``tsc --noEmit --strict`` must accept it.
Its ``@ts-expect-error`` lines (a misspelt field, a ``composed`` without its mechanisms, an
``epsilon`` read from a (ρ, δ) amount, a half amount, decimal text read as a number) must each
fail to type-check: a directive with no error under it is itself an error, so loose types (an
untyped map, ``unknown``) fail the test.

Shown able to fail: with the document as it was before the amounts were typed (``charge`` a
free-form object, ``composed`` with every field optional), tsc reports "Property
'EpsilonDeltaAmount' does not exist", "'amount.orders' is of type 'unknown'" and two unused
``@ts-expect-error`` directives.

The tools are pinned and installed once per session from the npm registry (``npm install``
in a temporary directory); the test is skipped, saying why, only when npm is missing or cannot
reach the registry.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import ROOT

FIXTURE = Path(__file__).resolve().parent / "generated_client"
TOOLS = ("openapi-typescript@7.13.0", "typescript@5.9.3")
#: What npm says when the registry cannot be reached (DNS, refused, reset, timed out, offline).
NETWORK = re.compile(
    r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|"
    r"network request to|request to https?://\S+ failed|getaddrinfo|ERR_SOCKET_TIMEOUT",
)


def _run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "npm_config_update_notifier": "false", "npm_config_fund": "false"}
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="session")
def node_tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory whose node_modules holds the pinned generator and compiler."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("npx") is None:
        pytest.skip("npm is not installed: the generated TypeScript client cannot be built")
    where = tmp_path_factory.mktemp("generated_client")
    (where / "package.json").write_text('{"private": true}\n', "utf-8")
    installed = _run([npm, "install", "--no-audit", "--no-fund", *TOOLS], where)
    if installed.returncode != 0:
        output = installed.stdout + installed.stderr
        if NETWORK.search(output):
            pytest.skip(f"npm cannot reach its registry to install {', '.join(TOOLS)}")
        pytest.fail(f"npm install {' '.join(TOOLS)} failed:\n{output[-3000:]}")
    return where


def test_typescript_client_types_a_register_and_read_status_call(node_tools: Path) -> None:
    for name in ("tsconfig.json", "register_and_read_status.ts"):
        shutil.copy(FIXTURE / name, node_tools / name)
    npx = shutil.which("npx")
    assert npx is not None
    document = str(ROOT / "openapi" / "openapi.json")
    generated = _run([npx, "openapi-typescript", document, "-o", "schema.d.ts"], node_tools)
    assert generated.returncode == 0, generated.stdout + generated.stderr
    schema = (node_tools / "schema.d.ts").read_text("utf-8")
    # the amounts are named types, not free-form maps
    assert "EpsilonDeltaAmount: {" in schema and "mu_squared: string;" in schema
    checked = _run([npx, "tsc", "--noEmit", "--strict", "-p", "tsconfig.json"], node_tools)
    assert checked.returncode == 0, checked.stdout + checked.stderr
