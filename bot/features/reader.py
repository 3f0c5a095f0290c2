"""Doc sources: every *.md under a docs dir, read faithfully (UTF-8 only, size limits) and parsed."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from bot.features import hardware as hw
from bot.features import markdown as md
from bot.features.model import (
    DocsError,
)


@dataclass
class Doc:
    rel: str  # path relative to the docs dir, posix
    root: md.Section  # the title section (H1) or the synthetic root
    stem: str
    aliases: dict[str, str] = field(
        default_factory=dict
    )  # hardware abbreviations its legend defines


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
