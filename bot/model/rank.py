"""Which feature setting to try next: the ranking of `advise`, applied to the model's settings.

Tier 1: settings whose row `advise` recommends for this analysis, hardware and model, in
advise's order (priority MindIE-SD pattern > quantization > sparsity > communication > generic,
then how far the finding is past its threshold). A setting cites a row by name; a variant row
(algorithm, value, switch) belongs to the feature advise recommends.

Tier 2: settings whose row fits the hardware and the model support but that no analysis
finding points to; tried only once tier 1 is used up, in priority order. Their citation says
that no finding points there.

Excluded: rows the docs exclude for this hardware and model (advise's own rules: hardware
limits, model support, the support matrix's hardware per model, MoE-only rows), and values of a
setting beyond one that failed the quality gate (values are listed least aggressive first, so a
stronger one would fail too).

Only advise's public functions are used: `advise`, `category_of`, `CATEGORIES`. For tier 2 the
constraints come from advise too: it is asked once more with an analysis in which every branch of
its decision tree fires, so every feature row is either recommended (allowed here) or skipped with
advise's reason. No constraint rule is restated here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.features import advise as advise_mod
from bot.features import tree
from bot.features.analysis import Analysis
from bot.features.model import FeatureRow
from bot.features.render import ParsedTable
from bot.model.spec import ModelSpec, SettingSpec


@dataclass
class Candidate:
    key: str
    old: object
    new: object
    row: str
    direction: str
    category: str
    tier: int  # 1: recommended by advise for this analysis; 2: fits, no finding points here
    priority: str  # P0.. for tier 1, "-" for tier 2
    reasons: list[str]  # the analysis findings behind it
    citation: str  # "<features file>#<anchor> row '<row>' (sources)"

    @property
    def description(self) -> str:
        return f"{self.key}: {_show(self.old)} -> {_show(self.new)}"

    def to_dict(self) -> dict:
        return {
            "key": self.key,
            "old": self.old,
            "new": self.new,
            "row": self.row,
            "direction": self.direction,
            "category": self.category,
            "tier": self.tier,
            "priority": self.priority,
            "reasons": self.reasons,
            "citation": self.citation,
        }


@dataclass
class Ranking:
    candidates: list[Candidate]
    excluded: list[str] = field(default_factory=list)  # "key (row): why"
    findings: list[tree.Finding] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def tier1(self) -> list[Candidate]:
        return [c for c in self.candidates if c.tier == 1]


def _show(value: object) -> str:
    return (
        "unset" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    )


# Every branch of advise's decision tree past its threshold: asking advise with this analysis
# yields, for every feature row of the table, either a recommendation or the reason it is excluded.
EVERY_BRANCH = Analysis(
    source="(constraints only)",
    layers={
        "system": {"peak_memory_gb": 1.0, "memory_capacity_gb": 1.0},
        "pipeline": {"redundant_steps": True},
        "compute": {"matmul_pct": 100.0, "attention_pct": 0.0, "compiled": False},
        "communication": {"exposed_comm_pct": 100.0},
        "operator": {
            "dit_matmul_pct": 100.0,
            "fa_pct": 100.0,
            "vector_pct": 100.0,
            "host_bound_pct": 100.0,
        },
    },
)


def _allowed(table: ParsedTable, hardware: str, spec: ModelSpec) -> tuple[set[str], dict[str, str]]:
    """(row names the docs allow here, row name -> why excluded), by advise's own rules."""
    advice = advise_mod.advise(
        table, EVERY_BRANCH, hardware, spec.features_model, spec.features_file
    )
    allowed = {n for rec in advice.recommendations for n in [rec.name, *rec.variants]}
    return allowed, {s.name: s.reason for s in advice.skipped}


def _row(table: ParsedTable, name: str) -> FeatureRow | None:
    return next((r for r in table.rows if r.name == name), None)


def _citation(table: ParsedTable, row: FeatureRow, features_file: str) -> str:
    anchor = table.anchors.get(row.direction, "")
    sources = ", ".join(row.sources)
    return f"{features_file}#{anchor} row '{row.name}'" + (f" ({sources})" if sources else "")


def next_value(
    setting: SettingSpec, current: object, tried: dict[str, list[tuple[object, str]]]
) -> object | None:
    """The first value of `setting` not yet tried and not beyond one that failed the quality gate."""
    done = tried.get(setting.key, [])
    failed_at = min(
        (
            setting.values.index(v)
            for v, verdict in done
            if verdict == "quality_fail" and v in setting.values
        ),
        default=None,
    )
    for i, value in enumerate(setting.values):
        if failed_at is not None and i >= failed_at:
            return None
        if value == current or any(v == value for v, _ in done):
            continue
        return value
    return None


def rank(
    table: ParsedTable,
    analysis: Analysis | None,
    hardware: str,
    spec: ModelSpec,
    current: dict,
    tried: dict[str, list[tuple[object, str]]],
) -> Ranking:
    """Every untried setting in the order the loop should try them."""
    report = analysis or Analysis(source="(no analysis command)")
    advice = advise_mod.advise(table, report, hardware, spec.features_model, spec.features_file)
    out = Ranking(candidates=[], findings=advice.findings, warnings=list(advice.warnings))
    if analysis is None:
        out.warnings.append("no analysis: every setting is ranked by priority only (tier 2)")
    recommended: dict[str, advise_mod.Recommendation] = {}
    for rec in advice.recommendations:
        for name in [rec.name, *rec.variants]:
            recommended.setdefault(name, rec)
    allowed, why_not = _allowed(table, hardware, spec)
    order: list[tuple[tuple, Candidate]] = []
    for index, setting in enumerate(spec.settings):
        row = _row(table, setting.row)
        if row is None:
            out.excluded.append(f"{setting.key} ({setting.row}): row not in {spec.features_file}")
            continue
        value = next_value(setting, current.get(setting.key), tried)
        if value is None:
            continue
        feature = row.parent or row.name
        if row.name not in allowed:
            problem = (
                why_not.get(row.name)
                or why_not.get(feature)
                or "the docs' constraints exclude this variant for this hardware and model"
            )
            out.excluded.append(f"{setting.key} ({setting.row}): {problem}")
            continue
        category = advise_mod.category_of(_row(table, feature) or row)
        found = recommended.get(row.name) or recommended.get(feature)
        if found is not None:
            cand = Candidate(
                setting.key,
                current.get(setting.key),
                value,
                row.name,
                row.direction,
                found.category,
                1,
                found.priority,
                list(found.reasons),
                _citation(table, row, spec.features_file),
            )
            order.append(((0, found.rank, index), cand))
        else:
            cand = Candidate(
                setting.key,
                current.get(setting.key),
                value,
                row.name,
                row.direction,
                category,
                2,
                "-",
                ["no analysis finding points to this row; tried after every recommended row"],
                _citation(table, row, spec.features_file),
            )
            order.append(((1, advise_mod.CATEGORIES.index(category), index), cand))
    out.candidates = [c for _, c in sorted(order, key=lambda item: item[0])]
    return out
