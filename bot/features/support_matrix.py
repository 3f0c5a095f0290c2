"""The support matrix: docs made only of model tables, and the models it marks for a topic."""

from __future__ import annotations

from bot.features import classify as cls
from bot.features import hardware as hw
from bot.features import markdown as md
from bot.features import reader
from bot.features.model import (
    MatrixTable,
)


def _is_model_table(table: md.Table) -> bool:
    return bool(table.header) and cls.header_is(md.cell_text(table.header[0]), cls.MODEL_HEADERS)


def is_matrix_doc(doc: reader.Doc) -> bool:
    """A doc made only of model tables (and prose): the support matrix, not a feature."""
    sections = list(doc.root.walk())
    tables = [t for s in sections for t in s.tables]
    return (
        bool(tables)
        and all(_is_model_table(t) for t in tables)
        and not any(s.code for s in sections)
    )


def read_matrix(doc: reader.Doc) -> list[MatrixTable]:
    out = []
    for section in doc.root.walk():
        for table in section.tables:
            if not _is_model_table(table):
                continue
            heads = [md.cell_text(h) for h in table.header]
            hw_col = next(
                (i for i, h in enumerate(heads) if cls.header_is(h, cls.HARDWARE_HEADERS)), None
            )
            flag_cols = [
                i
                for i in range(1, len(heads))
                if i != hw_col
                and any(cls.flag(r[i]) is not None for r in table.rows)
                and all(cls.flag(r[i]) is not None for r in table.rows if md.cell_text(r[i]))
            ]
            models = [md.cell_text(r[0]) for r in table.rows if md.cell_text(r[0])]
            flags = {
                heads[i]: [md.cell_text(r[0]) for r in table.rows if cls.flag(r[i])]
                for i in flag_cols
            }
            products = {}
            if hw_col is not None:
                for r in table.rows:
                    names = [
                        p
                        for item in md.cell_items(r[hw_col])
                        for p in hw.products(item, doc.aliases)
                    ]
                    products[md.cell_text(r[0])] = list(dict.fromkeys(names))
            anchor = section.anchor
            out.append(
                MatrixTable(
                    source=f"{doc.rel}#{anchor}" if anchor else doc.rel,
                    title=section.title,
                    columns=[heads[i] for i in flag_cols],
                    models=models,
                    flags=flags,
                    hardware=products,
                )
            )
    return out


def models_for(texts: list[str], matrix: list[MatrixTable]) -> tuple[str, ...] | None:
    """Models the matrix marks for the topic the most specific text names (the row's own name
    first, then its headings, then the file name); None when no matrix column is about it."""
    for text in texts:
        for topic, _ in cls.MATRIX_TOPICS:
            columns = [(t, c) for t in matrix for c in t.columns if cls.topic_of(c) == topic]
            if columns and cls.has_topic([text], topic):
                marked = {m for table, column in columns for m in table.flags[column]}
                universe = list(dict.fromkeys(m for t in matrix for m in t.models))
                return tuple(m for m in universe if m in marked)
    return None
