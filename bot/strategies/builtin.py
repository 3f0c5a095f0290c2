"""The strategies tunebot ships: catalog rows and the transforms behind them.

Each object here satisfies bot/strategies/protocol.py's `Strategy`; registry.py lists
them. The transforms themselves live in knobs.py, pipeline.py, multibuffer.py and
vprefix.py; these objects only say what each strategy offers on a source.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.config.schema import Knob, OpConfig
from bot.strategies import knobs, multibuffer, pipeline, vprefix
from bot.strategies.base import Refusal, Variant
from bot.strategies.protocol import Entry, KnobSpec

# values tried for a discovered block_*/BLOCK_* constant (tune.yaml declares its own)
DISCOVERED_BLOCK_VALUES: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)
# a line of a strategy's left-out list that is a warning about a planned knob, not a skip
WARNING = "warning: "


def _declares(op: OpConfig, strategy_id: str) -> bool:
    return any(k.strategy == strategy_id for k in op.knobs)


@dataclass(frozen=True)
class _Base:
    """Defaults for the optional parts of the protocol."""

    entry: Entry

    def spaces(
        self, source: str, op: OpConfig, taken: set[str]
    ) -> tuple[list[KnobSpec], list[str]]:
        return [], []

    def current(self, source: str, spec: KnobSpec) -> object:
        return None

    def apply(self, source: str, spec: KnobSpec, value: object, filename: str) -> Variant | Refusal:
        return Refusal((f"{self.entry.id} has no value to set",), strategy=self.entry.id)

    def once(self, source: str, filename: str) -> Variant | Refusal | None:
        return None


@dataclass(frozen=True)
class BlockSize(_Base):
    """Tile sizes: the block_*/BLOCK_* constants a kernel reads (unless tune.yaml declares some)."""

    def spaces(
        self, source: str, op: OpConfig, taken: set[str]
    ) -> tuple[list[KnobSpec], list[str]]:
        sid = self.entry.id
        harness = op.harness_functions
        skipped = [f"{sid}: {s}" for s in knobs.unused_shapes(source, op.shapes, harness)]
        if _declares(op, sid):
            declared = [k.name for k in op.knobs if k.strategy == sid]
            skipped.extend(f"{sid}: {n}" for n in knobs.imported_notes(source, declared))
            return [], skipped
        specs: list[KnobSpec] = []
        for name in knobs.discover(source, harness):
            value = knobs.current_value(source, name, harness)
            if name in taken or not isinstance(value, int) or isinstance(value, bool):
                continue
            values = tuple(sorted(set(DISCOVERED_BLOCK_VALUES) | {value}))
            # the kernel's own rules, with the sizes tune.yaml / DESIGN.md declare
            values, refused = knobs.legal_values(source, name, values, op.shapes, harness)
            skipped.extend(knobs.refusal_lines(sid, name, refused))
            specs.append(KnobSpec(name, sid, "knob", values, Knob(name, sid, values)))
        skipped.extend(str(d) for d in knobs.dropped(source, harness))
        skipped.extend(f"{sid}: {n}" for n in knobs.notes(source, harness))
        return specs, skipped


@dataclass(frozen=True)
class PipelineDepth(_Base):
    """num_stages of each T.Pipelined loop (unless tune.yaml declares a pipeline_depth knob)."""

    def spaces(
        self, source: str, op: OpConfig, taken: set[str]
    ) -> tuple[list[KnobSpec], list[str]]:
        sid = self.entry.id
        if _declares(op, sid):
            # the user's own knob is planned (they may know better), with the lowering's fact
            no_pass = pipeline.unpipelined(source) if pipeline.find_loops(source) else None
            declared = ", ".join(k.name for k in op.knobs if k.strategy == sid)
            return [], [
                f"{WARNING}{sid}: declared knob(s) {declared} planned as tune.yaml asks, but {no_pass}"
            ] if no_pass else []
        specs: list[KnobSpec] = []
        left_out: list[str] = []
        for loop in pipeline.find_loops(source):
            key = loop.bound_to or f"num_stages#{loop.index}"
            why = pipeline.not_tunable(source, loop.index, op.harness_functions)
            if why:  # listed, never silently skipped
                left_out.append(f"{sid}: {why}")
            if key in taken or why:
                continue
            specs.append(KnobSpec(key, sid, "stages", pipeline.DEFAULT_DEPTHS, index=loop.index))
            taken = taken | {key}
        return specs, left_out

    def current(self, source: str, spec: KnobSpec) -> object:
        return pipeline.current_depth(source, spec.index)

    def apply(self, source: str, spec: KnobSpec, value: object, filename: str) -> Variant | Refusal:
        no_pass = pipeline.unpipelined_at(source, spec.index)
        if no_pass:  # every depth compiles to the same kernel: no variant to build
            return Refusal((no_pass,), strategy=self.entry.id)
        return pipeline.set_depth(source, int(value), spec.index, filename)  # type: ignore[call-overload]


@dataclass(frozen=True)
class MultiBuffer(_Base):
    """TileLang's automatic multi-buffer pass flag, on or off."""

    def spaces(
        self, source: str, op: OpConfig, taken: set[str]
    ) -> tuple[list[KnobSpec], list[str]]:
        now = multibuffer.current(source) if "tilelang" in source else None
        if now is None:  # set by an expression or more than once: listed with the reason
            why = multibuffer.undecided(source) if "tilelang" in source else None
            return [], [f"{self.entry.id}: {multibuffer.FLAG}: {why}"] if why else []
        flip = multibuffer.set_flag(source, not now)
        if isinstance(flip, Refusal):
            return [], [f"{self.entry.id}: {multibuffer.FLAG}: {flip.reason}"]
        return [KnobSpec(multibuffer.FLAG, self.entry.id, "flag", (False, True))], []

    def current(self, source: str, spec: KnobSpec) -> object:
        return multibuffer.current(source)

    def apply(self, source: str, spec: KnobSpec, value: object, filename: str) -> Variant | Refusal:
        return multibuffer.set_flag(source, bool(value), filename)


