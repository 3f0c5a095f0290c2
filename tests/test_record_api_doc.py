"""docs/records.md's API table names only what bot/record/ really has."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "records.md"


def _api_rows() -> list[tuple[str, list[str]]]:
    rows = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        module = re.fullmatch(r"`(\w+)\.py`", cells[0]) if cells else None
        if module and len(cells) >= 3:
            names = re.findall(
                r"`([A-Za-z_]\w*)", cells[-1]
            )  # `.append(...)` methods start with a dot: skipped
            rows.append((module.group(1), names))
    return rows


def test_every_documented_name_exists():
    rows = _api_rows()
    assert {m for m, _ in rows} >= {
        "opt_log",
        "report",
        "chart",
        "fmt",
        "verdicts",
        "errors",
    }
    missing = [
        f"{m}.{n}"
        for m, names in rows
        for n in names
        if not hasattr(importlib.import_module(f"bot.record.{m}"), n)
    ]
    assert missing == []
