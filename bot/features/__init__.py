"""MindIE-SD feature docs -> references/mindiesd-features.md, and `advise` over it.

Public API:
    build_table(docs_dir, previous_files=None) -> FeatureTable      (extract.py)
    render(table, sync_time, previous=None) -> str; parse(text)     (render.py)
    refresh_file(docs_dir, output) / regenerate(docs_dir, previous) (refresh.py)
    propose_refresh(repo, docs_dir, forge, base=None, ...)          (propose.py)
    load(report) -> Analysis; advise(table, analysis, hw, model, f) (analysis.py, advise.py)
"""

from bot.features.extract import build_table
from bot.features.model import DocsError, FeatureRow, FeatureTable
from bot.features.refresh import DEFAULT_OUTPUT, refresh_file, regenerate

__all__ = [
    "build_table",
    "DocsError",
    "FeatureRow",
    "FeatureTable",
    "DEFAULT_OUTPUT",
    "refresh_file",
    "regenerate",
]
