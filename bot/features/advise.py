"""`tunebot advise`: walk the decision tree of references/optimization-dimensions.md over an
analysis, and recommend rows of references/mindiesd-features.md that fit the hardware and model.

Pure functions over parsed inputs; the CLI does the reading and printing.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from bot.features import classify as cls
from bot.features import hardware as hw
from bot.features.analysis import Analysis
from bot.features.classify import has_word as _has
from bot.features.model import KIND_FEATURE, FeatureRow
from bot.features.render import ParsedTable

# Thresholds of the tree (references/optimization-dimensions.md says why).
COMPUTE_BOUND_PCT = 60.0
MEMORY_BOUND_RATIO = 0.90
COMM_PCT = 15.0
EXPOSED_COMM_PCT = 30.0
DIT_MATMUL_PCT = 50.0
FA_PCT = 30.0
VECTOR_PCT = 20.0
HOST_BOUND_PCT = 20.0

# Priority rule: MindIE-SD pattern > quantization > sparsity > communication > generic.
CATEGORIES = ["pattern", "quantization", "sparsity", "communication", "generic"]
PRIORITIES = ["P0", "P1", "P2"]

DIR_QUANT, DIR_ATTN, DIR_COMPILE = "MatMul 量化", "Attention 优化", "编译路径优化"
DIR_MEMORY, DIR_COMM, DIR_CACHE = "显存优化", "通信掩盖 / 并行", "缓存加速"


@dataclass
class Finding:
    branch: str  # e.g. "compute.matmul"
    fired: bool | None  # None: not evaluated (inputs missing)
    reason: str
    directions: list[str] = field(default_factory=list)
    strength: float = 0.0  # how far past its threshold (ranking within a category)
    only: str | None = (
        None  # restrict to rows whose name matches this word set (e.g. graph capture)
    )


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


def _pct(value: float | bool | None) -> float | None:
    return None if value is None or isinstance(value, bool) else float(value)


def walk_tree(a: Analysis) -> list[Finding]:
    """Every branch of the tree, fired or not, with the numbers that decided it."""
    out: list[Finding] = []
    mm, at = _pct(a.get("compute", "matmul_pct")), _pct(a.get("compute", "attention_pct"))
    if mm is None or at is None:
        out.append(
            Finding(
                "compute",
                None,
                "compute.matmul_pct / compute.attention_pct missing: compute-bound check not evaluated",
            )
        )
    else:
        total = mm + at
        led = "MatMul" if mm >= at else "Attention"
        if total > COMPUTE_BOUND_PCT:
            out.append(
                Finding(
                    "compute.matmul" if led == "MatMul" else "compute.attention",
                    True,
                    f"compute bound: MatMul {mm:g}% + Attention {at:g}% = {total:g}% "
                    f"> {COMPUTE_BOUND_PCT:g}%, {led}-led",
                    [DIR_QUANT] if led == "MatMul" else [DIR_ATTN],
                    total - COMPUTE_BOUND_PCT,
                )
            )
        else:
            out.append(
                Finding(
                    "compute",
                    False,
                    f"not compute bound: MatMul + Attention = {total:g}% <= {COMPUTE_BOUND_PCT:g}%",
                )
            )
    peak, cap = _pct(a.get("system", "peak_memory_gb")), _pct(a.get("system", "memory_capacity_gb"))
    if peak is None or not cap:
        out.append(
            Finding(
                "memory",
                None,
                "system.peak_memory_gb / system.memory_capacity_gb missing: memory check not evaluated",
            )
        )
    else:
        ratio = peak / cap
        fired = ratio >= MEMORY_BOUND_RATIO
        out.append(
            Finding(
                "memory",
                fired,
                f"peak memory {peak:g} GB of {cap:g} GB = {ratio:.0%} "
                f"{'>=' if fired else '<'} {MEMORY_BOUND_RATIO:.0%} of capacity",
                [DIR_MEMORY],
                (ratio - MEMORY_BOUND_RATIO) * 100,
            )
        )
    out.append(_communication(a))
    compiled = a.get("compute", "compiled")
    if compiled is None:
        out.append(
            Finding("compile", None, "compute.compiled missing: compile-path check not evaluated")
        )
    else:
        out.append(
            Finding(
                "compile",
                not compiled,
                "compile path not used (torch.compile with the MindIE-SD backend off)"
                if not compiled
                else "compile path already used",
                [DIR_COMPILE],
                10.0,
            )
        )
    redundant = a.get("pipeline", "redundant_steps")
    similarity = _pct(a.get("pipeline", "step_similarity"))
    if redundant is None and similarity is None:
        out.append(
            Finding(
                "cache",
                None,
                "pipeline.redundant_steps / pipeline.step_similarity missing: step-redundancy check not evaluated",
            )
        )
    else:
        fired = bool(redundant) or (similarity is not None and similarity >= 0.9)
        why = (
            "adjacent denoising steps recompute near-identical results"
            if fired
            else "no redundant computation across steps reported"
        )
        out.append(Finding("cache", fired, why, [DIR_CACHE], 5.0))
    out += _operator_triggers(a)
    return out


def _communication(a: Analysis) -> Finding:
    exposed = _pct(a.get("communication", "exposed_comm_pct"))
    comm = _pct(a.get("communication", "comm_pct"))
    if comm is None:
        comm = _pct(a.get("compute", "comm_pct"))
    if (
        exposed is not None
    ):  # a timeline says how much communication compute does not hide: it decides
        fired = exposed > EXPOSED_COMM_PCT
        return Finding(
            "communication",
            fired,
            f"exposed communication {exposed:g}% of communication time "
            f"{'>' if fired else '<='} {EXPOSED_COMM_PCT:g}%",
            [DIR_COMM],
            exposed - EXPOSED_COMM_PCT,
        )
    if comm is not None:  # only op shares known (e.g. kernel_details.csv): the share decides
        fired = comm > COMM_PCT
        return Finding(
            "communication",
            fired,
            f"communication {comm:g}% of device time {'>' if fired else '<='} {COMM_PCT:g}%",
            [DIR_COMM],
            comm - COMM_PCT,
        )
    return Finding(
        "communication", None, "communication shares missing: communication check not evaluated"
    )


def _operator_triggers(a: Analysis) -> list[Finding]:
    out = []
    checks = [
        ("operator.dit_matmul", "dit_matmul_pct", DIT_MATMUL_PCT, "DiT MatMul", [DIR_QUANT], None),
        ("operator.fa", "fa_pct", FA_PCT, "FA", [DIR_ATTN], None),
        ("operator.vector", "vector_pct", VECTOR_PCT, "Vector", [DIR_COMPILE], "fusion"),
        (
            "operator.host_bound",
            "host_bound_pct",
            HOST_BOUND_PCT,
            "Host Bound",
            [DIR_COMPILE],
            "graph",
        ),
    ]
    for branch, key, limit, label, directions, only in checks:
        value = _pct(a.get("operator", key))
        if value is None and key == "host_bound_pct":
            value = _pct(a.get("system", key))
        if value is None:
            out.append(
                Finding(branch, None, f"operator.{key} missing: {label} trigger not evaluated")
            )
            continue
        fired = value > limit
        out.append(
            Finding(
                branch,
                fired,
                f"{label} {value:g}% {'>' if fired else '<='} {limit:g}%",
                directions,
                value - limit,
                only,
            )
        )
    return out


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
