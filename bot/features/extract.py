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
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import unquote

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
from bot.git import folders

MAX_PARAMS = 8
_VERSION = re.compile(
    r"(?:版本号?|[Vv]ersion|MindIE[ -]?SD)\s*[:：]?\s*[vV]?(\d+\.\d+(?:\.\d+)*(?:[-.]?(?:rc|RC|alpha|beta)\d*)?)"
)
_SWITCH = re.compile(r"^(\w+)\.(enable_\w+)$")
_MD_LINK = re.compile(r"\]\(([^)#\s]*\.md)(#[^)\s]*)?\)")


@dataclass
class Doc:
    rel: str  # path relative to the docs dir, posix
    root: md.Section  # the title section (H1) or the synthetic root
    stem: str
    aliases: dict[str, str] = field(
        default_factory=dict
    )  # hardware abbreviations its legend defines


@dataclass
class _Param:
    name: str
    required: bool
    description: str


MAX_DOCS = 500  # files under one docs dir
MAX_TOTAL_BYTES = 32 * 1024 * 1024


def _decode(raw: bytes, rel: str) -> str:
    """UTF-8 text of a doc; binary or other encodings are refused (never decoded lossily)."""
    if b"\x00" in raw[:65536]:
        raise DocsError(
            f"{rel} is a binary file, not Markdown text. Remove it from the docs dir "
            "(only the MindIE-SD feature *.md files belong there)."
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        where = f"byte {exc.start}"
    try:
        raw.decode("gb18030")
        guess = " It decodes as GBK/GB18030: convert it with `iconv -f GB18030 -t UTF-8`."
    except UnicodeDecodeError:
        guess = " Convert it to UTF-8."
    raise DocsError(
        f"{rel} is not valid UTF-8 ({where}); tunebot reads the docs as UTF-8 and does not guess.{guess}"
    )


def read_docs(docs_dir: Path) -> tuple[list[Doc], list[str]]:
    """Every *.md under `docs_dir` (sorted), parsed; DocsError for any file that cannot be read faithfully."""
    if not docs_dir.exists():
        raise DocsError(
            f"docs dir {docs_dir} does not exist. Pass --docs-dir <MindIE-SD>/docs/zh/features."
        )
    if not docs_dir.is_dir():
        raise DocsError(
            f"{docs_dir} is not a directory. Pass the folder that holds the feature *.md files."
        )
    paths = sorted(
        (p for p in docs_dir.rglob("*.md") if p.is_file()),
        key=lambda p: p.relative_to(docs_dir).as_posix(),
    )
    if not paths:
        raise DocsError(
            f"docs dir {docs_dir} holds no *.md files. Pass the MindIE-SD feature docs folder "
            "(docs/zh/features in the MindIE-SD repository)."
        )
    if len(paths) > MAX_DOCS:
        raise DocsError(
            f"docs dir {docs_dir} holds {len(paths)} *.md files (limit {MAX_DOCS}); "
            "pass the feature docs folder, not a whole repository."
        )
    docs: list[Doc] = []
    warnings: list[str] = []
    total = 0
    for path in paths:
        rel = path.relative_to(docs_dir).as_posix()
        size = path.stat().st_size
        total += size
        if size > md.MAX_DOC_BYTES:
            raise DocsError(
                f"{rel}: {size} bytes is over the {md.MAX_DOC_BYTES} byte limit for one feature doc "
                "(real ones are < 100 KB). Remove or split it."
            )
        if total > MAX_TOTAL_BYTES:
            raise DocsError(
                f"docs dir {docs_dir} holds over {MAX_TOTAL_BYTES} bytes of Markdown; "
                "pass the feature docs folder only."
            )
        text = _decode(path.read_bytes(), rel)
        text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
        try:
            tree = md.parse(text, title=path.stem, name=rel)
        except md.MarkdownError as exc:
            raise DocsError(str(exc)) from None
        docs.append(
            Doc(
                rel=rel,
                root=_title_section(tree, path.stem),
                stem=path.stem,
                aliases=hw.legend(text),
            )
        )
    return docs, warnings


def _title_section(tree: md.Section, stem: str) -> md.Section:
    """The single H1 when the doc is one titled tree, else the synthetic root (titled by file name)."""
    if (
        len(tree.children) == 1
        and tree.children[0].level == 1
        and not (tree.prose or tree.code or tree.tables)
    ):
        return tree.children[0]
    return tree


# ---------------------------------------------------------------- structure


def _first_sentence(section: md.Section) -> str:
    found = hw.sentences([md.inline_text(section.prose[0])]) if section.prose else []
    return found[0] if found else ""


def is_excluded(section: md.Section) -> bool:
    """A section that is no feature and lends none of its facts: a reserved or unsupported path."""
    return cls.is_unsupported(section.title, _first_sentence(section))


def is_tutorial(root: md.Section) -> bool:
    """A doc written as numbered steps ("第一步", "Step 1"): one feature, however many headings."""
    return sum(1 for s in root.walk() if cls.is_step(s.title)) >= 2


def _candidates(node: md.Section, under_generic: bool) -> list[md.Section]:
    out = []
    for child in node.children:
        if is_excluded(child) or cls.is_example(child.title):
            continue  # a reserved path, a usage example or a tutorial step: never a feature
        if cls.is_generic(child.title):
            out += _candidates(child, True)
        elif under_generic and cls.is_identifier(child.title):
            continue  # an API documented inside 接口说明: shared API, not a feature
        else:
            out.append(child)
    return out


def row_sections(node: md.Section, is_root: bool = True) -> list[md.Section]:
    """The sections of a doc that are rows of the table (see module doc).

    A titled doc (H1) is one feature unless it holds two or more feature headings;
    a doc without a title lists its features directly under the synthetic root.
    """
    if is_root and is_tutorial(node):
        return [node]
    kids = _candidates(node, False)
    if (is_root and node.level == 0 and kids) or len(kids) >= 2:
        return [s for k in kids for s in row_sections(k, False)]
    return [node]


_EXCLUDED = md.Section(level=-1, title="", anchor="")  # owner of reserved / unsupported sections


def _owners(root: md.Section, rows: list[md.Section]) -> dict[int, md.Section]:
    """id(section) -> the row that owns it (or _EXCLUDED). Unowned sections are shared by the doc."""
    row_ids = {id(r) for r in rows}
    owner: dict[int, md.Section] = {}
    stack: list[tuple[md.Section, md.Section | None]] = [(root, None)]
    while stack:
        node, current = stack.pop()
        if id(node) in row_ids:
            current = node
        elif node is not root and current is None and is_excluded(node):
            current = _EXCLUDED
        if current is not None:
            owner[id(node)] = current
        pending = []
        previous = None
        for child in node.children:
            inherited = current
            # A heading level slipped ("### 函数签名" next to "### api" instead of under it):
            # a generic section right after an empty row heading continues that row.
            if (
                current is None
                and previous is not None
                and id(previous) in row_ids
                and not previous.children
                and cls.is_generic(child.title)
            ):
                inherited = previous
            pending.append((child, inherited))
            previous = child
        stack.extend(reversed(pending))
    return owner


def _group(root: md.Section, owner: dict[int, md.Section]) -> dict[int, list[md.Section]]:
    """id(row) -> its sections in document order; key 0 -> the doc's shared sections."""
    out: dict[int, list[md.Section]] = {}
    for s in root.walk():
        row = owner.get(id(s))
        out.setdefault(0 if row is None else id(row), []).append(s)
    return out


# ---------------------------------------------------------------- facts of sections


def _imports(sections: list[md.Section]) -> list[str]:
    out: list[str] = []
    for section in sections:
        texts = [b.text for b in section.code] + [
            n for line in section.prose for n in md.code_names(line)
        ]
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
        req_col = next(
            (i for i, h in enumerate(heads) if any(w in h.lower() for w in cls.REQUIRED_HEADERS)),
            None,
        )
        desc_col = len(heads) - 1
        params = []
        for cells in table.rows:
            name = md.cell_text(cells[0])
            if not name:
                continue
            required = (
                req_col is not None
                and md.cell_text(cells[req_col]) in ("是", "Yes", "yes", "Y", "必选", "必填")
            ) or any(md.cell_text(c) == "必填" for c in cells[1:])
            params.append(_Param(name=name, required=required, description=cells[desc_col]))
        out.append((table, params))
    return out


def _params(sections: list[md.Section]) -> list[_Param]:
    """Parameters of the sections' parameter tables, first mention of each name."""
    params: list[_Param] = []
    seen: set[str] = set()
    for section in sections:
        for _, found in _param_tables(section):
            for p in found:
                if p.name not in seen:
                    seen.add(p.name)
                    params.append(p)
    return params


def _key_params(params: list[_Param], signatures: list[str]) -> list[str]:
    names = [p.name for p in params if p.required] + [
        p.name
        for p in params
        if not p.required
        and "预留" not in p.description
        and "reserved" not in p.description.lower()
    ]
    if not names:
        for sig in signatures:
            names += [
                n for n in md.signature_params(sig) if not n.startswith("*") and n not in names
            ]
    if len(names) > MAX_PARAMS:
        names = names[:MAX_PARAMS] + [f"…(+{len(names) - MAX_PARAMS})"]
    return names


def _limits(
    sections: list[md.Section], aliases: dict[str, str] | None = None
) -> list[hw.HardwareLimit]:
    """Limits stated in the sections' prose; a line that defines a variant ("`…W8A8_MXFP8)`：支持 A5")
    limits that variant only."""
    out: list[hw.HardwareLimit] = []
    for section in sections:
        lines = [l for l in section.prose if not (_ALGO_CONST.search(l) or _PROSE_ALGOS.search(l))]
        for sentence in hw.sentences([md.inline_text(l) for l in lines]):
            out += [l for l in hw.limits_in(sentence, aliases) if l not in out]
    return out


# ---------------------------------------------------------------- support matrix


def _is_model_table(table: md.Table) -> bool:
    return bool(table.header) and cls.header_is(md.cell_text(table.header[0]), cls.MODEL_HEADERS)


def is_matrix_doc(doc: Doc) -> bool:
    """A doc made only of model tables (and prose): the support matrix, not a feature."""
    sections = list(doc.root.walk())
    tables = [t for s in sections for t in s.tables]
    return (
        bool(tables)
        and all(_is_model_table(t) for t in tables)
        and not any(s.code for s in sections)
    )


def read_matrix(doc: Doc) -> list[MatrixTable]:
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


def _models_for(texts: list[str], matrix: list[MatrixTable]) -> tuple[str, ...] | None:
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


_STUB_WORDS = re.compile(r"参考|参见|请见|详见|\bsee\b|\brefer", re.I)
_ALGO_CONST = re.compile(r"`[^`]*?\b[A-Za-z]*Algo[A-Za-z]*\.([A-Z][A-Z0-9_]+)\b[^`]*`")
_PROSE_ALGOS = re.compile(
    r"((?:`[A-Za-z][A-Za-z0-9_]*`\s*(?:和|与|及|、|,|，|and|or)\s*)*`[A-Za-z][A-Za-z0-9_]*`)\s*(?:算法|algorithms?)",
    re.I,
)
_BOLD_SUBJECT = re.compile(r"^\s*\*\*(.+?)\*\*")


@dataclass
class Stub:
    """A row section that only points at another doc's section ("参考…：[Linear量化](x.md#linear量化)")."""

    row: FeatureRow
    target: tuple[str, str]  # (doc rel path, anchor or "")


def _stub_target(doc: Doc, section: md.Section, own: list[md.Section]) -> tuple[str, str] | None:
    if len(own) != 1 or section.code or section.tables or len(section.prose) > 3:
        return None
    text = " ".join(section.prose)
    links = [(t, a) for t, a in _MD_LINK.findall(text) if "://" not in t]
    if len(links) != 1 or not _STUB_WORDS.search(md.inline_text(text)):
        return None
    target, anchor = (unquote(x) for x in links[0])
    rel = Path(os.path.normpath(Path(doc.rel).parent / target)).as_posix()
    return rel, md.slugify(anchor[1:]) if anchor else ""


def _preferences(doc: Doc) -> list[tuple[str, int, str]]:
    """(subject, score, words) of each statement of preference in the doc ("**Ulysses（USP）**：…推荐优先使用")."""
    out = []
    for section in doc.root.walk():
        for line in section.prose:
            m = _BOLD_SUBJECT.match(line)
            subject = md.inline_text(m.group(1)) if m else ""
            if not subject:
                continue
            score, words = cls.preference(md.inline_text(line))
            if score:
                out.append((subject, score, words))
    return out


_NAME_STOP = {
    "parallel",
    "parallelism",
    "sequence",
    "并行",
    "序列并行",
    "模式",
    "mode",
    "优先",
    "优先使用",
    "备选",
}


def _initials(name: str) -> str:
    return "".join(w[0] for w in re.findall(r"[A-Za-z][A-Za-z0-9_]*", name)).upper()


def _about(subject: str, name: str) -> bool:
    """Whether a preference statement's subject names this row (shared word or its abbreviation)."""
    words = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9_.]*", subject)} - _NAME_STOP
    mine = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9_.]*", name)} - _NAME_STOP
    abbrevs = {a.upper() for a in re.findall(r"[（(]([A-Za-z]{2,6})[）)]", subject)}
    return (
        bool(words & mine)
        or (len(_initials(name)) >= 2 and _initials(name) in abbrevs)
        or (len(name) >= 2 and name in subject)
    )


