"""One knob's value space as the planner walks it: sides, far ends, bisection, valley
crossings, the preferred side, and the profile measured so far. Pure functions."""

from __future__ import annotations

import math

from bot.strategies import knobs
from bot.strategies.base import Attempt
from bot.strategies.protocol import KnobSpec

FAILED_VERDICTS = ("fail_l0", "timeout", "error")


def direction(old: object, new: object) -> int:
    try:
        return (new > old) - (new < old)  # type: ignore[operator]
    except TypeError:
        return 0


def profile(current: object, attempts: list[Attempt]) -> dict:
    """Log latency of each value measured on one knob, relative to `current`, chained through
    the measured gains (old -> new) of `attempts` (first path found; the knob is assumed to
    act alone)."""
    edges: dict[str, list[tuple[object, float]]] = {}
    for a in attempts:
        if a.gain is None or a.gain >= 1.0:
            continue
        step = math.log(1.0 - a.gain)  # candidate / parent
        edges.setdefault(value_key(a.change.old), []).append((a.change.new, step))
        edges.setdefault(value_key(a.change.new), []).append((a.change.old, -step))
    levels: dict = {current: 0.0}
    queue = [current]
    while queue:
        v = queue.pop(0)
        for w, step in edges.get(value_key(v), []):
            if not any(value_key(w) == value_key(k) for k in levels):
                levels[w] = levels[v] + step
                queue.append(w)
    return levels


def value_key(value: object) -> str:
    return repr(value)


def side_values(spec: KnobSpec, current: object, d: int) -> list:
    """Allowed values strictly beyond `current` in direction d (+1 up, -1 down), nearest first."""
    ordered = sorted(v for v in spec.values if direction(current, v) == d)
    ordered = ordered if d > 0 else list(reversed(ordered))
    return [
        v for v in ordered if spec.knob is None or knobs.check_constraints(spec.knob, v) is None
    ]


def stride(ladder: list) -> object:
    """The first value to try in a direction: the neighbour, or halfway along a long ladder
    (4 values or more), so that a wide knob is sampled coarsely before it is refined."""
    return ladder[(len(ladder) - 1) // 2] if len(ladder) >= 4 else ladder[0]


def valley_crossing(ladder: list) -> list:
    """Past a losing neighbour: the far end, and the log-midpoint between here and there."""
    if len(ladder) < 2:
        return []
    far = ladder[-1]
    out = [far]
    if len(ladder) >= 3:
        inner = ladder[1:-1]
        try:
            target = (
                math.sqrt(float(ladder[0]) * float(far))
                if float(ladder[0]) > 0 and float(far) > 0
                else (float(ladder[0]) + float(far)) / 2
            )
            mid = min(
                inner,
                key=lambda v: (
                    abs(math.log(float(v) / target))
                    if float(v) > 0 and target > 0
                    else abs(float(v) - target)
                ),
            )
        except (TypeError, ValueError):
            mid = inner[len(inner) // 2]
        out.insert(0, mid)
    return out


def preferred_direction(
    spec: KnobSpec, current: object, mine: list[Attempt], last_win: Attempt | None
) -> int:
    """The direction to try first for this knob (see the module doc)."""
    if last_win is not None and last_win.change.knob == spec.key and last_win.change.new == current:
        d = direction(last_win.change.old, last_win.change.new)
        if d:
            return d
    evidence = {+1: 0.0, -1: 0.0}
    seen = {+1: False, -1: False}
    for a in mine:
        d = direction(a.change.old, a.change.new)
        if d and a.gain is not None and a.verdict not in FAILED_VERDICTS:
            evidence[d] += a.gain
            seen[d] = True
    if (seen[+1] or seen[-1]) and evidence[+1] != evidence[-1]:
        return +1 if evidence[+1] > evidence[-1] else -1
    up, down = len(side_values(spec, current, +1)), len(side_values(spec, current, -1))
    if up != down:
        return +1 if up > down else -1
    return +1


def interpolation(
    spec: KnobSpec, current: object, levels: dict, skip: set[str]
) -> tuple[object, float] | None:
    """Successive parabolic interpolation on the knob's ladder of allowed values (a log scale
    for powers of two): the parabola through the current value and its nearest measured values
    (one on each side, or the two nearest on the only side a knob at an edge has) puts the
    minimum at its vertex; the untried value inside those three nearest the vertex. None when
    fewer than three values are measured there or the parabola does not open upwards. With the
    value comes the parabola's level there (log latency relative to the current value: below
    zero, the parabola puts it faster)."""
    axis = (
        list(reversed(side_values(spec, current, -1))) + [current] + side_values(spec, current, +1)
    )
    at = {value_key(v): i for i, v in enumerate(axis)}
    here = at[value_key(current)]
    measured = {at[value_key(v)]: lv for v, lv in levels.items() if value_key(v) in at}
    below = sorted((i for i in measured if i < here), reverse=True)
    above = sorted(i for i in measured if i > here)
    if below and above:
        xs = [below[0], here, above[0]]
    elif here == 0 and len(above) >= 2:
        xs = [here, above[0], above[1]]
    elif here == len(axis) - 1 and len(below) >= 2:
        xs = [below[1], below[0], here]
    else:
        return None  # the other side is still unmeasured: its own probe comes first
    (x0, x1, x2), (y0, y1, y2) = xs, [measured.get(x, 0.0) for x in xs]
    curvature = ((y2 - y1) / (x2 - x1) - (y1 - y0) / (x1 - x0)) / (x2 - x0)
    if curvature <= 0:  # flat or opening downwards: no minimum inside
        return None
    slope = (y1 - y0) / (x1 - x0) - curvature * (x0 + x1)  # y = c*x^2 + slope*x + const
    vertex = -slope / (2 * curvature)
    inside = [i for i in range(x0 + 1, x2) if i not in measured and value_key(axis[i]) not in skip]
    if not inside or vertex <= x0 or vertex >= x2:
        return None
    # nearest the vertex; a tie goes to the side whose end measured faster
    pick = min(inside, key=lambda i: (abs(i - vertex), y0 if i < x1 else y2))
    level = curvature * pick * pick + slope * pick + (y1 - curvature * x1 * x1 - slope * x1)
    return axis[pick], level
