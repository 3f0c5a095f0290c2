"""Regenerate references/mindiesd-features.md from the docs (the working-copy half of refresh).

`propose.py` is the other half: the same text committed on a branch and proposed.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from bot.features import render
from bot.features.extract import build_table
from bot.features.model import DocsError, FeatureTable

DEFAULT_OUTPUT = "references/mindiesd-features.md"


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Refreshed:
    text: str
    table: FeatureTable
    changed: bool  # differs from `previous` beyond the sync time (True when there was none)
    diff: render.TableDiff


def regenerate(docs_dir: Path, previous: str | None, now: str | None = None) -> Refreshed:
    """Build the table and its text; `previous` is the current file text (or None)."""
    old = render.parse(previous) if previous else None
    table = build_table(Path(docs_dir), previous_files=old.files if old else None)
    text = render.render(table, now or utc_now(), previous=previous)
    changed = previous is None or not render.same_content(previous, text)
    return Refreshed(
        text=text,
        table=table,
        changed=changed,
        diff=render.diff(old.rows if old else [], table.rows),
    )


def read_previous(output: Path) -> str | None:
    """The existing features file, or None; DocsError when `output` is no readable UTF-8 file."""
    if output.is_dir():
        raise DocsError(
            f"--output {output} is a directory. Pass the features file path, e.g. {DEFAULT_OUTPUT}."
        )
    if not output.exists():
        if output.parent.exists() and not output.parent.is_dir():
            raise DocsError(
                f"--output {output}: {output.parent} is not a directory. Pass a path in a folder."
            )
        return None
    try:
        return output.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise DocsError(
            f"--output {output} exists and is not UTF-8 text, so it is no features file tunebot wrote. "
            "Move it away or pass another --output."
        ) from None
    except OSError as exc:
        raise DocsError(
            f"--output {output} cannot be read ({exc.strerror}). Pass a readable path."
        ) from None


def refresh_file(docs_dir: Path, output: Path, now: str | None = None) -> Refreshed:
    """Regenerate `output` in place; the file is only rewritten when its content changed."""
    output = Path(output)
    previous = read_previous(output)
    result = regenerate(docs_dir, previous, now)
    if result.changed:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(result.text, encoding="utf-8")
    return result
