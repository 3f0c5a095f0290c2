"""The rows of one doc: one per feature section, plus its variants (algorithms, parameter values, switches)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from bot.features import classify as cls
from bot.features import crossrefs, facts, preference, reader, structure, support_matrix
from bot.features import hardware as hw
from bot.features import markdown as md
from bot.features.model import (
    KIND_ALGORITHM,
    KIND_FEATURE,
    KIND_SWITCH,
    KIND_VALUE,
    FeatureRow,
    MatrixTable,
)


def doc_rows(
    doc: reader.Doc, matrix: list[MatrixTable]
) -> tuple[list[FeatureRow], list[crossrefs.Stub]]:
    if preference.is_guide(doc):
        return [], []
    rows = structure.row_sections(doc.root)
    owner = structure.owners(doc.root, rows)
    groups = structure.group(doc.root, owner)
    shared = groups.get(0, [])
    shared_imports = facts.imports(shared)
    shared_limits = facts.limits(shared, doc.aliases)
    shared_params = facts.params(shared)
    statements = preference.preferences(doc)
    by_row: dict[int, FeatureRow] = {}
    out: list[FeatureRow] = []
    stubs: list[crossrefs.Stub] = []
    for section in rows:
        own = groups.get(id(section), [])
        imports = facts.imports(own) or shared_imports
        names = {n for s in imports for n in md.imported_names(s)}
        signatures = facts.signatures(own, names) or facts.signatures(shared, names)
        params = facts.key_params(facts.params(own), signatures) or facts.key_params(
            shared_params, signatures
        )
        texts = structure.texts(section, doc)
        name = section.title or doc.stem
        said = [
            (score, words)
            for subject, score, words in statements
            if preference.about(subject, name)
        ]
        row = FeatureRow(
            direction=cls.direction_of(texts),
            name=name,
            kind=KIND_FEATURE,
            parent="",
            api=tuple(imports + signatures),
            params=tuple(params),
            hardware=tuple(
                sorted(
                    set(
                        facts.limits(own, doc.aliases)
                        + shared_limits
                        + facts.title_limits(name, doc.aliases)
                    )
                )
            ),
            models=support_matrix.models_for(texts, matrix),
            sources=(structure.source(doc, section),),
            preference=f"{said[0][1]} ({doc.rel})" if said else "",
        )
        target = crossrefs.stub_target(doc, section, own)
        if target is not None:
            stubs.append(crossrefs.Stub(row, target))
            continue
        by_row[id(section)] = row
        out.append(row)
    out += variants(doc, owner, by_row, matrix, shared_imports, shared_limits)
    return out, stubs


_SWITCH = re.compile(r"^(\w+)\.(enable_\w+)$")


@dataclass(frozen=True)
class _Where:
    """What every variant row found in one section shares."""

    sources: tuple[str, ...]
    limits: tuple[hw.HardwareLimit, ...]
    direction: str
    parent: str
    api: tuple[str, ...]
    texts: tuple[str, ...]


def variants(
    doc: reader.Doc,
    owner: dict[int, md.Section],
    by_row: dict[int, FeatureRow],
    matrix: list[MatrixTable],
    shared_imports: list[str],
    shared_limits: list[hw.HardwareLimit],
) -> list[FeatureRow]:
    """Rows for algorithms, parameter values and switches, attached to the feature they belong to."""
    out: list[FeatureRow] = []
    for section in doc.root.walk():
        row_section = owner.get(id(section))
        if row_section is structure.EXCLUDED:
            continue
        parent_row = by_row.get(id(row_section)) if row_section is not None else None
        if row_section is not None and parent_row is None:
            continue  # a cross-reference stub: its target holds the facts
        direction: str
        parent: str
        api: tuple[str, ...]
        if parent_row is not None and row_section is not None:
            direction, parent, api = parent_row.direction, parent_row.name, parent_row.api
            limits = parent_row.hardware
            texts = structure.texts(row_section, doc)
        else:
            # Shared section: the variant belongs to the nearest named heading above it (e.g. CacheConfig).
            named = next(
                (s for s in [section, *section.path()] if not cls.is_generic(s.title)), doc.root
            )
            texts = structure.texts(section, doc)
            local = facts.imports(list(named.walk())) or shared_imports
            direction, parent, api = cls.direction_of(texts), named.title or doc.stem, tuple(local)
            limits = tuple(sorted(set(shared_limits)))
        where = _Where(
            (structure.source(doc, section),), limits, direction, parent, api, tuple(texts)
        )

        def add(
            name: str,
            kind: str,
            params: tuple[str, ...],
            note: str,
            extra: tuple[hw.HardwareLimit, ...] = (),
            where: _Where = where,  # this section's context, bound when `add` is defined
        ) -> None:
            out.append(
                FeatureRow(
                    name=name,
                    kind=kind,
                    params=params,
                    note=note,
                    sources=where.sources,
                    hardware=tuple(sorted(set(where.limits + extra))),
                    direction=where.direction,
                    parent=where.parent,
                    api=where.api,
                    models=support_matrix.models_for([name, *where.texts], matrix),
                )
            )

        for table in section.tables:
            heads = [md.cell_text(h) for h in table.header]
            if heads and cls.header_is(heads[0], cls.ALGORITHM_HEADERS):
                for cells in table.rows:
                    name = md.cell_text(cells[0])
                    if name:
                        note = "; ".join(
                            f"{h}: {md.cell_text(c)}"
                            for h, c in zip(heads[1:], cells[1:], strict=False)
                            if md.cell_text(c)
                        )
                        add(name, KIND_ALGORITHM, parent_row.params if parent_row else (), note)
        for _, params in facts.param_tables(section):
            for param in params:
                switch = _SWITCH.match(param.name)
                if switch:
                    add(param.name, KIND_SWITCH, (param.name,), md.cell_text(param.description))
                    continue
                short = param.name.split(".")[-1]
                if not (short.endswith("type") or short == "method" or "algo" in short):
                    continue
                for value in re.findall(r'`["\']([^"\'`]+)["\']`', param.description):
                    setting = f'{short}="{value}"'
                    related = tuple(
                        p.name
                        for p in params
                        if p is not param
                        and re.search(
                            rf"{re.escape(short)}\s*=\s*[\"']{re.escape(value)}[\"']", p.description
                        )
                    )
                    add(setting, KIND_VALUE, (setting, *related), "")
        for line in section.prose:
            own_limits = tuple(
                lim
                for sentence in hw.sentences([md.inline_text(line)])
                for lim in hw.limits_in(sentence, doc.aliases)
            )
            for group in facts.PROSE_ALGOS.findall(line):
                for name in md.code_names(group):
                    add(name, KIND_ALGORITHM, parent_row.params if parent_row else (), "")
            for name in facts.ALGO_CONST.findall(line):
                note = md.inline_text(line.split("`")[-1]).lstrip("：:，, ")
                add(name, KIND_ALGORITHM, parent_row.params if parent_row else (), note, own_limits)
    return out


def merge(rows: list[FeatureRow]) -> list[FeatureRow]:
    """One row per (direction, name); later finds add their sources and limits."""
    merged: dict[tuple[str, str], FeatureRow] = {}
    for row in rows:
        if row.key not in merged:
            merged[row.key] = row
            continue
        first = merged[row.key]
        merged[row.key] = replace(
            first,
            sources=tuple(dict.fromkeys(first.sources + row.sources)),
            hardware=tuple(sorted(set(first.hardware + row.hardware))),
            params=tuple(dict.fromkeys(first.params + row.params)),
            preference=first.preference or row.preference,
        )
    return list(merged.values())
