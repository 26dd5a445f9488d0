"""Requests that keep a process busy are decided in groups, however the first of them was run.

The register route asks :meth:`app.api.middleware.Metrics.alone` whether the request is the only
one in flight, and an idle line's group then runs on the event loop (``inline``). A request
served without an ``await`` from start to answer (the register lane once its body is read) must
still leave the loop a chance to start the requests waiting behind it, or none of them ever sees
another in flight: each is judged alone in turn, every group is a group of one, and a busy
SQLite server paid a commit per registration (1.4× the CPU per registration at 32 clients, side
by side with the build before; ``benchmarks/RESULTS.md``).

Shown able to fail: with an idle line's group of one answered directly on the loop (no future
awaited, as ad8009d did), every group here had one request (``assert 1 > 1``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from app.api.middleware import Metrics
from app.writepath.groups import GroupCommit

KEY = "caller_1"
CLIENTS = 16
ROUNDS = 10


def test_clients_sending_again_at_once_are_decided_in_groups() -> None:
    metrics = Metrics()
    groups: GroupCommit[int, int] = GroupCommit(64)
    sizes: list[int] = []

    def run(items: Sequence[int]) -> list[int | BaseException]:
        sizes.append(len(items))
        time.sleep(0.002)  # the group's transaction and commit
        return [i * 10 for i in items]

    async def request(i: int) -> int:
        metrics.started()  # as MetricsMiddleware does; nothing awaited before the decision
        try:
            return await groups.run(KEY, i, run, inline=metrics.alone())
        finally:
            metrics.finished()

    async def client(c: int) -> list[int]:
        return [await request(c * ROUNDS + r) for r in range(ROUNDS)]

    async def main() -> list[list[int]]:
        return await asyncio.gather(*(client(c) for c in range(CLIENTS)))

    answers = asyncio.run(main())
    assert answers == [[(c * ROUNDS + r) * 10 for r in range(ROUNDS)] for c in range(CLIENTS)]
    assert sum(sizes) == CLIENTS * ROUNDS
    assert max(sizes) > 1, sizes
