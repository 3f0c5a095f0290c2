"""opt_log.md: the seed's format, rendered and parsed round-trip."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bot.record.errors import RecordFormatError
from bot.record.opt_log import (
    ACCURACY_VALUES,
    STOP_REASONS,
    Conclusion,
    LogRow,
    OptLog,
    parse_opt_log,
    render_opt_log,
)

SEED_EXAMPLE = """\
# rms_norm 性能调优日志

## 基线
- latency: 25.40 us
- 来源: rms_norm.py

## 迭代记录
| iter | 策略 | latency(us) | 提升 | 精度 |
|------|------|-------------|------|------|
| 1 | block_size BLOCK_M 64->128 | 21.12 | +16.9% | pass |
| 2 | pipeline NUM_STAGES 2->3 | - | - | fail |
| 3 | block_size BLOCK_N 32->64 | 26.00 | -2.4% | pass |

## 结论
- 最优版本: rms_norm.py (iter 1)
- 最终 latency: 21.12 us
- 总提升: +16.9%
- 中止原因: 连续无提升
"""


def test_the_seed_example_parses_to_the_expected_values_and_renders_back_exactly():
    log = parse_opt_log(SEED_EXAMPLE)
    assert log.op == "rms_norm" and log.baseline_us == 25.4 and log.baseline_source == "rms_norm.py"
    assert log.rows[0] == LogRow(1, "block_size BLOCK_M 64->128", 21.12, 16.9, "pass")
    assert log.rows[1] == LogRow(2, "pipeline NUM_STAGES 2->3", None, None, "fail")
    assert log.rows[2].gain_pct == -2.4
    assert log.conclusion == Conclusion("rms_norm.py", 1, 21.12, 16.9, "连续无提升")
    assert render_opt_log(log) == SEED_EXAMPLE


def test_the_conclusion_section_is_omitted_until_the_run_stops():
    log = parse_opt_log(SEED_EXAMPLE)
    log.conclusion = None
    text = render_opt_log(log)
    assert "## 结论" not in text and text.endswith(
        "| 3 | block_size BLOCK_N 32->64 | 26.00 | -2.4% | pass |\n"
    )
    assert parse_opt_log(text) == log


def test_an_empty_table_and_a_baseline_best():
    log = OptLog(
        "softmax", 9.99, "softmax.py", [], Conclusion("softmax.py", None, 9.99, 0.0, "策略耗尽")
    )
    text = render_opt_log(log)
    assert "- 最优版本: softmax.py (baseline)" in text
    assert "|------|------|-------------|------|------|\n\n## 结论" in text
    assert parse_opt_log(text) == log


def _random_text(rng: random.Random) -> str:
    alphabet = "abcXYZ_ 0123->|\\.中文调优()"
    text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
    return " ".join(text.split()) or "x"


def _random_log(rng: random.Random) -> OptLog:
    base = round(rng.uniform(0.5, 5000), 2) if rng.random() < 0.95 else None
    rows = []
    for n in range(1, rng.randint(0, 12) + 1):
        accuracy = rng.choice(ACCURACY_VALUES)
        measured = accuracy == "pass" and rng.random() < 0.9
        latency = round(rng.uniform(0.1, 6000), 2) if measured else None
        gain = round((base - latency) / base * 100, 1) if latency is not None and base else None
        rows.append(LogRow(n, _random_text(rng), latency, gain, accuracy))
    conclusion = None
    if rng.random() < 0.6:
        best = rng.choice([None] + [r.iter for r in rows])
        conclusion = Conclusion(
            _random_text(rng),
            best,
            rng.choice([None, round(rng.uniform(0.1, 5000), 2)]),
            rng.choice([None, round(rng.uniform(-50, 90), 1)]),
            rng.choice(STOP_REASONS),
        )
    return OptLog(
        rng.choice(["rms_norm", "matmul_tiled", "attn-mix", "中文算子"]),
        base,
        _random_text(rng),
        rows,
        conclusion,
    )


def test_random_logs_round_trip_both_ways():
    rng = random.Random(20261129)
    for _ in range(300):
        log = _random_log(rng)
        text = render_opt_log(log)
        assert parse_opt_log(text) == log
        assert render_opt_log(parse_opt_log(text)) == text


def test_values_are_rounded_to_the_documented_precision():
    log = OptLog("op", 12.3456, "op.py", [LogRow(1, "s", 10.004, 18.96, "pass")])
    parsed = parse_opt_log(render_opt_log(log))
    assert (
        parsed.baseline_us == 12.35
        and parsed.rows[0].latency_us == 10.0
        and parsed.rows[0].gain_pct == 19.0
    )


def test_pipes_and_newlines_in_the_strategy_cell_are_safe():
    log = OptLog("op", 1.0, "op.py", [LogRow(1, "tile a|b\nnext", 1.0, 0.0, "pass")])
    text = render_opt_log(log)
    assert "| tile a\\|b next |" in text
    assert parse_opt_log(text).rows[0].strategy == "tile a|b next"


def test_hand_edits_with_blank_lines_spaces_and_full_width_colons_are_read():
    edited = """

