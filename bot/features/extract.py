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

import os
import re
import subprocess
from urllib.parse import unquote
from dataclasses import dataclass, replace
from pathlib import Path

from bot.features import classify as cls
from bot.features import hardware as hw
from bot.features import markdown as md
from bot.features.model import (
    KIND_ALGORITHM,
    KIND_FEATURE,
    KIND_SWITCH,
    KIND_VALUE,
    DocsError,
    FeatureRow,
    FeatureTable,
    MatrixTable,
)

MAX_PARAMS = 8
_VERSION = re.compile(
    r"(?:版本号?|[Vv]ersion|MindIE[ -]?SD)\s*[:：]?\s*[vV]?(\d+\.\d+(?:\.\d+)*(?:[-.]?(?:rc|RC|alpha|beta)\d*)?)"
)
_PROSE_ALGO = re.compile(r"`([A-Za-z][A-Za-z0-9_]*)`\s*(?:算法|algorithm)", re.I)
_SWITCH = re.compile(r"^(\w+)\.(enable_\w+)$")
_MD_LINK = re.compile(r"\]\(([^)#\s]*\.md)(#[^)\s]*)?\)")


@dataclass
class Doc:
    rel: str  # path relative to the docs dir, posix
    root: md.Section  # the title section (H1) or the synthetic root
    stem: str


@dataclass
class _Param:
    name: str
    required: bool
    description: str


def read_docs(docs_dir: Path) -> tuple[list[Doc], list[str]]:
    """Every *.md under `docs_dir` (sorted), parsed; warnings for files that could not be read."""
    if not docs_dir.exists():
        raise DocsError(f"docs dir {docs_dir} does not exist. Pass --docs-dir <MindIE-SD>/docs/zh/features.")
    if not docs_dir.is_dir():
        raise DocsError(f"{docs_dir} is not a directory. Pass the folder that holds the feature *.md files.")
    paths = sorted(docs_dir.rglob("*.md"), key=lambda p: p.relative_to(docs_dir).as_posix())
    if not paths:
        raise DocsError(
            f"docs dir {docs_dir} holds no *.md files. Pass the MindIE-SD feature docs folder "
            "(docs/zh/features in the MindIE-SD repository)."
        )
    docs, warnings = [], []
    for path in paths:
        rel = path.relative_to(docs_dir).as_posix()
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", errors="replace")
            warnings.append(f"{rel}: not valid UTF-8; undecodable bytes replaced.")
        text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
        tree = md.parse(text, title=path.stem)
        docs.append(Doc(rel=rel, root=_title_section(tree, path.stem), stem=path.stem))
    return docs, warnings


def _title_section(tree: md.Section, stem: str) -> md.Section:
    """The single H1 when the doc is one titled tree, else the synthetic root (titled by file name)."""
    if len(tree.children) == 1 and tree.children[0].level == 1 and not (tree.prose or tree.code or tree.tables):
        return tree.children[0]
    return tree


# ---------------------------------------------------------------- structure


def _candidates(node: md.Section, under_generic: bool) -> list[md.Section]:
    out = []
    for child in node.children:
        if cls.is_generic(child.title):
            out += _candidates(child, True)
        elif under_generic and cls.is_identifier(child.title):
            continue  # an API documented inside 接口说明: shared API, not a feature
        else:
            out.append(child)
    return out


def row_sections(node: md.Section, is_root: bool = True) -> list[md.Section]:
    """The sections of a doc that are rows of the table (see module doc)."""
    kids = _candidates(node, False)
    if (is_root and kids) or len(kids) >= 2:
        return [s for k in kids for s in row_sections(k, False)]
    return [node]


def _owners(root: md.Section, rows: list[md.Section]) -> dict[int, md.Section]:
    """id(section) -> the row that owns it. Unowned sections are shared by the doc."""
    row_ids = {id(r) for r in rows}
    owner: dict[int, md.Section] = {}

    def visit(node: md.Section, current: md.Section | None) -> None:
        if id(node) in row_ids:
            current = node
        if current is not None:
            owner[id(node)] = current
        previous = None
        for child in node.children:
            inherited = current
            # A heading level slipped ("### 函数签名" next to "### api" instead of under it):
            # a generic section right after an empty row heading continues that row.
            if current is None and previous is not None and id(previous) in row_ids and not previous.children \
                    and cls.is_generic(child.title):
                inherited = previous
            visit(child, inherited)
            previous = child

    visit(root, None)
    return owner


