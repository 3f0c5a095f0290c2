"""A doc's heading tree -> its rows: which headings are features, and which sections each row owns."""

from __future__ import annotations

from bot.features import classify as cls
from bot.features import hardware as hw
from bot.features import markdown as md
from bot.features import reader


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


EXCLUDED = md.Section(level=-1, title="", anchor="")  # owner of reserved / unsupported sections


def owners(root: md.Section, rows: list[md.Section]) -> dict[int, md.Section]:
    """id(section) -> the row that owns it (or EXCLUDED). Unowned sections are shared by the doc."""
    row_ids = {id(r) for r in rows}
    owner: dict[int, md.Section] = {}
    stack: list[tuple[md.Section, md.Section | None]] = [(root, None)]
    while stack:
        node, current = stack.pop()
        if id(node) in row_ids:
            current = node
        elif node is not root and current is None and is_excluded(node):
            current = EXCLUDED
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


def group(root: md.Section, owner: dict[int, md.Section]) -> dict[int, list[md.Section]]:
    """id(row) -> its sections in document order; key 0 -> the doc's shared sections."""
    out: dict[int, list[md.Section]] = {}
    for s in root.walk():
        row = owner.get(id(s))
        out.setdefault(0 if row is None else id(row), []).append(s)
    return out


def texts(section: md.Section, doc: reader.Doc, name: str | None = None) -> list[str]:
    """Texts naming a row, most specific first: its name, its headings up to the title, the file name."""
    texts = [name] if name else []
    texts.append(section.title)
    node = section.parent
    while node is not None and node is not doc.root.parent:
        texts.append(node.title)
        node = node.parent
    return texts + [doc.stem]


def source(doc: reader.Doc, section: md.Section) -> str:
    return f"{doc.rel}#{section.anchor}" if section.anchor else doc.rel
