"""Latency-per-iteration chart as a Mermaid `xychart-beta` block (GitHub renders it).

x-axis: "base", "1", "2", ... (the best one labelled "<n> best"); y-axis "latency (us)"
from 0 (`from_zero=False`: from a rounded value below the fastest, which the caller
must then say) to a round value above the slowest.
One bar per point: the measured latency, or the axis minimum (an empty bar) when
the iteration was not measured (L0 failed, timeout, error). One line: the
best-so-far latency, stepping down only where the loop kept a variant when
`best_so_far` is given, otherwise the running minimum of the measured points.
"""

from __future__ import annotations

import math

from bot.record.fmt import one_line


def nice_range(low: float, high: float) -> tuple[float, float]:
    """Axis bounds around [low, high]: 10 % margin below, 5 % above, on round numbers, never < 0."""
    lo, hi = low * 0.9, high * 1.05
    if hi <= lo:  # one value, or all equal
        hi = lo + max(abs(lo) * 0.2, 1.0)
    step = 10 ** math.floor(math.log10(hi - lo))
    lo = max(0.0, math.floor(lo / step) * step)
    hi = math.ceil(hi / step) * step
    return round(lo, 10), round(hi, 10)


def _num(value: float) -> str:
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return text or "0"


def _quote(text: str) -> str:
    """Mermaid strings are double-quoted and cannot hold a double quote."""
    return '"' + one_line(text).replace('"', "'") + '"'


def latency_chart(
    baseline_us: float,
    points: list[tuple[int, float | None]],
    best_us: float | None,
    title: str,
    best_so_far: list[float] | None = None,
    best_iteration: int | None = None,
    from_zero: bool = True,
) -> str:
    """A fenced ```mermaid block; `points` are (iteration, latency or None) in order.

    `best_so_far`, if given, holds one value per x position (baseline first); `best_us`
    (the final best) is kept inside the y range. `best_iteration` (0: the baseline; None: no
    marker) gets "best" in its x label, since Mermaid xychart has no markers or legend.
    """
    measured = [baseline_us] + [v for _, v in points if v is not None]
    if best_so_far is None:
        best_so_far, best = [], baseline_us
        for v in [baseline_us] + [v for _, v in points]:
            if v is not None:
                best = min(best, v)
            best_so_far.append(best)
    elif len(best_so_far) != len(points) + 1:
        raise ValueError(
            f"best_so_far needs {len(points) + 1} values (baseline + each point), "
            f"got {len(best_so_far)}"
        )
    values = measured + list(best_so_far) + ([best_us] if best_us is not None else [])
    lo, hi = nice_range(min(values), max(values))
    if from_zero:
        lo = 0.0
    labels = ['"base best"' if best_iteration == 0 else '"base"']
    labels += [f'"{n} best"' if n == best_iteration else f'"{n}"' for n, _ in points]
    bars = [baseline_us] + [lo if v is None else v for _, v in points]
    return (
        "\n".join(
            [
                "```mermaid",
                "xychart-beta",
                f"    title {_quote(title)}",
                f'    x-axis "iteration" [{", ".join(labels)}]',
                f'    y-axis "latency (us)" {_num(lo)} --> {_num(hi)}',
                f"    bar [{', '.join(_num(v) for v in bars)}]",
                f"    line [{', '.join(_num(v) for v in best_so_far)}]",
                "```",
            ]
        )
        + "\n"
    )