def _sections_of(root: md.Section, owner: dict[int, md.Section], row: md.Section | None) -> list[md.Section]:
    if row is None:
        return [s for s in root.walk() if id(s) not in owner]
    return [s for s in root.walk() if owner.get(id(s)) is row]


# ---------------------------------------------------------------- facts of sections


def _imports(sections: list[md.Section]) -> list[str]:
    out: list[str] = []
    for section in sections:
        texts = [b.text for b in section.code] + [n for line in section.prose for n in md.code_names(line)]
        for text in texts:
            out += [s for s in md.imports(text) if s not in out]
    return out


def _signatures(sections: list[md.Section], names: set[str]) -> list[str]:
    out: list[str] = []
    for section in sections:
        titled = any(w in section.title.lower() for w in ("签名", "signature"))
        for block in section.code:
            found = md.signature(block.text)
            if found and (found[0].split(".")[-1] in names or titled) and found[1] not in out:
                out.append(found[1])
    return out


def _param_tables(section: md.Section) -> list[tuple[md.Table, list[_Param]]]:
    out = []
    for table in section.tables:
        if not table.header or not cls.header_is(md.cell_text(table.header[0]), cls.PARAM_HEADERS):
            continue
        heads = [md.cell_text(h) for h in table.header]
        req_col = next((i for i, h in enumerate(heads) if any(w in h.lower() for w in cls.REQUIRED_HEADERS)), None)
        desc_col = len(heads) - 1
        params = []
        for cells in table.rows:
            name = md.cell_text(cells[0])
            if not name:
                continue
            required = (req_col is not None and md.cell_text(cells[req_col]) in ("是", "Yes", "yes", "Y", "必选", "必填")) \
                or any(md.cell_text(c) == "必填" for c in cells[1:])
            params.append(_Param(name=name, required=required, description=cells[desc_col]))
        out.append((table, params))
    return out


def _key_params(sections: list[md.Section], signatures: list[str]) -> list[str]:
    params: list[_Param] = []
    for section in sections:
        for _, found in _param_tables(section):
            params += [p for p in found if p.name not in {q.name for q in params}]
    names = [p.name for p in params if p.required] + [
        p.name for p in params if not p.required and "预留" not in p.description and "reserved" not in p.description.lower()
    ]
    if not names:
        for sig in signatures:
            names += [n for n in md.signature_params(sig) if not n.startswith("*") and n not in names]
    if len(names) > MAX_PARAMS:
        names = names[:MAX_PARAMS] + [f"…(+{len(names) - MAX_PARAMS})"]
    return names


def _limits(sections: list[md.Section]) -> list[hw.HardwareLimit]:
    out: list[hw.HardwareLimit] = []
    for section in sections:
        prose = [l for l in section.prose if not l.lstrip().startswith("|")]
        for sentence in hw.sentences([md.inline_text(l) for l in prose]):
            out += [l for l in hw.limits_in(sentence) if l not in out]
    return out


# ---------------------------------------------------------------- support matrix


def _is_model_table(table: md.Table) -> bool:
    return bool(table.header) and cls.header_is(md.cell_text(table.header[0]), cls.MODEL_HEADERS)


def is_matrix_doc(doc: Doc) -> bool:
    """A doc made only of model tables (and prose): the support matrix, not a feature."""
    sections = list(doc.root.walk())
    tables = [t for s in sections for t in s.tables]
    return bool(tables) and all(_is_model_table(t) for t in tables) and not any(s.code for s in sections)


