"""The run's pair spread is learned by the real Evaluator on the real cpu backend (forked sides)."""

from __future__ import annotations

from pathlib import Path

from bot.config.schema import LatencySettings, OpConfig
from bot.measure.decide import Rule
from bot.measure.evaluator import Evaluator

KERNEL = Path(__file__).parent / "measure_kernels" / "work.py"


def _variant(directory: Path, name: str, work: int) -> Path:
    path = directory / f"{name}.py"
    path.write_text(KERNEL.read_text().replace("WORK = 4000", f"WORK = {work}"))
    return path


def test_a_compare_teaches_the_run_how_far_a_pair_moves(tmp_path):
    op = OpConfig(
        project="t",
        name="work",
        dir=Path("."),
        latency=LatencySettings(backend="cpu", warmup=2, repeats=10, timeout_s=60.0),
    )
    base = _variant(tmp_path, "base", 4000)
    faster = _variant(tmp_path, "faster", 2000)
    ev = Evaluator(op, tmp_path)
    assert ev.pair_spread.sd() == Rule().pair_prior and ev.pair_spread.df == 0
    latency, d = ev.compare(base, None, faster, noise_floor=0.03)
    assert d is not None and latency.ok
    assert d.better and d.gain > 0.3, d.reason  # half the work: about half the time
    pairs = len(d.details["round_gains"])
    assert pairs >= 2 and ev.pair_spread.df == pairs - 1  # learned from this decision
    assert ev.pair_spread.sd() != Rule().pair_prior
    assert d.detectable is not None and d.detectable >= 0.03
    # a fresh run (a new Evaluator) starts from the prior again
    assert Evaluator(op, tmp_path).pair_spread.df == 0
