"""The `slow` marker names real test modules, so a renamed module cannot drop out of it unseen."""

from __future__ import annotations

from pathlib import Path

from conftest import SLOW_MODULES


def test_every_slow_module_exists():
    here = Path(__file__).resolve().parent
    assert sorted(m for m in SLOW_MODULES if not (here / f"{m}.py").is_file()) == []