#   rms_norm   性能调优日志
## 基线

-   latency :  25.4us
-  来源： rms_norm.py


## 迭代记录

|iter|策略|latency(us)|提升|精度|
|:---|---|---:|---|---|
|  1  |  block_size BLOCK_M 64->128|21.12| 16.9 % |pass
| 2 | pipeline NUM_STAGES 2->3 | - | - | fail |

| 3 | block_size BLOCK_N 32->64 | 26 | -2.4% | pass |
## 结论
- 中止原因: 连续无提升
- 最优版本: rms_norm.py（iter 1）
- 最终 latency: 21.12 us
- 总提升: +16.9%
"""
    assert render_opt_log(parse_opt_log(edited)) == SEED_EXAMPLE


def _error(text: str) -> RecordFormatError:
    with pytest.raises(RecordFormatError) as info:
        parse_opt_log(text, source="perf_opt/opt_log.md")
    return info.value


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


@pytest.mark.parametrize(
    "old,new,needle,words",
    [
        ("| pass |\n| 2 |", "| ok |\n| 2 |", "| ok |", "精度 'ok'"),
        ("| 21.12 | +16.9%", "| fast | +16.9%", "| fast |", "latency(us)"),
        ("| 21.12 | +16.9%", "| 21.12 | 16.9", "| 21.12 | 16.9 |", "提升"),
        ("| 1 | block", "| one | block", "| one |", "iter 'one'"),
        (
            "| 3 | block_size BLOCK_N",
            "| 2 | block_size BLOCK_N",
            "| 2 | block_size BLOCK_N",
            "iter 2 appears twice",
        ),
        (
            "| 2 | pipeline NUM_STAGES 2->3 | - | - | fail |",
            "| 2 | pipeline | fail |",
            "| 2 | pipeline | fail |",
            "5 cells",
        ),
        ("- 中止原因: 连续无提升", "- 中止原因: 累了", "累了", "中止原因"),
        ("- 最优版本: rms_norm.py (iter 1)", "- 最优版本: rms_norm.py", "- 最优版本", "最优版本"),
        ("- latency: 25.40 us", "- latency: quick", "quick", "baseline latency"),
        ("- 来源: rms_norm.py", "- 来源: rms_norm.py\n- owner: me", "owner", "unknown key 'owner'"),
        ("## 结论", "## 总结", "## 总结", "unknown section"),
        ("|------|------|", "|  |------|", "|  |------|", "separator"),
        ("| iter | 策略 |", "| it | 策略 |", "| it | 策略 |", "table header"),
    ],
)
def test_errors_name_the_line_and_the_problem(old, new, needle, words):
    text = SEED_EXAMPLE.replace(old, new, 1)
    assert text != SEED_EXAMPLE
    err = _error(text)
    assert err.line == _line_of(text, needle), str(err)
    assert words in err.problem, str(err)
    assert str(err).startswith(f"perf_opt/opt_log.md:{err.line}: ") and "Fix: " in str(err)


@pytest.mark.parametrize(
    "drop,words",
    [
        ("# rms_norm 性能调优日志\n", "title"),
        ("## 基线\n- latency: 25.40 us\n- 来源: rms_norm.py\n", "'## 基线' is missing"),
        ("- 来源: rms_norm.py\n", "'- 来源: ...' is missing"),
        ("- 总提升: +16.9%\n", "'- 总提升: ...' is missing"),
    ],
)
def test_a_missing_required_part_is_named(drop, words):
    text = SEED_EXAMPLE.replace(drop, "", 1)
    assert words in str(_error(text))


def test_duplicate_sections_titles_and_keys_are_refused():
    assert "twice" in str(_error(SEED_EXAMPLE + "\n## 结论\n"))
    assert "second" in str(_error(SEED_EXAMPLE + "\n# other 性能调优日志\n"))
    assert "twice" in str(
        _error(SEED_EXAMPLE.replace("- 来源: rms_norm.py", "- 来源: a.py\n- 来源: b.py"))
    )


def test_text_before_the_title_or_outside_sections_is_refused():
    assert _error("hello\n" + SEED_EXAMPLE).line == 1
    assert "outside" in str(_error(SEED_EXAMPLE.replace("\n## 基线", "\nstray words\n## 基线")))


def test_render_refuses_values_that_could_not_be_parsed_back():
    with pytest.raises(ValueError, match="accuracy"):
        render_opt_log(OptLog("op", 1.0, "op.py", [LogRow(1, "s", 1.0, 0.0, "ok")]))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="stop_reason"):
        render_opt_log(OptLog("op", 1.0, "op.py", [], Conclusion("op.py", None, 1.0, 0.0, "done")))


def _doc_block(after: str) -> str:
    text = (
        Path(__file__).resolve().parents[1].joinpath("docs/records.md").read_text(encoding="utf-8")
    )
    start = text.index("```\n", text.index(after)) + 4
    return text[start : text.index("```", start)]


def test_the_documented_example_is_what_the_code_renders():
    block = _doc_block("## opt_log.md")
    assert render_opt_log(parse_opt_log(block)) == block
