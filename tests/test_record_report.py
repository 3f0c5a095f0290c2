"""The completion report ("## Stage Result"), rendered and parsed round-trip."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bot.record.errors import RecordFormatError
from bot.record.report import KEYS, CompletionReport, default_output, parse_report, render_report
from bot.run.stops import STOP_REASONS

SEED_EXAMPLE = """\
## Stage Result
- stage: 4
- project: demo
- operator: rms_norm
- output: examples/demo/rms_norm/perf_opt/rms_norm.py
- verdict: TUNING_COMPLETED
- iterations: 6
- baseline_latency: 25.40 us
- final_latency: 21.12 us
- improvement: +16.9%
- stop_reason: 连续无提升
- skills_consulted: docs/perf_guide.md, examples/demo/rms_norm/DESIGN.md
- summary: BLOCK_M 64->128 gave the best variant.
- issues: iter 2 (pipeline): fail_l0
"""


def _example(**overrides) -> CompletionReport:
    values = dict(
        project="demo",
        operator="rms_norm",
        iterations=6,
        baseline_latency=25.4,
        final_latency=21.12,
        improvement=16.9,
        stop_reason="连续无提升",
        summary="BLOCK_M 64->128 gave the best variant.",
        skills_consulted=["docs/perf_guide.md", "examples/demo/rms_norm/DESIGN.md"],
        issues=["iter 2 (pipeline): fail_l0"],
    )
    values.update(overrides)
    return CompletionReport(**values)


def test_renders_the_seed_format_exactly_with_the_output_derived():
    assert render_report(_example()) == SEED_EXAMPLE
    assert _example().output == default_output("demo", "rms_norm")


def test_parses_the_seed_format_back():
    report = parse_report(SEED_EXAMPLE)
    assert report == _example()
    assert report.stage == 4 and report.verdict == "TUNING_COMPLETED"
    assert report.skills_consulted == ["docs/perf_guide.md", "examples/demo/rms_norm/DESIGN.md"]


def test_the_keys_come_in_the_seed_order():
    keys = [line.split(":")[0][2:] for line in render_report(_example()).splitlines()[1:]]
    assert keys == list(KEYS)


def test_empty_skills_and_issues_read_none():
    report = _example(skills_consulted=["none"], issues=[])
    text = render_report(report)
    assert "- skills_consulted: none\n" in text and "- issues: none\n" in text
    assert parse_report(text).skills_consulted == [] and parse_report(text).issues == "none"


def test_issues_may_be_a_list_or_one_string():
    assert _example(issues=["a", "b; c"]).issues == "a; b; c"
    assert _example(issues="one\nline").issues == "one line"


def test_an_explicit_output_is_kept():
    report = _example(output="somewhere/else.py")
    assert parse_report(render_report(report)).output == "somewhere/else.py"


def test_found_inside_a_larger_body_and_stops_at_the_next_heading():
    body = "Intro text.\n\n" + SEED_EXAMPLE + "\n### Latency per iteration\n\n- not: a report key\n"
    assert parse_report(body) == _example()


def test_random_reports_round_trip_both_ways():
    rng = random.Random(4)
    words = ["rms", "norm", "块", "(iter 3)", "->", "50%", "a:b", "x|y"]
    for _ in range(300):
        report = CompletionReport(
            project=rng.choice(["demo", "tilelang", "mindie_sd"]),
            operator=rng.choice(["rms_norm", "matmul", "attn_mix"]),
            iterations=rng.randint(0, 50),
            baseline_latency=rng.choice([None, round(rng.uniform(0.1, 1e4), 2)]),
            final_latency=rng.choice([None, round(rng.uniform(0.1, 1e4), 2)]),
            improvement=rng.choice([None, round(rng.uniform(-100, 99), 1)]),
            stop_reason=rng.choice(STOP_REASONS),
            summary=" ".join(rng.choice(words) for _ in range(rng.randint(0, 8))),
            skills_consulted=[
                f"docs/{rng.choice(words)}{i}.md".replace(" ", "_")
                for i in range(rng.randint(0, 3))
            ],
            issues=[
                " ".join(rng.choice(words) for _ in range(3)) for _ in range(rng.randint(0, 3))
            ],
            output=rng.choice([None, "custom/out.py"]),
            stage=rng.randint(1, 5),
            verdict=rng.choice(["TUNING_COMPLETED", "TUNING_CANCELLED"]),
        )
        text = render_report(report)
        assert parse_report(text) == report
        assert render_report(parse_report(text)) == text


def test_construction_refuses_values_that_cannot_round_trip():
    with pytest.raises(ValueError, match="stop_reason"):
        _example(stop_reason="finished")
    with pytest.raises(ValueError, match="comma"):
        _example(skills_consulted=["a,b.md"])


def _error(text: str) -> RecordFormatError:
    with pytest.raises(RecordFormatError) as info:
        parse_report(text, source="PR body")
    return info.value


@pytest.mark.parametrize(
    "old,new,words",
    [
        ("- iterations: 6", "- iterations: six", "iterations 'six'"),
        ("- baseline_latency: 25.40 us", "- baseline_latency: slow", "baseline_latency"),
        ("- improvement: +16.9%", "- improvement: 16.9", "improvement"),
        ("- stop_reason: 连续无提升", "- stop_reason: bored", "stop_reason 'bored'"),
        ("- stage: 4", "- stage: 4\n- colour: red", "unknown key 'colour'"),
        ("- stage: 4", "- stage: 4\n- stage: 4", "twice"),
        ("- stage: 4", "- stage: 4\nfree text", "expected '- <key>: <value>'"),
    ],
)
def test_errors_name_the_line(old, new, words):
    text = SEED_EXAMPLE.replace(old, new, 1)
    err = _error(text)
    bad = next(
        i
        for i, (a, b) in enumerate(
            zip(text.splitlines(), SEED_EXAMPLE.splitlines() + [""], strict=False), 1
        )
        if a != b
    )
    assert words in err.problem and err.line == bad and str(err).startswith(f"PR body:{bad}: ")


def test_missing_heading_or_key_is_named():
    assert "'## Stage Result' heading not found" in str(
        _error(SEED_EXAMPLE.replace("## Stage Result", "## Result"))
    )
    assert "'- summary: ...' is missing" in str(
        _error(SEED_EXAMPLE.replace("- summary: BLOCK_M 64->128 gave the best variant.\n", ""))
    )


def test_the_documented_example_is_what_the_code_renders():
    text = (
        Path(__file__).resolve().parents[1].joinpath("docs/records.md").read_text(encoding="utf-8")
    )
    start = text.index("```\n", text.index("## Completion report")) + 4
    block = text[start : text.index("```", start)]
    assert render_report(parse_report(block)) == block
