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


def test_a_resumed_run_learns_the_pair_spread_its_records_hold():
    """Killed and resumed, a run decides with the spread the uninterrupted run had learned."""
    from test_measure_decide import A, B, Pairs

    from bot.measure.pairs import PairSpread, decide_in_pairs
    from bot.run.machine import learn_pair_spread
    from bot.run.state import IterationView, RunState

    live = PairSpread()
    state = RunState()
    for n, gains in enumerate(
        [
            [0.30, 0.29],
            [-0.20],
            [0.02, 0.12, -0.05, 0.09, 0.0, 0.01],
            [0.05, 0.03, 0.07, 0.06, 0.05, 0.04],
        ],
        1,
    ):
        _, d = decide_in_pairs(A, B, Pairs(gains), spread=live)
        recorded = {"details": d.details, "gain": d.gain}
        state.iterations.append(
            IterationView(
                n,
                "block_size",
                "x",
                "better",
                "pass",
                1.0,
                None,
                "",
                "",
                "",
                "",
                "",
                decision=recorded,
            )
        )

    class Fresh:
        pair_spread = PairSpread()

    resumed = Fresh()
    learn_pair_spread(resumed, state)
    assert live.df > 3 and resumed.pair_spread.df == live.df
    assert resumed.pair_spread.sd() == live.sd()
    learn_pair_spread(object(), state)  # an evaluator without pairs: nothing to learn, no error


def test_the_guard_takes_back_what_a_repeated_or_tampered_kernel_run_taught():
    """Live and resumed runs learn the same spread: only recorded decisions count."""
    from bot.measure.pairs import PairSpread
    from bot.measure.types import Decision, LatencyResult
    from bot.run_guard import GuardedEvaluator

    class Inner:
        def __init__(self):
            self.pair_spread = PairSpread()
            self.paired_best = None

        def compare(self, best_source, best, candidate_source, noise_floor):
            self.pair_spread.add([0.5, -0.5])  # what one decision's pairs teach
            ok = LatencyResult(status="ok", backend="cpu", samples_us=[1.0], median_us=1.0)
            return ok, Decision(False, 0.0, 0.03, 0.0, True, "x")

    def guarded(problem, attempts):
        def run(sources, call):
            for _ in range(attempts):
                result = call()
            return result, problem

        g = object.__new__(GuardedEvaluator)
        g.inner = Inner()
        g._guarded = run
        return g

    retried = guarded(None, attempts=2)  # the worktree vanished once: measured again
    _, d = retried.compare(Path("a.py"), None, Path("b.py"), 0.03)
    assert d is not None and retried.inner.pair_spread.df == 1  # one decision, not two
    tampered = guarded("changed tunebot's worktree: x", attempts=1)
    latency, d = tampered.compare(Path("a.py"), None, Path("b.py"), 0.03)
    assert d is None and tampered.inner.pair_spread.df == 0  # not recorded: not learned


def test_rule_settings_that_cannot_decide_are_refused_and_broken_gains_teach_nothing():
    import math

    import pytest

    from bot.measure.pairs import PairSpread

    with pytest.raises(ValueError, match="pair_rounds"):
        Rule(pair_rounds=7)
    with pytest.raises(ValueError, match="pair_rounds"):
        Rule(pair_rounds=1)
    with pytest.raises(ValueError, match="pair_prior"):
        Rule(pair_prior=0.0)
    s = PairSpread()
    s.add([math.nan, 0.1])
    s.add([math.inf, 0.1])
    assert s.df == 0 and s.sd() == Rule().pair_prior
