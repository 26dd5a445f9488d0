"""``docker-compose.yml``'s ``replicas`` profile, read without a Docker engine: the replicas
are one service configuration on one database, their connection pools fit PostgreSQL's
connection limit, and the proxy mounts ``deploy/haproxy.cfg``, whose backend is exactly the
replicas, checked round robin on ``/readyz``, set up as the proxy that
``tests/concurrency/test_replicas_behind_proxy.py`` runs the races through."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # PyYAML: a dependency of schemathesis (dev)

from tests.concurrency.proxy import haproxy, haproxy_config, unavailable_reason
from tests.support import ROOT

COMPOSE = ROOT / "docker-compose.yml"
PROFILE = "replicas"
#: where the official haproxy image reads its configuration
HAPROXY_CFG = "/usr/local/etc/haproxy/haproxy.cfg"
#: the port the image serves on (Dockerfile: PORT)
SERVICE_PORT = 8000
#: PostgreSQL's defaults: max_connections, superuser_reserved_connections
MAX_CONNECTIONS, RESERVED = 100, 3
#: the service's pool defaults per worker process (app/settings.py)
POOL_DEFAULTS = {"ODOMETER_DB_POOL_SIZE": 10, "ODOMETER_DB_MAX_OVERFLOW": 10}


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text("utf-8"))
    return loaded


def _profile(services: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in services.items() if PROFILE in s.get("profiles", [])}


def _replicas(services: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in _profile(services).items() if "haproxy" not in s.get("image", "")}


def _proxy(services: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    proxies = [(n, s) for n, s in _profile(services).items() if "haproxy" in s.get("image", "")]
    assert len(proxies) == 1, proxies
    return proxies[0]


def _mounted_config(proxy: dict[str, Any]) -> Path:
    mounts = [v.split(":") for v in proxy["volumes"]]
    sources = [source for source, target, *_ in mounts if target == HAPROXY_CFG]
    assert len(sources) == 1, proxy["volumes"]
    path = (COMPOSE.parent / str(sources[0])).resolve()
    assert path.is_file(), path
    return path


def _sections(config: str) -> dict[str, list[str]]:
    """``haproxy.cfg`` as ``{"backend replicas": [directive, ...], ...}`` (comments dropped,
    whitespace collapsed)."""
    out: dict[str, list[str]] = {}
    current = ""
    for raw in config.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if '"' not in line:  # a quoted string is kept as it is
            line = " ".join(line.split("#", 1)[0].split())
        if not raw[:1].isspace():
            current = line
            out[current] = []
        else:
            out[current].append(line)
    return out


def _pool(environment: dict[str, str], name: str) -> int:
    return int(environment.get(name, POOL_DEFAULTS[name]))


def _connections(service: dict[str, Any]) -> int:
    env = service["environment"]
    per_worker = _pool(env, "ODOMETER_DB_POOL_SIZE") + _pool(env, "ODOMETER_DB_MAX_OVERFLOW")
    return int(env.get("WORKERS", "2")) * per_worker


def test_the_replicas_are_one_service_on_one_database() -> None:
    services = _compose()["services"]
    replicas = _replicas(services)
    assert len(replicas) >= 2, list(replicas)
    assert set(_profile(services)) == {*replicas, _proxy(services)[0]}
    urls = {s["environment"]["DATABASE_URL"] for s in replicas.values()}
    assert urls == {services["app"]["environment"]["DATABASE_URL"]}, urls
    (url,) = urls
    assert re.fullmatch(r"postgresql://[^@]+@db:5432/\w+", url), url
    for name, replica in replicas.items():
        assert replica == next(iter(replicas.values())), f"{name} differs from the others"
        assert "ports" not in replica, f"{name} is reachable around the proxy"
        assert replica["depends_on"]["db"]["condition"] == "service_healthy"
        assert "/readyz" in " ".join(replica["healthcheck"]["test"])
    # every worker of every replica (and the app) has its pool: together within the limit
    total = sum(_connections(s) for s in (*replicas.values(), services["app"]))
    assert total <= MAX_CONNECTIONS - RESERVED, total


def test_the_proxy_balances_exactly_the_replicas() -> None:
    services = _compose()["services"]
    _, proxy = _proxy(services)
    replicas = _replicas(services)
    assert {r for r, c in proxy["depends_on"].items() if c["condition"] == "service_healthy"} == (
        set(replicas)
    )
    sections = _sections(_mounted_config(proxy).read_text("utf-8"))
    (frontend,) = [s for s in sections if s.startswith("frontend ")]
    (bind,) = [d for d in sections[frontend] if d.startswith("bind ")]
    published = {p.split(":")[-1] for p in proxy["ports"]}
    assert bind.rsplit(":", 1)[1] in published, (bind, proxy["ports"])
    (default,) = [d for d in sections[frontend] if d.startswith("default_backend ")]
    backend = sections[f"backend {default.split()[1]}"]
    servers = [d.split() for d in backend if d.startswith("server ")]
    hosts = {host for _, _, host, *_ in servers}
    assert hosts == {f"{r}:{SERVICE_PORT}" for r in replicas}, servers
    assert all("check" in s for s in servers), servers
    assert "balance roundrobin" in backend
    assert "option httpchk GET /readyz" in backend
    assert "http-check expect status 200" in backend


def test_the_tests_proxy_is_the_deployed_one() -> None:
    """Every directive of the deployed configuration, but where it binds, how it finds the
    replicas (Docker's DNS) and how often it checks them, is in the configuration the
    replicas test runs (``tests/concurrency/proxy.py``)."""
    deployed = _sections(_mounted_config(_proxy(_compose()["services"])[1]).read_text("utf-8"))
    tested = _sections(haproxy_config(8080, [("replica-1", 8001)]))

    def essential(sections: dict[str, list[str]]) -> dict[str, set[str]]:
        skip = ("bind ", "server ", "default-server ")
        return {
            name: {d for d in lines if not d.startswith(skip)}
            for name, lines in sections.items()
            if not name.startswith("resolvers ")
        }

    assert essential(tested) == essential(deployed)


def test_the_deployed_proxy_configuration_is_valid() -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"{reason}: its own check of the configuration is not run")
    binary = haproxy()
    assert binary is not None
    config = _mounted_config(_proxy(_compose()["services"])[1])
    checked = subprocess.run(
        [binary, "-c", "-f", str(config)], capture_output=True, text=True, check=False
    )
    # the replicas' names resolve only in the compose network: warnings here, not errors
    assert checked.returncode == 0, checked.stdout + checked.stderr
