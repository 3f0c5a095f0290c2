#!/usr/bin/env python3
"""Regenerate references/mindiesd-features.md from the MindIE-SD feature docs.

A thin entry point for schedules and people without the `tunebot` command:
the same options as `tunebot refresh-features` (see docs/features.md), e.g.

    python scripts/refresh_features.py --docs-dir MindIE-SD/docs/zh/features \
        --output references/mindiesd-features.md
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.cli.features import refresh_features  # noqa: E402

if __name__ == "__main__":
    refresh_features(prog_name="refresh_features.py")
