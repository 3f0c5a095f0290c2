"""Files of the installed TileLang, read as text and never imported (importing it could run
compiler set-up code, and it is absent on most hosts tunebot runs on)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path


def tilelang_files(relative: str) -> Iterator[tuple[Path, str]]:
    """(path, text) of `relative` (e.g. "jit/jit_npu.py") in each location of the installed
    `tilelang` package, in search order; nothing when TileLang is not installed."""
    try:
        spec = importlib.util.find_spec("tilelang")
    except (ImportError, ValueError):
        return
    for base in (spec.submodule_search_locations or []) if spec else []:
        path = Path(base) / relative
        try:
            yield path, path.read_text(encoding="utf-8")
        except OSError:
            continue
