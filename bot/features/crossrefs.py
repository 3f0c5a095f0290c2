"""Cross-reference stubs: a row section that only points at another doc's section is merged into it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import unquote

from bot.features import links, reader
from bot.features import markdown as md
from bot.features.model import (
    KIND_FEATURE,
    FeatureRow,
)

_STUB_WORDS = re.compile(r"参考|参见|请见|详见|\bsee\b|\brefer", re.I)


@dataclass
class Stub:
    """A row section that only points at another doc's section ("参考…：[Linear量化](x.md#linear量化)")."""

    row: FeatureRow
    target: tuple[str, str]  # (doc rel path, anchor or "")


def stub_target(
    doc: reader.Doc, section: md.Section, own: list[md.Section]
) -> tuple[str, str] | None:
    if len(own) != 1 or section.code or section.tables or len(section.prose) > 3:
        return None
    text = " ".join(section.prose)
    found = [(t, a) for t, a in links.MD_LINK.findall(text) if "://" not in t]
    if len(found) != 1 or not _STUB_WORDS.search(md.inline_text(text)):
        return None
    target, anchor = (unquote(x) for x in found[0])
    rel = Path(os.path.normpath(Path(doc.rel).parent / target)).as_posix()
    return rel, md.slugify(anchor[1:]) if anchor else ""


def resolve_stubs(rows: list[FeatureRow], stubs: list[Stub]) -> tuple[list[FeatureRow], list[str]]:
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