def is_guide(doc: Doc) -> bool:
    """A tuning guide or index page (调优指南.md, README): it points at features, it documents none."""
    return any(cls.has_word(t, w) for t in (doc.stem, doc.root.title) for w in cls.GUIDE_WORDS)


def _title_limits(title: str, aliases: dict[str, str]) -> list[hw.HardwareLimit]:
    """Hardware a feature heading names in parentheses ("W8A8 动态量化（A2/A3）"): only those."""
    out: list[hw.HardwareLimit] = []
    for inner in re.findall(r"[（(]([^（）()]*)[）)]", title):
        out += [
            hw.HardwareLimit("仅", p)
            for p in hw.products(inner, aliases)
            if hw.HardwareLimit("仅", p) not in out
        ]
    return out


def _doc_rows(doc: Doc, matrix: list[MatrixTable]) -> tuple[list[FeatureRow], list[Stub]]:
    if is_guide(doc):
        return [], []
    rows = row_sections(doc.root)
    owner = _owners(doc.root, rows)
    groups = _group(doc.root, owner)
    shared = groups.get(0, [])
    shared_imports = _imports(shared)
    shared_limits = _limits(shared, doc.aliases)
    shared_params = _params(shared)
    statements = _preferences(doc)
    by_row: dict[int, FeatureRow] = {}
    out: list[FeatureRow] = []
    stubs: list[Stub] = []
    for section in rows:
        own = groups.get(id(section), [])
        imports = _imports(own) or shared_imports
        names = {n for s in imports for n in md.imported_names(s)}
        signatures = _signatures(own, names) or _signatures(shared, names)
        params = _key_params(_params(own), signatures) or _key_params(shared_params, signatures)
        texts = _texts(section, doc)
        name = section.title or doc.stem
        said = [(score, words) for subject, score, words in statements if _about(subject, name)]
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
                        _limits(own, doc.aliases) + shared_limits + _title_limits(name, doc.aliases)
                    )
                )
            ),
            models=_models_for(texts, matrix),
            sources=(_source(doc, section),),
            preference=f"{said[0][1]} ({doc.rel})" if said else "",
        )
        target = _stub_target(doc, section, own)
        if target is not None:
            stubs.append(Stub(row, target))
            continue
        by_row[id(section)] = row
        out.append(row)
    out += _variants(doc, owner, by_row, matrix, shared_imports, shared_limits)
    return out, stubs


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
        if row_section is _EXCLUDED:
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
            texts = _texts(row_section, doc)
        else:
            # Shared section: the variant belongs to the nearest named heading above it (e.g. CacheConfig).
            named = next(
                (s for s in [section, *section.path()] if not cls.is_generic(s.title)), doc.root
            )
            texts = _texts(section, doc)
            local = _imports(list(named.walk())) or shared_imports
            direction, parent, api = cls.direction_of(texts), named.title or doc.stem, tuple(local)
            limits = tuple(sorted(set(shared_limits)))
        source = (_source(doc, section),)

        def add(
            name: str,
            kind: str,
            params: tuple[str, ...],
            note: str,
            extra: tuple[hw.HardwareLimit, ...] = (),
        ) -> None:
            out.append(
                FeatureRow(
                    name=name,
                    kind=kind,
                    params=params,
                    note=note,
                    sources=source,
                    hardware=tuple(sorted(set(limits + extra))),
                    direction=direction,
                    parent=parent,
                    api=api,
                    models=_models_for([name, *texts], matrix),
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
                            for h, c in zip(heads[1:], cells[1:])
                            if md.cell_text(c)
                        )
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
                l
                for sentence in hw.sentences([md.inline_text(line)])
                for l in hw.limits_in(sentence, doc.aliases)
            )
            for group in _PROSE_ALGOS.findall(line):
                for name in md.code_names(group):
                    add(name, KIND_ALGORITHM, parent_row.params if parent_row else (), "")
            for name in _ALGO_CONST.findall(line):
                note = md.inline_text(line.split("`")[-1]).lstrip("：:，, ")
                add(name, KIND_ALGORITHM, parent_row.params if parent_row else (), note, own_limits)
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
            preference=first.preference or row.preference,
        )
    return list(merged.values())


