"""Feature docs as a heading tree (prose, code, tables per section), read with markdown-it-py.

The parser is markdown-it-py (CommonMark with the GFM table rule), so code
fences, tables inside list items, escaped pipes and HTML in cells follow the
same rules GitHub and Gitee use; a `#` inside fenced code is never a heading.
Parsing is linear in the input; `MAX_DOC_BYTES` and `MAX_TABLE_ROWS` bound the
work per file and fail with a clear error instead of running for minutes.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from markdown_it import MarkdownIt

from bot.errors import TunebotError

MAX_DOC_BYTES = 4 * 1024 * 1024  # real feature docs are < 100 KB
MAX_TABLE_ROWS = 5000  # the largest real table (support matrix) has < 100 rows

_LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]*)(?:\s+\"[^\"]*\")?\)")
_TAG = re.compile(r"<[^>]+>")
_IMPORT = re.compile(
    r"^\s*from\s+(mindiesd(?:\.[A-Za-z_]\w*)*)\s+import\s+\(?([A-Za-z_][\w, ]*)\)?\s*(?:#.*)?$"
)
_SIGNATURE = re.compile(r"^([A-Za-z_][\w.]*)\s*\((.*)\)\s*(->\s*[^\n]+)?$", re.S)
_PIPE_ROW = re.compile(r"^\s*\|.*\|\s*$")
VARIATION_SELECTOR = "\ufe0f"


class MarkdownError(TunebotError):
    """A document cannot be read as Markdown within the limits: names the problem and the fix."""

    exit_code = 2


@dataclass
class Table:
    header: list[str]  # raw cell text (Markdown inline source)
    rows: list[list[str]]  # raw cell text, padded/truncated to len(header)
    line: int = 0  # 1-based line of the header row


@dataclass
class CodeBlock:
    lang: str
    text: str


@dataclass
class Section:
    level: int  # 0: the synthetic document root
    title: str  # heading text with inline markup removed
    anchor: str  # GitHub-style slug, unique within the document ("" for the root)
    prose: list[str] = field(
        default_factory=list
    )  # paragraphs / list items / quotes, one entry per source line
    code: list[CodeBlock] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    children: list[Section] = field(default_factory=list)
    parent: Section | None = field(default=None, repr=False, compare=False)

    def walk(self):
        """This section and every descendant, in document order (iterative: deep trees are fine)."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def path(self) -> list[Section]:
        """Ancestors from the nearest up to the root (self excluded)."""
        out, node = [], self.parent
        while node is not None:
            out.append(node)
            node = node.parent
        return out


def inline_text(text: str) -> str:
    """Markdown inline text as a reader sees it: no links, tags, emphasis, escapes or code ticks."""
    text = _LINK.sub(lambda m: m.group(1), text)
    text = _TAG.sub("", text)
    text = text.replace("\\|", "|").replace("\\_", "_").replace("\\*", "*")
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


_PARSER = MarkdownIt("commonmark", {"html": True}).enable("table")


def parse(text: str, title: str = "", name: str = "document") -> Section:
    """Parse a document into a heading tree under a level-0 root titled `title`.

    `name` is used in errors. Raises MarkdownError for a document over MAX_DOC_BYTES,
    a table over MAX_TABLE_ROWS rows, or pipe-table lines that do not form a table.
    """
    size = len(text.encode("utf-8"))
    if size > MAX_DOC_BYTES:
        raise MarkdownError(
            f"{name}: {size} bytes is over the {MAX_DOC_BYTES} byte limit for one feature doc. "
            "Pass the MindIE-SD feature docs folder; split or remove this file."
        )
    root = Section(level=0, title=title, anchor="")
    stack = [root]
    seen: dict[str, int] = {}
    tokens = _PARSER.parse(text.replace("\r\n", "\n").replace("\r", "\n"))
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        current = stack[-1]
        if tok.type == "heading_open" and tok.level == 0 and tok.markup in ("-", "="):
            # A setext heading: in these docs a paragraph (often just an image) followed by a
            # "---" separator. Read as the paragraph it was meant to be.
            current.prose.extend(line for line in tokens[i + 1].content.split("\n") if line.strip())
            i += 3
            continue
        if tok.type == "heading_open" and tok.level == 0:
            level = int(tok.tag[1])
            heading = inline_text(tokens[i + 1].content)
            while stack[-1].level >= level:
                stack.pop()
            section = Section(
                level=level, title=heading, anchor=_unique(slugify(heading), seen), parent=stack[-1]
            )
            stack[-1].children.append(section)
            stack.append(section)
            i += 3
            continue
        if tok.type in ("fence", "code_block"):
            current.code.append(
                CodeBlock(lang=(tok.info or "").strip(), text=_dedent(tok.content.rstrip("\n")))
            )
        elif tok.type == "table_open":
            i = _table(tokens, i, current, name)
            continue
        elif tok.type == "inline":
            line = (tok.map[0] + 1) if tok.map else 0
            lines = tok.content.split("\n")
            if len(lines) >= 2 and all(_PIPE_ROW.match(line) for line in lines):
                raise MarkdownError(
                    f"{name}:{line}: these lines look like a pipe table but do not form one "
                    "(a missing or malformed '|---|' separator row, or a column count that "
                    "differs from the header). Fix the table in the doc."
                )
            current.prose.extend(line for line in lines if line.strip())
        elif tok.type == "html_block":
            current.prose.extend(line for line in tok.content.split("\n") if line.strip())
        i += 1
    return root


def _table(tokens: list, i: int, section: Section, name: str) -> int:
    """Read the table starting at tokens[i] (table_open) into `section`; returns the index after it."""
    line = (tokens[i].map[0] + 1) if tokens[i].map else 0
    header: list[str] = []
    rows: list[list[str]] = []
    row: list[str] | None = None
    in_head = False
    i += 1
    while i < len(tokens) and tokens[i].type != "table_close":
        t = tokens[i]
        if t.type == "thead_open":
            in_head = True
        elif t.type == "thead_close":
            in_head = False
        elif t.type == "tr_open":
            row = []
        elif t.type == "inline" and row is not None:
            row.append(t.content.strip())
        elif t.type == "tr_close" and row is not None:
            if in_head:
                header = row
            else:
                rows.append((row + [""] * len(header))[: len(header)])
                if len(rows) > MAX_TABLE_ROWS:
                    raise MarkdownError(
                        f"{name}:{line}: a table of more than {MAX_TABLE_ROWS} rows; a feature doc "
                        "table this large is not documentation. Remove or split it."
                    )
            row = None
        i += 1
    section.tables.append(Table(header=header, rows=rows, line=line))
    return i + 1


def _dedent(text: str) -> str:
    lines = text.split("\n")
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    cut = min(indents) if indents else 0
    return "\n".join(line[cut:] for line in lines)


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
    depth = 0
    current: list[str] = []
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
