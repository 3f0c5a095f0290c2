"""`tunebot advise`: walk the decision tree of references/optimization-dimensions.md over an
analysis, and recommend rows of references/mindiesd-features.md that fit the hardware and model.

Pure functions over parsed inputs; the CLI does the reading and printing.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from bot.features import classify as cls
from bot.features import hardware as hw
from bot.features.analysis import Analysis
from bot.features.classify import has_word as _has
from bot.features.model import KIND_FEATURE, FeatureRow
from bot.features.render import ParsedTable
from bot.features.tree import (
    DIR_COMM,
    DIR_COMPILE,
    DIR_QUANT,
    Finding,
    walk_tree,
)

# Priority rule: MindIE-SD pattern > quantization > sparsity > communication > generic.
CATEGORIES = ["pattern", "quantization", "sparsity", "communication", "generic"]
PRIORITIES = ["P0", "P1", "P2"]


@dataclass
class Citation:
    file: str
    anchor: str  # section of the features file
    row: str
    sources: list[str]


@dataclass
class Recommendation:
    priority: str
    rank: int
    name: str
    direction: str
    category: str
    reasons: list[str]
    citation: Citation
    variants: list[str]
    ranked_by: str = ""  # the docs' preference statement used for the order, or the tie-break


@dataclass
class Skipped:
    name: str
    direction: str
    reason: str


@dataclass
class Advice:
    model: str
    hardware: str
    report: str
    findings: list[Finding]
    recommendations: list[Recommendation]
    skipped: list[Skipped]
    warnings: list[str]
    nothing_applies: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


_GRAPH_WORDS = ["graph", "图"]
_SPARSE_WORDS = ["稀疏", "sparse"]
_QUANT_WORDS = ["量化", "quant", "quantize"]


def category_of(row: FeatureRow) -> str:
    texts = [row.name, row.parent, *row.params, *row.api]
    if row.direction == DIR_COMPILE:
        return "pattern"
    if row.direction == DIR_QUANT or any(_has(t, w) for t in texts[:2] for w in _QUANT_WORDS):
        return "quantization"
    if any(_has(t, w) for t in texts for w in _SPARSE_WORDS):
        return "sparsity"
    if row.direction == DIR_COMM:
        return "communication"
    return "generic"


def _norm_model(name: str) -> str:
    return re.sub(r"[\s_\-]", "", name).lower()


def _matches(row: FeatureRow, only: str | None) -> bool:
    graphish = any(_has(row.name, w) for w in _GRAPH_WORDS)
    if only == "graph":
        return graphish
    if only == "fusion":
        return not graphish
    return True


def is_moe_row(row: FeatureRow) -> bool:
    return cls.is_moe([row.name, row.parent, *row.api])


def _preference(row: FeatureRow) -> int:
    return cls.preference(row.preference)[0]


def _exclusion(
    row: FeatureRow, hw_name: str, model: str, model_name: str | None, moe: bool
) -> str | None:
    """Why the docs exclude `row` for this hardware and model; None when they do not."""
    if not hw.allows(row.hardware, hw_name):
        limits = "; ".join(lim.render() for lim in row.hardware)
        return f"hardware: the docs say {limits}; this run is on {hw_name}"
    if model_name is not None and row.models is not None and model_name not in row.models:
        listed = ", ".join(row.models) or "none"
        return f"model: the support matrix lists {listed}; not {model}"
    if is_moe_row(row) and not moe:
        return (
            f"MoE: a feature for mixture-of-experts layers; the docs do not mark {model} as a MoE model "
            "(pass --moe if it has MoE layers)"
        )
    return None


def advise(
    table: ParsedTable,
    analysis: Analysis,
    hardware: str,
    model: str,
    features_file: str,
    moe: bool = False,
) -> Advice:
    """Recommendations for `model` on `hardware`, ranked by the priority rule, then by the docs' own
    preference statements, then by how far the decision tree's numbers are past their thresholds."""
    hw_name = hw.normalize(hardware)
    known_models = {_norm_model(m): m for m in table.models}
    warnings: list[str] = []
    model_name = known_models.get(_norm_model(model))
    if model_name is None:
        warnings.append(
            f"model '{model}' is not in the support matrix: its support is 未声明 for every feature; "
            "the features below follow from the analysis alone, check them on this model."
        )
    model_hardware = table.models.get(model_name, []) if model_name else []
    known_hw = {h for hws in table.models.values() for h in hws} | {
        lim.product for r in table.rows for lim in r.hardware
    }
    if hw_name not in known_hw:
        warnings.append(
            f"hardware '{hardware}' is not named in the docs: features limited to named hardware are skipped."
        )
    findings = walk_tree(analysis)
    fired = [f for f in findings if f.fired]
    candidates: dict[tuple[str, str], tuple[FeatureRow, list[Finding]]] = {}
    for finding in fired:
        for row in table.rows:
            if (
                row.kind == KIND_FEATURE
                and row.direction in finding.directions
                and _matches(row, finding.only)
            ):
                candidates.setdefault(row.key, (row, []))[1].append(finding)
    kept, skipped = [], []
    for row, hits in candidates.values():
        if model_hardware and hw_name not in model_hardware:
            skipped.append(
                Skipped(
                    row.name,
                    row.direction,
                    f"model: the support matrix lists {model_name} only on "
                    f"{', '.join(model_hardware)}; this run is on {hw_name}",
                )
            )
            continue
        why = _exclusion(row, hw_name, model, model_name, moe)
        if why:
            skipped.append(Skipped(row.name, row.direction, why))
        else:
            kept.append((row, hits))
    if model_hardware and hw_name not in model_hardware:
        warnings.append(
            f"the support matrix lists {model_name} only on {', '.join(model_hardware)}, not on {hw_name}: "
            "nothing is recommended for this combination."
        )
    kept.sort(
        key=lambda item: (
            CATEGORIES.index(category_of(item[0])),
            -_preference(item[0]),
            -max(f.strength for f in item[1]),
            item[0].name,
        )
    )
    present = sorted({CATEGORIES.index(category_of(r)) for r, _ in kept})
    recommendations = []
    for rank, (row, hits) in enumerate(kept, start=1):
        level = min(present.index(CATEGORIES.index(category_of(row))), len(PRIORITIES) - 1)
        variants = [
            r.name
            for r in table.rows
            if r.parent == row.name
            and r.direction == row.direction
            and _exclusion(r, hw_name, model, model_name, moe) is None
        ]
        peers = [r for r, _ in kept if category_of(r) == category_of(row) and r is not row]
        if row.preference:
            ranked_by = f"docs: {row.preference}"
        elif any(_preference(p) for p in peers):
            ranked_by = "docs: no preference stated for this feature (ranked after those the docs recommend)"
        else:
            ranked_by = (
                "tie-break: how far the analysis is past the threshold, then name "
                "(the docs state no preference)"
            )
        recommendations.append(
            Recommendation(
                priority=PRIORITIES[level],
                rank=rank,
                name=row.name,
                direction=row.direction,
                category=category_of(row),
                reasons=[f.reason for f in hits],
                citation=Citation(
                    file=features_file,
                    anchor=table.anchors.get(row.direction, ""),
                    row=row.name,
                    sources=list(row.sources),
                ),
                variants=variants,
                ranked_by=ranked_by,
            )
        )
    advice = Advice(
        model=model,
        hardware=hw_name,
        report=analysis.source,
        findings=findings,
        recommendations=recommendations,
        skipped=skipped,
        warnings=warnings + analysis.notes,
    )
    if not recommendations:
        advice.nothing_applies = _why_nothing(findings, fired, skipped)
    return advice


def _why_nothing(findings: list[Finding], fired: list[Finding], skipped: list[Skipped]) -> str:
    if not fired:
        evaluated = [f.reason for f in findings if f.fired is False]
        missing = [f.branch for f in findings if f.fired is None]
        text = "no branch of the decision tree fired"
        if evaluated:
            text += ": " + "; ".join(evaluated)
        if missing:
            text += f". Not evaluated (inputs missing): {', '.join(missing)}"
        return text + "."
    if skipped:
        return (
            f"{len(fired)} branch(es) fired, but every matching feature is excluded for this hardware or model "
            "(see skipped)."
        )
    directions = sorted({d for f in fired for d in f.directions})
    return f"branches fired for {', '.join(directions)}, but the features table has no feature rows there."