def _resolve_stubs(rows: list[FeatureRow], stubs: list[Stub]) -> tuple[list[FeatureRow], list[str]]:
    """Merge each stub into the row it points at (the target keeps its own facts and cites the stub);
    a stub whose target is not a row stays a row of its own, with a warning."""
    warnings = []
    for stub in stubs:
        rel, anchor = stub.target
        candidates = [
            i
            for i, r in enumerate(rows)
            if r.kind == KIND_FEATURE and r.sources[0].split("#")[0] == rel
        ]
        exact = [i for i in candidates if r_anchor(rows[i]) == anchor] if anchor else []
        index = (
            exact[0] if exact else (candidates[0] if not anchor and len(candidates) == 1 else None)
        )
        if index is None:
            warnings.append(
                f"{stub.row.sources[0]} points to {rel}{'#' + anchor if anchor else ''}, "
                "which is not a feature row; kept as its own row."
            )
            rows.append(stub.row)
            continue
        target = rows[index]
        rows[index] = replace(
            target, sources=tuple(dict.fromkeys(target.sources + stub.row.sources))
        )
    return rows, warnings


def r_anchor(row: FeatureRow) -> str:
    return row.sources[0].split("#", 1)[1] if "#" in row.sources[0] else ""


# ---------------------------------------------------------------- provenance


