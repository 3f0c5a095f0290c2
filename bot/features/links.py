"""Links between docs, and the ones whose target file or heading is gone."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote

from bot.features import markdown as md
from bot.features import reader

MD_LINK = re.compile(r"\]\(([^)#\s]*\.md)(#[^)\s]*)?\)")


def link_warnings(docs: list[reader.Doc], docs_dir: Path) -> list[str]:
    """Links between docs whose target file or anchor is gone: a doc was renamed or removed."""
    anchors = {d.rel: {s.anchor for s in d.root.walk()} for d in docs}
    out = []
    for doc in docs:
        base = Path(doc.rel).parent
        for section in doc.root.walk():
            for line in section.prose:
                for quoted_target, quoted_anchor in MD_LINK.findall(line):
                    target, anchor = unquote(quoted_target), unquote(quoted_anchor)
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
