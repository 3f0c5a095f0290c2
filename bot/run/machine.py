"""The state machine of a run, alone: start or resume -> baseline -> iterate until a stop rule
fires -> deliver -> propose. Each step runs only while the records say it is not done, so a run
killed anywhere resumes at the step it was in (docs/architecture.md, "Run state and crash
safety").

Every kind of target (an op here, a model in bot/model/loop.py) supplies its `Steps`; `drive`
is the one sequence both follow. `run_tune` is the entry point for both kinds: it resolves the
request's name once (bot.run.target) and runs the kind it names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Protocol

from bot import run_guard
from bot.config.schema import OpConfig
from bot.forge.base import Forge, Proposal
from bot.git import repository
from bot.measure.evaluator import Evaluator
from bot.run import common, deliver, iterate
from bot.run import records as rec
from bot.run import state as rs
from bot.run.prepare import OpRun, prepare
from bot.run.request import ProgressCallback, RunOutcome, TuneRequest
from bot.run.target import Resolved, resolve_request


class RunStateView(Protocol):
    """What the machine reads of a kind's replayed state: which steps are recorded."""

    @property
    def start(self) -> object | None: ...
    @property
    def baseline(self) -> object | None: ...
    @property
    def stop(self) -> object | None: ...
    @property
    def delivery(self) -> object | None: ...


class Steps(Protocol):
    """One kind of target's steps. Each appends its record(s) as its commit point."""

    def state(self) -> RunStateView:
        """The state replayed from the records (a kind's own state class)."""
        ...

    def begin(self, state: Any) -> None:
        """Record the start of a new run, or say that a recorded one resumes."""

    def baseline(self) -> None: ...

    def iterate(self, state: Any) -> None:
        """Iterations until a stop rule fires; ends by recording the stop."""

    def deliver(self, state: Any) -> None: ...

    def propose(self, state: Any) -> Proposal | None: ...

    def outcome(self, state: Any, proposal: Proposal | None) -> RunOutcome: ...


def drive(steps: Steps) -> RunOutcome:
    """The one sequence of every run; a recorded step is never done again."""
    steps.begin(steps.state())
    if steps.state().baseline is None:
        steps.baseline()
    state = steps.state()
    if state.stop is None:
        steps.iterate(state)
    state = steps.state()
    if state.delivery is None:
        steps.deliver(state)
    state = steps.state()
    proposal = steps.propose(state)
    return steps.outcome(steps.state(), proposal)


EvaluatorFactory = Callable[[OpConfig, Path], Evaluator]


def run_tune(
    request: TuneRequest,
    forge: Forge,
    progress: ProgressCallback | None = None,
    evaluator_factory: EvaluatorFactory = Evaluator,
    resolved: Resolved | None = None,
) -> RunOutcome:
    """Run (or resume) one tuning run of `request.op` (an op or a model) and propose the best.

    `resolved` is the request's target when the caller resolved it already (the CLI, to pick
    its printer); `evaluator_factory` exists for the overhead benchmark, which wraps the real
    Evaluator to subtract kernel time from the bot's own time.
    """
    resolved = resolved or resolve_request(request)
    report = progress or (lambda event: None)
    if resolved.model is not None:
        from bot.model.loop import run_model  # the second target kind (docs/model.md)

        return run_model(request, resolved, forge, report)
    with ExitStack() as held:  # the run lock is taken inside prepare, before anything is moved
        run = prepare(request, resolved, forge, report, held)
        if request.dry_run:
            return deliver.dry_run(run)
        return drive(OpSteps(run, evaluator_factory))


def learn_pair_spread(evaluator: Any, state: rs.RunState) -> None:
    """Teach a resumed run's evaluator the pair spread its recorded decisions had learned.

    `Evaluator.pair_spread` lives in memory; without this a run resumed after a kill would
    decide its next candidates at the prior spread, not as the uninterrupted run would have.
    """
    spread = getattr(evaluator, "pair_spread", None)
    if spread is None:
        return
    for it in state.iterations:
        spread.learn((it.decision or {}).get("details") or {})


class OpSteps:
    """The steps of an op run (bot/run/iterate.py measures, bot/run/deliver.py delivers)."""

    def __init__(self, run: OpRun, evaluator_factory: EvaluatorFactory) -> None:
        self.run = run
        self.factory = evaluator_factory
        self.evaluator: Any = None  # a run_guard.GuardedEvaluator around the factory's

    def state(self) -> rs.RunState:
        return self.run.state()

    def begin(self, state: rs.RunState) -> None:
        run = self.run
        if state.start is None:
            start = rec.Start(
                op=run.op.qualified,
                base_sha=run.base_sha,
                base_branch=run.base_branch,
                settings=dataclasses.asdict(run.settings),
                requester=run.request.requester,
                time=common.now(),
            )
            run.log.append(start.to_json())
            run.cancel_file.unlink(missing_ok=True)  # an earlier run's cancel must not stop this
            run.event(
                "start",
                sha=run.base_sha,
                message=f"tuning {run.op.qualified} at {run.base_sha[:10]}",
            )
        else:
            deliver.restore_refs(run, state)
            note = ""
            if (
                run.request.base_ref is None
                and repository.resolve(run.repo, "HEAD") != run.base_sha
            ):
                note = (
                    f" (recorded at {run.base_sha[:10]}; HEAD has moved since: "
                    "add --restart to tune the new HEAD instead)"
                )
            count = len(state.iterations)
            run.event(
                "resumed",
                iteration=count,
                message=f"resuming after {count} recorded iterations{note}",
            )
        inner = self.factory(run.op, run.worktree)
        learn_pair_spread(inner, state)
        self.evaluator = run_guard.GuardedEvaluator(inner, run, run.warn)

    def _evaluator(self) -> Any:
        assert self.evaluator is not None, "begin() makes the evaluator"
        return self.evaluator

    def baseline(self) -> None:
        iterate.measure_baseline(self.run, self._evaluator())

    def iterate(self, state: rs.RunState) -> None:
        iterate.iterate(self.run, self._evaluator(), state)

    def deliver(self, state: rs.RunState) -> None:
        deliver.deliver(self.run, state)

    def propose(self, state: rs.RunState) -> Proposal | None:
        return deliver.propose(self.run, state)

    def outcome(self, state: rs.RunState, proposal: Proposal | None) -> RunOutcome:
        return deliver.outcome(self.run, state, proposal)
