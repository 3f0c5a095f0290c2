"""The strategy extension point: one `Strategy` protocol, the catalog record and the spaces.

A strategy is an object registered in `bot/strategies/registry.py` (`STRATEGIES`). The
catalog (bot/strategies/catalog.py) is read from those objects and the planner asks them
for what they can change; neither names a strategy. See docs/architecture.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from bot.strategies.base import Refusal, Variant

if TYPE_CHECKING:
    from bot.config.schema import Knob, OpConfig

Applied = Literal["transform", "proposer"]
KINDS: tuple[str, ...] = ("vector", "cube", "mix")


@dataclass(frozen=True)
class Entry:
    """One catalog row: what the optimization is, when it helps, what it may gain."""

    id: str
    title: str
    when: str  # the situation in which it helps
    gain: tuple[float, float] | None  # expected relative gain (low, high); None: no speed effect
    kinds: tuple[str, ...]  # kernel kinds it applies to
    priority: int  # 1 = tried first (before evidence reorders)
    applied: Applied  # "transform": a libcst rule; "proposer": the external proposer
    style_only: bool = False  # never counted as an improvement (verdict "style")
    # its values are sizes, so 0 and below are refused; the noun the refusal uses ("a block size")
    positive: str | None = None

    @property
    def expected_gain(self) -> float:
        """Midpoint of the expected gain; 0 for style-only entries."""
        if self.gain is None:
            return 0.0
        return (self.gain[0] + self.gain[1]) / 2

    def applies_to(self, kind: str) -> bool:
        return kind in self.kinds


@dataclass(frozen=True)
class KnobSpec:
    """One value space a strategy can set in a source (a knob, a loop's depth, a flag).

    kind "knob" is a named constant: the planner reads and sets it through
    bot/strategies/knobs.py whoever found it (tune.yaml or a strategy's discovery);
    every other kind is read and set by the strategy `strategy` names.
    """

    key: str  # what Change.knob of its variants holds
    strategy: str
    kind: str  # knob | stages | flag | anything a strategy defines
    values: tuple  # ordered space
    knob: Knob | None = None
    index: int = 0  # which site, for strategies with several (e.g. the T.Pipelined loop)
    order: int = 0


class Strategy(Protocol):
    """What the planner needs from one optimization.

    Value strategies return spaces from `spaces` and implement `current`/`apply`;
    one-shot strategies (a rename) return a variant from `once`; proposer strategies
    (entry.applied == "proposer") do neither: the external proposer writes their variants.
    """

    @property
    def entry(self) -> Entry: ...

    def spaces(
        self, source: str, op: OpConfig, taken: set[str]
    ) -> tuple[list[KnobSpec], list[str]]:
        """Spaces found in `source` beyond tune.yaml's knobs (`taken`: keys already planned),
        and one sentence per site or value left out, with its reason."""

    def current(self, source: str, spec: KnobSpec) -> object:
        """The value `spec` has in `source` (None: not found)."""

    def apply(self, source: str, spec: KnobSpec, value: object, filename: str) -> Variant | Refusal:
        """`source` with `spec` set to `value`: one change."""

    def once(self, source: str, filename: str) -> Variant | Refusal | None:
        """The strategy's single change of `source`; None when it has none to offer; a Refusal
        when it has one it will not make here (the planner lists it with the reason)."""
