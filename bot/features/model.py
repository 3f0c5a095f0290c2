"""Records of the features table (what refresh writes and advise reads)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.errors import TunebotError
from bot.features.hardware import HardwareLimit

UNDECLARED = "未声明"
KIND_FEATURE, KIND_ALGORITHM, KIND_VALUE, KIND_SWITCH = "特性", "算法", "取值", "开关"


class DocsError(TunebotError):
    """The docs dir is missing or holds no Markdown: nothing to build a table from."""

    exit_code = 2


@dataclass(frozen=True)
class FeatureRow:
    direction: str  # section of the table, e.g. "MatMul 量化"
    name: str  # feature, algorithm, parameter value or switch
    kind: str  # KIND_*
    parent: str  # the feature a variant belongs to ("" for features)
    api: tuple[str, ...]  # import statements, then call signatures
    params: tuple[str, ...]  # key parameters
    hardware: tuple[HardwareLimit, ...]  # () = no limit stated in the docs
    models: tuple[str, ...] | None  # None = the support matrix says nothing for this feature
    sources: tuple[str, ...]  # "file.md#anchor", first = where the row was found
    note: str = ""
    preference: str = (
        ""  # the docs' own words of preference and where, e.g. "推荐优先使用 (parallelism.md)"
    )

    @property
    def key(self) -> tuple[str, str]:
        return (self.direction, self.name)


@dataclass
class MatrixTable:
    source: str  # "supported_matrix.md#anchor"
    title: str
    columns: list[str]  # flag columns, as headed in the doc
    models: list[str]
    flags: dict[str, list[str]]  # column -> models marked supported
    hardware: dict[
        str, list[str]
    ]  # model -> canonical products (when the table has a hardware column)


@dataclass
class FeatureTable:
    rows: list[FeatureRow]
    matrix: list[MatrixTable]
    files: list[str]  # relative paths of the docs read
    docs_label: str  # where the docs came from (path in their repo, or the dir name)
    source_commit: str | None = None
    docs_version: str | None = None
    warnings: list[str] = field(default_factory=list)

    def models(self) -> list[str]:
        out: list[str] = []
        for table in self.matrix:
            out += [m for m in table.models if m not in out]
        return out

    def hardware(self) -> list[str]:
        out: list[str] = []
        for table in self.matrix:
            for names in table.hardware.values():
                out += [h for h in names if h not in out]
        for row in self.rows:
            out += [lim.product for lim in row.hardware if lim.product not in out]
        return out
