"""The Mermaid xychart-beta latency chart.

The syntax was checked once against mermaid 11's own parser (mermaid.parse in
node); these tests pin the structure that parser accepted.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from bot.record.chart import latency_chart, nice_range


def _parse(block: str) -> dict:
    lines = block.splitlines()
    assert lines[0] == "```mermaid" and lines[1] == "xychart-beta" and lines[-1] == "```"
    body = {line.split()[0]: line.strip() for line in lines[2:-1]}
    assert set(body) == {"title", "x-axis", "y-axis", "bar", "line"}
    y = re.fullmatch(r'y-axis "latency \(us\)" ([\d.]+) --> ([\d.]+)', body["y-axis"])
    x = re.fullmatch(r'x-axis "iteration" \[(.*)\]', body["x-axis"])
    assert y and x, body
    return {
        "title": re.fullmatch(r'title "([^"]*)"', body["title"]).group(1),
        "labels": [s.strip().strip('"') for s in x.group(1).split(",")],
        "lo": float(y.group(1)),
        "hi": float(y.group(2)),
        "bar": [float(v) for v in body["bar"][len("bar [") : -1].split(",")],
        "line": [float(v) for v in body["line"][len("line [") : -1].split(",")],
    }


def test_one_bar_per_iteration_and_a_best_so_far_line():
    chart = _parse(
        latency_chart(25.4, [(1, 21.12), (2, None), (3, 26.0), (4, 20.5)], 20.5, "rms_norm latency")
    )
    assert chart["title"] == "rms_norm latency"
    assert chart["labels"] == ["base", "1", "2", "3", "4"]
    assert chart["bar"] == [
        25.4,
        21.12,
        chart["lo"],
        26.0,
        20.5,
    ]  # unmeasured: an empty bar at the axis minimum
    assert chart["line"] == [25.4, 21.12, 21.12, 21.12, 20.5]
    assert chart["lo"] == 0 and chart["hi"] > 26.0, (
        "the latency axis starts at 0 unless asked otherwise"
    )


def test_the_best_is_marked_in_its_label_and_a_zoomed_axis_is_opt_in():
    chart = _parse(
        latency_chart(25.4, [(1, 21.12), (2, 26.0)], 21.12, "t", best_iteration=1, from_zero=False)
    )
    assert chart["labels"] == ["base", "1 best", "2"]
    assert 0 < chart["lo"] < 21.12
    kept = _parse(latency_chart(25.4, [(1, 26.0)], 25.4, "t", best_iteration=0))
    assert kept["labels"] == ["base best", "1"] and kept["lo"] == 0


def test_an_explicit_best_so_far_line_follows_the_loops_decisions():
    # iteration 1 was faster but within noise: the loop kept the baseline as best
    chart = _parse(
        latency_chart(10.0, [(1, 9.9), (2, 8.0)], 8.0, "t", best_so_far=[10.0, 10.0, 8.0])
    )
    assert chart["line"] == [10.0, 10.0, 8.0]
    with pytest.raises(ValueError, match="3 values"):
        latency_chart(10.0, [(1, 9.9), (2, 8.0)], 8.0, "t", best_so_far=[10.0])


def test_baseline_only_chart():
    chart = _parse(latency_chart(5.0, [], 5.0, "nothing tried"))
    assert chart["labels"] == ["base"] and chart["bar"] == [5.0] and chart["line"] == [5.0]
    assert chart["lo"] == 0 and chart["hi"] > 5.0


def test_titles_cannot_break_the_block():
    chart = _parse(latency_chart(1.0, [(1, 0.9)], 0.9, 'say "hi"\nthere'))
    assert chart["title"] == "say 'hi' there"


def test_range_keeps_small_differences_visible():
    lo, hi = nice_range(970.0, 1000.0)
    assert (
        lo >= 800 and hi <= 1100 and lo <= 970 and hi >= 1000
    )  # not 0 --> 1000: 3 % must be visible


def test_random_charts_are_well_formed_and_every_value_is_inside_the_axis():
    rng = random.Random(99)
    for _ in range(300):
        base = rng.uniform(0.01, 1e5)
        points = [
            (n, rng.choice([None, base * rng.uniform(0.3, 2.0)]))
            for n in range(1, rng.randint(0, 30) + 1)
        ]
        best = min([base] + [v for _, v in points if v is not None])
        chart = _parse(latency_chart(base, points, best, "op"))
        n = len(points) + 1
        assert len(chart["labels"]) == len(chart["bar"]) == len(chart["line"]) == n
        assert 0 <= chart["lo"] < chart["hi"]
        assert all(chart["lo"] <= v <= chart["hi"] for v in chart["bar"] + chart["line"])
        assert chart["line"] == sorted(chart["line"], reverse=True)  # best-so-far never rises
        assert chart["line"][-1] == pytest.approx(best, abs=0.006)


def test_the_documented_example_is_what_the_code_renders():
    text = (
        Path(__file__).resolve().parents[1].joinpath("docs/records.md").read_text(encoding="utf-8")
    )
    start = text.index("```mermaid", text.index("## Latency chart"))
    block = text[start : text.index("```\n", start + 3) + 4]
    assert (
        latency_chart(
            25.4, [(1, 21.12), (2, None), (3, 26.0)], 21.12, "rms_norm latency per iteration (us)"
        )
        == block
    )