def read_matrix(doc: Doc) -> list[MatrixTable]:
    out = []
    for section in doc.root.walk():
        for table in section.tables:
            if not _is_model_table(table):
                continue
            heads = [md.cell_text(h) for h in table.header]
            hw_col = next((i for i, h in enumerate(heads) if cls.header_is(h, cls.HARDWARE_HEADERS)), None)
            flag_cols = [
                i for i in range(1, len(heads))
                if i != hw_col and any(cls.flag(r[i]) is not None for r in table.rows)
                and all(cls.flag(r[i]) is not None for r in table.rows if md.cell_text(r[i]))
            ]
            models = [md.cell_text(r[0]) for r in table.rows if md.cell_text(r[0])]
            flags = {heads[i]: [md.cell_text(r[0]) for r in table.rows if cls.flag(r[i])] for i in flag_cols}
            products = {}
            if hw_col is not None:
                for r in table.rows:
                    names = [p for item in md.cell_items(r[hw_col]) for p in hw.products(item)]
                    products[md.cell_text(r[0])] = list(dict.fromkeys(names))
            anchor = section.anchor
            out.append(MatrixTable(
                source=f"{doc.rel}#{anchor}" if anchor else doc.rel, title=section.title,
                columns=[heads[i] for i in flag_cols], models=models, flags=flags, hardware=products,
            ))
    return out


def _models_for(texts: list[str], matrix: list[MatrixTable]) -> tuple[str, ...] | None:
    """Models the matrix marks for the first topic column these texts are about; None if none applies."""
    for topic, _ in cls.MATRIX_TOPICS:
        columns = [(t, c) for t in matrix for c in t.columns if cls.topic_of(c) == topic]
        if columns and cls.has_topic(texts, topic):
            marked = {m for table, column in columns for m in table.flags[column]}
            universe = list(dict.fromkeys(m for t in matrix for m in t.models))
            return tuple(m for m in universe if m in marked)
    return None


# ---------------------------------------------------------------- rows


def _texts(section: md.Section, doc: Doc, name: str | None = None) -> list[str]:
    """Texts naming a row, most specific first: its name, its headings up to the title, the file name."""
    texts = [name] if name else []
    texts.append(section.title)
    node = section.parent
    while node is not None and node is not doc.root.parent:
        texts.append(node.title)
        node = node.parent
    return texts + [doc.stem]


def _source(doc: Doc, section: md.Section) -> str:
    return f"{doc.rel}#{section.anchor}" if section.anchor else doc.rel


def _doc_rows(doc: Doc, matrix: list[MatrixTable]) -> list[FeatureRow]:
    rows = row_sections(doc.root)
    owner = _owners(doc.root, rows)
    shared = _sections_of(doc.root, owner, None)
    shared_imports = _imports(shared)
    shared_limits = _limits(shared)
    by_row: dict[int, FeatureRow] = {}
    out: list[FeatureRow] = []
    for section in rows:
        own = _sections_of(doc.root, owner, section)
        imports = _imports(own) or shared_imports
        names = {n for s in imports for n in md.imported_names(s)}
        signatures = _signatures(own, names) or _signatures(shared, names)
        params = _key_params(own, signatures) or _key_params(shared, signatures)
        texts = _texts(section, doc)
        row = FeatureRow(
            direction=cls.direction_of(texts), name=section.title or doc.stem, kind=KIND_FEATURE, parent="",
            api=tuple(imports + signatures), params=tuple(params),
            hardware=tuple(sorted(set(_limits(own) + shared_limits))),
            models=_models_for(texts, matrix), sources=(_source(doc, section),),
        )
        by_row[id(section)] = row
        out.append(row)
    out += _variants(doc, owner, by_row, matrix, shared_imports, shared_limits)
    return out


def _variants(
    doc: Doc,
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
        parent_row = by_row.get(id(row_section)) if row_section is not None else None
        if parent_row is not None:
            base = dict(direction=parent_row.direction, parent=parent_row.name, api=parent_row.api,
                        hardware=parent_row.hardware)
            texts = _texts(row_section, doc)
        else:
            # Shared section: the variant belongs to the nearest named heading above it (e.g. CacheConfig).
            named = next((s for s in [section, *section.path()] if not cls.is_generic(s.title)), doc.root)
            texts = _texts(section, doc)
            local = _imports(list(named.walk())) or shared_imports
            base = dict(direction=cls.direction_of(texts), parent=named.title or doc.stem,
                        api=tuple(local), hardware=tuple(sorted(set(shared_limits))))
        source = (_source(doc, section),)

        def add(name: str, kind: str, params: tuple[str, ...], note: str) -> None:
            out.append(FeatureRow(name=name, kind=kind, params=params, note=note, sources=source,
                                  models=_models_for([name, *texts], matrix), **base))

        for table in section.tables:
            heads = [md.cell_text(h) for h in table.header]
            if heads and cls.header_is(heads[0], cls.ALGORITHM_HEADERS):
                for cells in table.rows:
                    name = md.cell_text(cells[0])
                    if name:
                        note = "; ".join(f"{h}: {md.cell_text(c)}" for h, c in zip(heads[1:], cells[1:]) if md.cell_text(c))
                        add(name, KIND_ALGORITHM, parent_row.params if parent_row else (), note)
        for _, params in _param_tables(section):
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
                        p.name for p in params
                        if p is not param and re.search(rf"{re.escape(short)}\s*=\s*[\"']{re.escape(value)}[\"']", p.description)
                    )
                    add(setting, KIND_VALUE, (setting, *related), "")
        for line in section.prose:
            for name in _PROSE_ALGO.findall(line):
                add(name, KIND_ALGORITHM, parent_row.params if parent_row else (), "")
    return out


