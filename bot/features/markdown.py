"""A small Markdown reader for feature docs: heading tree, pipe tables, code, imports.

Only what the feature table needs, written to survive the layouts the
MindIE-SD docs used over time: tables indented by a space, links and
`<ul><li>` lists in cells, U+FE0F after flag emoji, `#` comments inside fenced
code (never headings), heading levels that skip a step.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_SEPARATOR_CELL = re.compile(r"^\s*:?-{1,}:?\s*$")
_LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]*)(?:\s+\"[^\"]*\")?\)")
_TAG = re.compile(r"<[^>]+>")
_IMPORT = re.compile(r"^\s*from\s+(mindiesd(?:\.[A-Za-z_]\w*)*)\s+import\s+\(?([A-Za-z_][\w\s,]*?)\)?\s*(?:#.*)?$")
_SIGNATURE = re.compile(r"^([A-Za-z_][\w.]*)\s*\((.*)\)\s*(->\s*[^\n]+)?$", re.S)
VARIATION_SELECTOR = "\ufe0f"


@dataclass
class Table:
    header: list[str]  # raw cell text
    rows: list[list[str]]  # raw cell text, padded/truncated to len(header)


@dataclass
class CodeBlock:
    lang: str
    text: str


@dataclass
class Section:
    level: int  # 0: the synthetic document root
    title: str  # heading text with inline markup removed
    anchor: str  # GitHub-style slug, unique within the document ("" for the root)
    prose: list[str] = field(default_factory=list)  # text lines outside code and tables
    code: list[CodeBlock] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    children: list["Section"] = field(default_factory=list)
    parent: "Section | None" = field(default=None, repr=False, compare=False)

    def walk(self):
        """This section and every descendant, in document order."""
        yield self
        for child in self.children:
            yield from child.walk()

    def path(self) -> list["Section"]:
        """Ancestors from the nearest up to the root (self excluded)."""
        out, node = [], self.parent
        while node is not None:
            out.append(node)
            node = node.parent
        return out


def inline_text(text: str) -> str:
    """Markdown inline text as a reader sees it: no links, tags, emphasis or code ticks."""
    text = _LINK.sub(lambda m: m.group(1), text)
    text = _TAG.sub("", text)
    text = text.replace("`", "").replace("**", "").replace("__", "")
    text = html.unescape(text).replace(VARIATION_SELECTOR, "")
    return re.sub(r"\s+", " ", text).strip()


def slugify(title: str) -> str:
    """The anchor GitHub (and Gitee) generate: lower case, punctuation dropped, spaces -> '-'."""
    text = title.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _unique(slug: str, seen: dict[str, int]) -> str:
    if slug not in seen:
        seen[slug] = 0
        return slug
    while True:
        seen[slug] += 1
        candidate = f"{slug}-{seen[slug]}"
        if candidate not in seen:
            seen[candidate] = 0
            return candidate


def split_row(line: str) -> list[str]:
    """Cells of one pipe-table line; `|` inside code spans or escaped as `\\|` stays in the cell."""
    text = line.strip()
    if text.startswith("|"):
        text = text[1:]
    if text.endswith("|") and not text.endswith("\\|"):
        text = text[:-1]
    cells, current, in_code = [], [], False
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] == "|":
            current.append("|")
            i += 2
            continue
        if ch == "`":
            in_code = not in_code
        if ch == "|" and not in_code:
            cells.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
        i += 1
    cells.append("".join(current).strip())
    return cells


def _is_separator(line: str) -> bool:
    if "-" not in line:
        return False
    cells = split_row(line)
    return bool(cells) and all(_SEPARATOR_CELL.match(c) for c in cells)


def cell_text(cell: str) -> str:
    """A cell as plain text; list items and line breaks become '; '."""
    text = re.sub(r"</li>\s*<li>|<br\s*/?>", "; ", cell, flags=re.I)
    return inline_text(text).strip("; ").strip()


def cell_items(cell: str) -> list[str]:
    """The items of a cell: each `<li>` (or `<br>`-separated part), else the cell as one item."""
    items = re.findall(r"<li>(.*?)</li>", cell, flags=re.I | re.S)
    if not items:
        items = re.split(r"<br\s*/?>", cell, flags=re.I)
    return [t for t in (inline_text(i) for i in items) if t]


def code_names(text: str) -> list[str]:
    """Identifiers written as code in `text`, e.g. "`quantize` 接口" -> ["quantize"]."""
    return re.findall(r"`([^`]+)`", text)


def parse(text: str, title: str = "") -> Section:
    """Parse a document into a heading tree under a level-0 root titled `title`."""
    root = Section(level=0, title=title, anchor="")
    stack = [root]
    seen: dict[str, int] = {}
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        current = stack[-1]
        fence = _FENCE.match(line)
        if fence:
            mark = fence.group(1)
            lang = line.strip()[len(mark):].strip()
            body = []
            i += 1
            while i < len(lines) and not re.match(rf"^\s*{re.escape(mark[0])}{{{len(mark)},}}\s*$", lines[i]):
                body.append(lines[i])
                i += 1
            current.code.append(CodeBlock(lang=lang, text=_dedent("\n".join(body))))
            i += 1
            continue
        heading = _HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            name = inline_text(heading.group(2))
            while stack[-1].level >= level:
                stack.pop()
            section = Section(level=level, title=name, anchor=_unique(slugify(name), seen), parent=stack[-1])
            stack[-1].children.append(section)
            stack.append(section)
            i += 1
            continue
        if "|" in line and i + 1 < len(lines) and _is_separator(lines[i + 1]):
            header = split_row(line)
            rows = []
            i += 2
            while i < len(lines) and "|" in lines[i] and lines[i].strip():
                cells = split_row(lines[i])
                cells = (cells + [""] * len(header))[: len(header)]
                rows.append(cells)
                i += 1
            current.tables.append(Table(header=header, rows=rows))
            continue
        if line.strip():
            current.prose.append(line)
        i += 1
    return root


def _dedent(text: str) -> str:
    lines = text.split("\n")
    indents = [len(l) - len(l.lstrip()) for l in lines if l.strip()]
    cut = min(indents) if indents else 0
    return "\n".join(l[cut:] for l in lines)


def imports(text: str) -> list[str]:
    """`from mindiesd... import a, b` statements in `text`, normalized to one line each."""
    out = []
    for line in text.split("\n"):
        match = _IMPORT.match(line)
        if not match:
            continue
        names = [n.split(" as ")[0].strip() for n in match.group(2).split(",")]
        names = [n for n in names if re.fullmatch(r"[A-Za-z_]\w*", n)]
        if names:
            out.append(f"from {match.group(1)} import {', '.join(names)}")
    return out


def imported_names(statement: str) -> list[str]:
    return [n.strip() for n in statement.split(" import ", 1)[1].split(",")]


def signature(block: str) -> tuple[str, str] | None:
    """(name, one-line signature) when a code block is nothing but a call signature."""
    text = block.strip()
    match = _SIGNATURE.match(text)
    if not match or "\n\n" in text:
        return None
    depth = 0
    for ch in match.group(2):  # one call only: the arguments never close the opening paren
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return None
    if depth:
        return None
    one_line = re.sub(r"\s+", " ", text)
    one_line = re.sub(r"\(\s+", "(", one_line)
    one_line = re.sub(r",?\s*\)", ")", one_line)
    return match.group(1), one_line


def signature_params(sig: str) -> list[str]:
    """Parameter names of a one-line signature, e.g. 'f(a, b=1, **kw)' -> ['a', 'b', '**kw']."""
    inner = sig[sig.index("(") + 1 : sig.rindex(")")]
    out = []
    depth, current = 0, []
    for ch in inner + ",":
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            part = "".join(current).strip()
            current = []
            if part:
                name = re.split(r"[:=]", part, maxsplit=1)[0].strip()
                if name and name != "*":
                    out.append(name)
        else:
            current.append(ch)
    return out
