"""MindIE-SD feature docs -> FeatureTable. Generic: no file name or doc content is known here.

How a doc becomes rows:
- Its heading tree is read; generic headings (原理, 参数说明, 使用示例...) structure a
  feature's text, other headings name features. A heading with two or more
  feature headings below it is a container (e.g. "FA 系列"); the rest are rows.
  API headings under a generic heading (e.g. "接口说明 > CacheConfig") document
  the doc's shared API rather than a feature. A doc with no feature heading is
  one row, named by its title.
- Each row collects from the sections it owns: `from mindiesd... import` lines,
  call signatures, parameter tables, and hardware limits stated in prose.
  Sections owned by no row are shared by all rows of the doc.
- Variants become their own rows: algorithm tables, "`X` 算法" in prose, the
  quoted values of `*_type` / `method` / `*algo*` parameters, and grouped
  `group.enable_*` switches.
- Supported models are joined from support-matrix docs (docs made only of
  model tables) by column name.
"""

from __future__ import annotations

from pathlib import Path

from bot.features import classify as cls
from bot.features import crossrefs, feature_rows, links, provenance, reader, support_matrix
from bot.features.model import (
    FeatureRow,
    FeatureTable,
)


def build_table(docs_dir: Path, previous_files: list[str] | None = None) -> FeatureTable:
    """Read the docs dir and build the table. `previous_files`: files the last table was built from."""
    docs_dir = Path(docs_dir)
    docs, warnings = reader.read_docs(docs_dir)
    matrix_docs = [d for d in docs if support_matrix.is_matrix_doc(d)]
    matrix = [t for d in matrix_docs for t in support_matrix.read_matrix(d)]
    if not matrix:
        warnings.append(
            "no support-matrix doc found (a doc of model tables): supported models are 未声明 everywhere."
        )
    rows: list[FeatureRow] = []
    stubs: list[crossrefs.Stub] = []
    for doc in docs:
        if doc not in matrix_docs:
            found, doc_stubs = feature_rows.doc_rows(doc, matrix)
            rows += found
            stubs += doc_stubs
    rows, stub_warnings = crossrefs.resolve_stubs(rows, stubs)
    warnings += stub_warnings
    files = [d.rel for d in docs]
    for gone in previous_files or []:
        if gone not in files:
            warnings.append(
                f"{gone} was read for the previous table but is missing now (renamed or removed?)."
            )
    warnings += links.link_warnings(docs, docs_dir)
    label, commit = provenance.provenance(docs_dir)
    rows = sorted(
        feature_rows.merge(rows), key=lambda r: cls.DIRECTION_ORDER.index(r.direction)
    )  # stable: doc order within
    return FeatureTable(
        rows=rows,
        matrix=matrix,
        files=files,
        docs_label=label,
        source_commit=commit,
        docs_version=provenance.docs_version(docs),
        warnings=warnings,
    )