def _merge(rows: list[FeatureRow]) -> list[FeatureRow]:
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
        )
    return list(merged.values())


# ---------------------------------------------------------------- provenance


def _git(cwd: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def provenance(docs_dir: Path) -> tuple[str, str | None]:
    """(label, commit): the docs dir's path inside its git repo and the last commit touching it."""
    top = _git(docs_dir, "rev-parse", "--show-toplevel")
    if not top:
        return docs_dir.resolve().name, None
    rel = docs_dir.resolve().relative_to(Path(top).resolve()).as_posix() or "."
    commit = _git(docs_dir, "log", "-1", "--format=%H", "--", ".")
    if commit and _git(docs_dir, "status", "--porcelain", "--", "."):
        commit += " (+ 未提交的修改)"
    return rel, commit or None


def docs_version(docs: list[Doc]) -> str | None:
    for doc in docs:
        for section in doc.root.walk():
            for line in section.prose:
                match = _VERSION.search(md.inline_text(line))
                if match:
                    return match.group(1)
    return None


def _link_warnings(docs: list[Doc], docs_dir: Path) -> list[str]:
    """Links between docs whose target file or anchor is gone: a doc was renamed or removed."""
    anchors = {d.rel: {s.anchor for s in d.root.walk()} for d in docs}
    out = []
    for doc in docs:
        base = Path(doc.rel).parent
        for section in doc.root.walk():
            for line in section.prose:
                for target, anchor in _MD_LINK.findall(line):
                    target, anchor = unquote(target), unquote(anchor)
                    if "://" in target:
                        continue
                    rel = Path(os.path.normpath(base / target)).as_posix()
                    if rel.startswith("../") or rel.startswith("/"):
                        continue
                    if rel not in anchors:
                        out.append(f"{doc.rel} links to {target}, which is not in the docs dir (renamed or removed?).")
                    elif anchor and md.slugify(anchor[1:]) not in anchors[rel] and anchor[1:] not in anchors[rel]:
                        out.append(f"{doc.rel} links to {target}{anchor}, a heading {target} no longer has.")
    return list(dict.fromkeys(out))


def build_table(docs_dir: Path, previous_files: list[str] | None = None) -> FeatureTable:
    """Read the docs dir and build the table. `previous_files`: files the last table was built from."""
    docs_dir = Path(docs_dir)
    docs, warnings = read_docs(docs_dir)
    matrix_docs = [d for d in docs if is_matrix_doc(d)]
    matrix = [t for d in matrix_docs for t in read_matrix(d)]
    if not matrix:
        warnings.append("no support-matrix doc found (a doc of model tables): supported models are 未声明 everywhere.")
    rows: list[FeatureRow] = []
    for doc in docs:
        if doc not in matrix_docs:
            rows += _doc_rows(doc, matrix)
    files = [d.rel for d in docs]
    for gone in previous_files or []:
        if gone not in files:
            warnings.append(f"{gone} was read for the previous table but is missing now (renamed or removed?).")
    warnings += _link_warnings(docs, docs_dir)
    label, commit = provenance(docs_dir)
    rows = sorted(_merge(rows), key=lambda r: cls.DIRECTION_ORDER.index(r.direction))  # stable: doc order within
    return FeatureTable(
        rows=rows, matrix=matrix, files=files, docs_label=label, source_commit=commit,
        docs_version=docs_version(docs), warnings=warnings,
    )
