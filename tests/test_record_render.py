"""Markdown iteration table for status messages."""

from __future__ import annotations

from bot.record.fmt import split_row
from bot.record.opt_log import LogRow
from bot.record.render import HEADER, iteration_table

ROWS = [
    LogRow(1, "block_size BLOCK_M 64->128", 21.12, 16.9, "pass"),
    LogRow(2, "pipeline a|b", None, None, "fail"),
]


def test_table_without_links():
    text = iteration_table(ROWS)
    lines = text.splitlines()
    assert split_row(lines[0]) == list(HEADER) and len(lines) == 4
    assert split_row(lines[2]) == ["1", "block_size BLOCK_M 64->128", "21.12", "+16.9%", "pass"]
    assert split_row(lines[3]) == ["2", "pipeline a|b", "-", "-", "fail"]


def test_links_column_per_iteration_in_the_given_order():
    links = {
        1: {
            "branch": "https://github.com/o/r/tree/tunebot/rms_norm/v1",
            "commit": "https://github.com/o/r/commit/abc123",
            "diff": "https://github.com/o/r/compare/main...tunebot/rms_norm/v1",
        }
    }
    lines = iteration_table(ROWS, links).splitlines()
    assert split_row(lines[0])[-1] == "links"
    assert lines[2].endswith(
        "| [branch](<https://github.com/o/r/tree/tunebot/rms_norm/v1>) · "
        "[commit](<https://github.com/o/r/commit/abc123>) · "
        "[diff](<https://github.com/o/r/compare/main...tunebot/rms_norm/v1>) |"
    )
    assert split_row(lines[3])[-1] == "-"  # no links for iteration 2


def test_link_text_and_urls_cannot_break_the_row():
    lines = iteration_table(ROWS[:1], {1: {"a|b]": "file:///tmp/x y|z>"}}).splitlines()
    cells = split_row(lines[2])
    assert len(cells) == 6
    assert cells[-1] == "[a|b\\]](<file:///tmp/x%20y%7Cz%3E>)"


def test_empty_table():
    assert iteration_table([], {}).splitlines()[1] == "|---|---|---|---|---|---|"