@dataclass(frozen=True)
class VPrefix(_Base):
    """T.npuir_xxx -> T.vxxx, one rename of every aliased call (style only)."""

    def once(self, source: str, filename: str) -> Variant | Refusal | None:
        return vprefix.offer(source, filename)


@dataclass(frozen=True)
class Proposed(_Base):
    """A strategy whose variants the external proposer writes (docs/proposer.md)."""


BLOCK_SIZE = BlockSize(
    Entry(
        id="block_size",
        title="block (tile) size",
        when="memory/compute imbalance: tiles too small to hide latency or too big for UB/L1",
        gain=(0.10, 0.30),
        kinds=("vector", "cube", "mix"),
        priority=1,
        applied="transform",
        positive="a block size",
    )
)
PIPELINE_DEPTH = PipelineDepth(
    Entry(
        id="pipeline_depth",
        title="deeper T.Pipelined pipeline (num_stages)",
        when="a loop with several iterations whose copies can overlap compute",
        gain=(0.10, 0.20),
        kinds=("cube", "mix", "vector"),
        priority=2,
        applied="transform",
    )
)
MULTI_BUFFER = MultiBuffer(
    Entry(
        id="multi_buffer",
        title="double / multi buffer",
        when="copy-in, compute and copy-out of successive tiles can overlap",
        gain=(0.10, 0.15),
        kinds=("vector", "cube", "mix"),
        priority=3,
        applied="transform",
    )
)
VECTORIZE = Proposed(
    Entry(
        id="vectorize",
        title="scalar T.Parallel loops -> vector ops",
        when="element-wise work written as scalar T.Parallel loops "
        "(the real gain behind the v-prefix row)",
        gain=(0.05, 0.15),
        kinds=("vector", "mix"),
        priority=4,
        applied="proposer",
    )
)
DATA_REUSE = Proposed(
    Entry(
        id="data_reuse",
        title="data reuse / registerization",
        when="the same global data is loaded more than once per tile",
        gain=(0.05, 0.15),
        kinds=("vector", "cube", "mix"),
        priority=5,
        applied="proposer",
    )
)
FEWER_BUFFERS = Proposed(
    Entry(
        id="fewer_buffers",
        title="fewer intermediate buffers",
        when="UB pressure: temporaries that could be fused or reused",
        gain=(0.05, 0.10),
        kinds=("vector", "mix"),
        priority=6,
        applied="proposer",
    )
)
VPREFIX = VPrefix(
    Entry(
        id="vprefix",
        title="v-prefix API instead of npuir_xxx (style only)",
        when="vector kernels calling T.npuir_xxx; T.vxxx is the same function (a plain alias)",
        gain=None,
        kinds=("vector", "mix"),
        priority=7,
        applied="transform",
        style_only=True,
    )
)
