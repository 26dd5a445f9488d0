"""An idle line's group of one, run on the event loop (``inline``,
:meth:`app.writepath.groups.GroupCommit._alone`): its answer is returned without a hand-off
through the loop (no ``call_soon_threadsafe``, whose self-pipe write and read were a
registration's fixed cost at one client), its refusal raised, a failing runner's error raised,
and the line is held while it runs and retired after.

Shown able to fail: with ``run`` settling the inline group through a future, as before, the
hand-off was counted once per request (``assert 4 == 0``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from app.writepath.groups import GroupCommit

KEY = "caller_1"


def test_a_group_of_one_on_the_loop_answers_without_a_hand_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    groups: GroupCommit[int, int] = GroupCommit(8)
    seen_busy: list[bool] = []

    def run(items: Sequence[int]) -> list[int | BaseException]:
        seen_busy.append(groups.busy())
        return [ValueError(f"refused {i}") if i < 0 else i * 10 for i in items]

    def broken(items: Sequence[int]) -> list[int | BaseException]:
        raise RuntimeError("the transaction failed")

    async def main() -> tuple[int, int, int]:
        loop = asyncio.get_running_loop()
        handed: list[Any] = []
        real = loop.call_soon_threadsafe

        def counting(*args: Any, **kwargs: Any) -> Any:
            handed.append(args)
            return real(*args, **kwargs)

        monkeypatch.setattr(loop, "call_soon_threadsafe", counting)
        first = await groups.run(KEY, 1, run, inline=True)
        second = await groups.run(KEY, 2, run, inline=True)
        with pytest.raises(ValueError, match="refused -1"):
            await groups.run(KEY, -1, run, inline=True)
        with pytest.raises(RuntimeError, match="the transaction failed"):
            await groups.run(KEY, 3, broken, inline=True)
        return first, second, len(handed)

    first, second, handed = asyncio.run(main())
    assert (first, second) == (10, 20)
    assert handed == 0
    assert seen_busy == [True, True, True]  # the line is held while its group runs
    assert not groups.busy() and groups.waiting(KEY) == 0  # and retired after
