"""Facts a row collects from its sections: imports, signatures, parameter tables, hardware limits."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.features import classify as cls
from bot.features import hardware as hw
from bot.features import markdown as md

MAX_PARAMS = 8


@dataclass
class Param:
    name: str
    required: bool
    description: str


ALGO_CONST = re.compile(r"`[^`]*?\b[A-Za-z]*Algo[A-Za-z]*\.([A-Z][A-Z0-9_]+)\b[^`]*`")


PROSE_ALGOS = re.compile(
    r"((?:`[A-Za-z][A-Za-z0-9_]*`\s*(?:和|与|及|、|,|，|and|or)\s*)*`[A-Za-z][A-Za-z0-9_]*`)\s*(?:算法|algorithms?)",
    re.I,
)


def imports(sections: list[md.Section]) -> list[str]:
    out: list[str] = []
    for section in sections:
        texts = [b.text for b in section.code] + [
            n for line in section.prose for n in md.code_names(line)
        ]
        for text in texts:
            out += [s for s in md.imports(text) if s not in out]
    return out


def signatures(sections: list[md.Section], names: set[str]) -> list[str]:
    out: list[str] = []
    for section in sections:
        titled = any(w in section.title.lower() for w in ("签名", "signature"))
        for block in section.code:
            found = md.signature(block.text)
            if found and (found[0].split(".")[-1] in names or titled) and found[1] not in out:
                out.append(found[1])
    return out


def param_tables(section: md.Section) -> list[tuple[md.Table, list[Param]]]:
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
            params.append(Param(name=name, required=required, description=cells[desc_col]))
        out.append((table, params))
    return out


def params(sections: list[md.Section]) -> list[Param]:
    """Parameters of the sections' parameter tables, first mention of each name."""
    params: list[Param] = []
    seen: set[str] = set()
    for section in sections:
        for _, found in param_tables(section):
            for p in found:
                if p.name not in seen:
                    seen.add(p.name)
                    params.append(p)
    return params


def key_params(params: list[Param], signatures: list[str]) -> list[str]:
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


def limits(
    sections: list[md.Section], aliases: dict[str, str] | None = None
) -> list[hw.HardwareLimit]:
    """Limits stated in the sections' prose; a line that defines a variant ("`…W8A8_MXFP8)`：支持 A5")
    limits that variant only."""
    out: list[hw.HardwareLimit] = []
    for section in sections:
        lines = [
            line
            for line in section.prose
            if not (ALGO_CONST.search(line) or PROSE_ALGOS.search(line))
        ]
        for sentence in hw.sentences([md.inline_text(line) for line in lines]):
            out += [lim for lim in hw.limits_in(sentence, aliases) if lim not in out]
    return out


def title_limits(title: str, aliases: dict[str, str]) -> list[hw.HardwareLimit]:
    """Hardware a feature heading names in parentheses ("W8A8 动态量化（A2/A3）"): only those."""
    out: list[hw.HardwareLimit] = []
    for inner in re.findall(r"[（(]([^（）()]*)[）)]", title):
        out += [
            hw.HardwareLimit("仅", p)
            for p in hw.products(inner, aliases)
            if hw.HardwareLimit("仅", p) not in out
        ]
    return out
