"""Markdown tables for status messages (the GitHub status comment, the CLI summary)."""

from __future__ import annotations

from bot.record.fmt import escape_cell, fmt_pct, fmt_us
from bot.record.opt_log import LogRow

HEADER = ("iter", "strategy / change", "latency (us)", "gain", "L0")


def _link(label: str, url: str) -> str:
    label = label.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]").replace("|", "\\|")
    # <...> lets the URL hold spaces and parentheses; '>' and '|' would end it or the cell
    url = url.replace(" ", "%20").replace(">", "%3E").replace("<", "%3C").replace("|", "%7C")
    return f"[{label}](<{url}>)"


def iteration_table(rows: list[LogRow], links: dict[int, dict[str, str]] | None = None) -> str:
    """One row per iteration; with `links`, a last column of per-iteration links
    ({"branch": url, "commit": url, "diff": url}, in the given order)."""
    header = list(HEADER) + (["links"] if links is not None else [])
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        cells = [
            str(row.iter),
            escape_cell(row.strategy),
            fmt_us(row.latency_us),
            fmt_pct(row.gain_pct),
            row.accuracy,
        ]
        if links is not None:
            found = links.get(row.iter, {})
            cells.append(" · ".join(_link(k, v) for k, v in found.items()) if found else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
