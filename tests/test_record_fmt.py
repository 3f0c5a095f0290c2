"""Number and table-cell formatting shared by the records."""

from __future__ import annotations

import random

import pytest

from bot.record.fmt import (
    escape_cell,
    fmt_pct,
    fmt_us,
    gain_pct,
    is_separator_row,
    one_line,
    parse_number,
    parse_pct,
    parse_us,
    split_row,
)


def test_latency_has_two_decimals_and_dash_when_missing():
    assert fmt_us(12.345678) == "12.35"
    assert fmt_us(3.0) == "3.00"
    assert fmt_us(None) == "-"


def test_gain_has_sign_one_decimal_and_percent():
    assert fmt_pct(12.34) == "+12.3%"
    assert fmt_pct(-4.0) == "-4.0%"
    assert fmt_pct(0.0) == "+0.0%"
    assert fmt_pct(None) == "-"


def test_gain_pct_is_positive_when_faster():
    assert gain_pct(10.0, 8.0) == pytest.approx(20.0)
    assert gain_pct(10.0, 12.5) == pytest.approx(-25.0)


def test_gain_pct_is_none_when_a_side_is_unknown():
    # the one gain formula (bot.run.state folds records through it): unmeasured -> None, never a crash
    assert gain_pct(None, 8.0) is None
    assert gain_pct(10.0, None) is None
    assert gain_pct(0.0, 8.0) is None


@pytest.mark.parametrize(
    "text,value",
    [("12.34", 12.34), ("12.34 us", 12.34), (" 7us ", 7.0), ("-", None), ("- us", None)],
)
def test_parse_us_accepts_canonical_and_hand_written_forms(text, value):
    assert parse_us(text) == value


@pytest.mark.parametrize("text", ["fast", "12,5", "nan", "inf", "", "1e3"])
def test_parse_us_rejects_non_numbers(text):
    with pytest.raises(ValueError):
        parse_us(text)


@pytest.mark.parametrize(
    "text,value", [("+12.3%", 12.3), ("12.3 %", 12.3), ("-4%", -4.0), ("-", None)]
)
def test_parse_pct_accepts_sign_optional(text, value):
    assert parse_pct(text) == value


@pytest.mark.parametrize("text", ["12.3", "%", "abc%", "nan%"])
def test_parse_pct_rejects_malformed(text):
    with pytest.raises(ValueError):
        parse_pct(text)


def test_parse_number_refuses_non_finite():
    assert parse_number("inf") is None and parse_number("-.5") == -0.5


def test_numbers_round_trip_through_their_canonical_text():
    rng = random.Random(7)
    for _ in range(2000):
        us = round(rng.uniform(0, 1e5), 2)
        pct = round(rng.uniform(-500, 100), 1)
        assert parse_us(fmt_us(us)) == us
        assert parse_pct(fmt_pct(pct)) == pct
        assert fmt_us(parse_us(fmt_us(us))) == fmt_us(us)


def test_cells_escape_pipes_and_backslashes_and_split_back():
    texts = ["a|b", "x\\y", "ends with \\", "\\|", "plain", "", "BLOCK_M 64->128"]
    line = "| " + " | ".join(escape_cell(t) for t in texts) + " |"
    assert split_row(line) == texts


def test_cells_are_single_lines():
    assert one_line(" two\nlines\r\n ") == "two lines"
    assert escape_cell("a\nb") == "a b"


def test_split_row_tolerates_missing_trailing_pipe_and_keeps_foreign_backslashes():
    assert split_row("| 1 | a\\_b | c") == ["1", "a\\_b", "c"]
    assert split_row("not a row") is None


def test_random_cells_round_trip():
    rng = random.Random(11)
    alphabet = "ab |\\-> _中文"
    for _ in range(500):
        cells = [
            one_line("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))))
            for _ in range(4)
        ]
        assert split_row("| " + " | ".join(escape_cell(c) for c in cells) + " |") == cells


def test_separator_row():
    assert is_separator_row(["------", ":---", "---:", "-"])
    assert not is_separator_row(["iter", "---"])
    assert not is_separator_row([])
