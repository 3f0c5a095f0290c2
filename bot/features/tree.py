"""The decision tree of references/optimization-dimensions.md, walked over one analysis.

Each branch fires, does not fire, or is not evaluated (its inputs are missing); a fired branch
names the optimization directions that `bot.features.advise` turns into feature rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.features.analysis import Analysis

# Thresholds of the tree (references/optimization-dimensions.md says why).
COMPUTE_BOUND_PCT = 60.0
MEMORY_BOUND_RATIO = 0.90
COMM_PCT = 15.0
EXPOSED_COMM_PCT = 30.0
DIT_MATMUL_PCT = 50.0
FA_PCT = 30.0
VECTOR_PCT = 20.0
HOST_BOUND_PCT = 20.0

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