def provenance(docs_dir: Path) -> tuple[str, str | None]:
    """(label, commit): the docs dir's path inside its git repo and the last commit touching it."""
    top = folders.toplevel(docs_dir)
    if not top:
        return docs_dir.resolve().name, None
    rel = docs_dir.resolve().relative_to(top.resolve()).as_posix() or "."
    commit = folders.last_commit(docs_dir)
    if commit and folders.has_changes(docs_dir):
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
                        out.append(
                            f"{doc.rel} links to {target}, which is not in the docs dir (renamed or removed?)."
                        )
                    elif (
                        anchor
                        and md.slugify(anchor[1:]) not in anchors[rel]
                        and anchor[1:] not in anchors[rel]
                    ):
                        out.append(
                            f"{doc.rel} links to {target}{anchor}, a heading {target} no longer has."
                        )
    return list(dict.fromkeys(out))


def build_table(docs_dir: Path, previous_files: list[str] | None = None) -> FeatureTable:
    """Read the docs dir and build the table. `previous_files`: files the last table was built from."""
    docs_dir = Path(docs_dir)
    docs, warnings = read_docs(docs_dir)
    matrix_docs = [d for d in docs if is_matrix_doc(d)]
    matrix = [t for d in matrix_docs for t in read_matrix(d)]
    if not matrix:
        warnings.append(
            "no support-matrix doc found (a doc of model tables): supported models are 未声明 everywhere."
        )
    rows: list[FeatureRow] = []
    stubs: list[Stub] = []
    for doc in docs:
        if doc not in matrix_docs:
            found, doc_stubs = _doc_rows(doc, matrix)
            rows += found
            stubs += doc_stubs
    rows, stub_warnings = _resolve_stubs(rows, stubs)
    warnings += stub_warnings
    files = [d.rel for d in docs]
    for gone in previous_files or []:
        if gone not in files:
            warnings.append(
                f"{gone} was read for the previous table but is missing now (renamed or removed?)."
            )
    warnings += _link_warnings(docs, docs_dir)
    label, commit = provenance(docs_dir)
    rows = sorted(
        _merge(rows), key=lambda r: cls.DIRECTION_ORDER.index(r.direction)
    )  # stable: doc order within
    return FeatureTable(
        rows=rows,
        matrix=matrix,
        files=files,
        docs_label=label,
        source_commit=commit,
        docs_version=docs_version(docs),
        warnings=warnings,
    )
