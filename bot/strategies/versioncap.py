"""A pipeline no deeper than the versions its author pinned for the buffers it writes.

`T.annotate_buffer_versions({buf: k})` fixes how many copies of `buf` the scheduler keeps
(bot/strategies/stagefit.py). A loop `T.Pipelined(n, num_stages=s)` that writes `buf` every
iteration has s iterations in flight, each writing its own copy: with s > k two iterations in
flight share one copy, and the later write lands on data the earlier stage still reads. So a
depth above the smallest pinned count of a written buffer is refused, unless the current depth
already exceeds it (then the count is not what bounds this loop).
"""

from __future__ import annotations

import libcst as cst

from bot.strategies.evaluate import Env, code_of, evaluate


def pinned_cap(
    versions: dict[str, cst.BaseExpression | None],
    written: set[str],
    env: Env,
    depth: int,
    current: int,
    where: str,
) -> str | None:
    """Why `depth` overruns a pinned version count of a buffer the loop writes, or None."""
    counts: list[tuple[int, str]] = []
    for name in sorted(written):
        node = versions.get(name)
        value = evaluate(node, env) if node is not None else None
        if type(value) is int and value > 0:
            counts.append((value, f"{name}: {code_of(node)}"))  # type: ignore[arg-type]
    if not counts:
        return None
    cap, which = min(counts)
    if depth <= cap or current > cap:
        return None
    return (
        f"{where}: num_stages={depth} keeps {depth} iterations in flight, but "
        f"`T.annotate_buffer_versions` pins {cap} version(s) of a buffer the loop writes "
        f"({which}): two iterations in flight would share one copy"
    )
