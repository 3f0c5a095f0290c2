"""Contract over every registered stop rule (bot/run/stops): a new rule is one module plus one
line in STOP_RULES, and this file checks it like the built-in ones."""

from __future__ import annotations

import importlib
import inspect
from dataclasses import replace
from pathlib import Path

import pytest

from bot.record import opt_log, report
from bot.run import stops
from bot.run.state import RunState, apply_json

BASELINE = {
    "key": "baseline",
    "kind": "baseline",
    "sha": "base",
    "path": "op.py",
    "latency": {"status": "ok", "backend": "cpu", "median_us": 100.0},
}
LIMITS = stops.Limits(max_iters=10, patience=3, target_us=50.0)


def _state(iterations: int = 0, **fields: object) -> RunState:
    state = RunState()
    apply_json(state, BASELINE)
    for _ in range(iterations):
        state.iterations.append(None)  # type: ignore[arg-type]  # only the count is read
    for name, value in fields.items():
        setattr(state, name, value)
    return state


def _firing(name: str, tmp_path: Path) -> stops.StopContext:
    """A context in which the rule named `name` must fire, written by hand for each rule."""
    flag = tmp_path / "cancel"
    cases = {
        "达目标": lambda: stops.StopContext(_state(), replace(LIMITS, target_us=100.0), flag),
        "迭代上限": lambda: stops.StopContext(_state(iterations=10), LIMITS, flag),
        "连续无提升": lambda: stops.StopContext(_state(no_gain_streak=3), LIMITS, flag),
        "已取消": lambda: (flag.write_text("now"), stops.StopContext(_state(), LIMITS, flag))[1],
        "策略耗尽": lambda: stops.StopContext(_state(rejections=20), LIMITS, flag),
    }
    assert name in cases, f"add a firing case for the new stop rule {name!r} here"
    return cases[name]()


RULES = [pytest.param(rule, id=type(rule).__name__) for rule in stops.STOP_RULES]


def test_the_registry_is_the_one_list_the_records_read():
    names = [rule.name for rule in stops.STOP_RULES]
    assert len(set(names)) == len(names)
    assert tuple(names) == stops.STOP_REASONS
    assert opt_log.STOP_REASONS is stops.STOP_REASONS
    assert report.STOP_REASONS is stops.STOP_REASONS


@pytest.mark.parametrize("rule", RULES)
def test_rule_lives_in_its_own_module(rule):
    module = inspect.getmodule(type(rule))
    assert module is not None and module.__name__.startswith("bot.run.stops.")
    assert importlib.import_module(module.__name__) is module
    assert module.__doc__ and rule.name in module.__doc__  # says when it fires


@pytest.mark.parametrize("rule", RULES)
def test_rule_is_quiet_when_nothing_happened_yet(rule, tmp_path):
    """At the start of a run (baseline above the target, no iteration, no flag) no rule fires:
    one that did would stop every run before its first iteration."""
    assert rule.check(stops.StopContext(_state(), LIMITS, tmp_path / "cancel")) is False


@pytest.mark.parametrize("rule", RULES)
def test_rule_fires_in_its_case_and_is_the_first_to_fire_there(rule, tmp_path):
    ctx = _firing(rule.name, tmp_path)
    assert rule.check(ctx) is True
    assert stops.first_firing(ctx) == rule.name


@pytest.mark.parametrize("rule", RULES)
def test_rule_name_is_written_and_read_back_by_every_record(rule):
    conclusion = opt_log.Conclusion("op.py", None, 100.0, 0.0, rule.name)
    log = opt_log.OptLog("op", 100.0, "op.py", [], conclusion)
    assert opt_log.parse_opt_log(opt_log.render_opt_log(log)).conclusion == conclusion
    done = report.CompletionReport("p", "op", 0, 100.0, 100.0, 0.0, rule.name, "nothing found")
    assert report.parse_report(report.render_report(done)).stop_reason == rule.name


@pytest.mark.parametrize("rule", RULES)
def test_rule_explains_itself_in_english(rule):
    assert rule.english and rule.english.isascii()
    text = stops.stop_reason_text(rule.name, max_iters=10, patience=3, target_us=50.0)
    assert text == f"{rule.name} ({rule.explain(LIMITS)})"
    assert stops.stop_reason_text(rule.name) == f"{rule.name} ({rule.explain(stops.Limits())})"


def test_patience_waits_for_knobs_never_tried(tmp_path):
    """连续无提升 fires only once every knob the planner can move has been tried: a knob not
    tried yet has not had its most promising move."""
    spent = _state(no_gain_streak=3)
    flag = tmp_path / "cancel"
    waiting = stops.StopContext(spent, LIMITS, flag, untried=lambda: ["BLOCK_K"])
    assert stops.first_firing(waiting) is None
    assert stops.first_firing(stops.StopContext(spent, LIMITS, flag, untried=list)) == stops.NO_GAIN
    asked: list[int] = []
    quiet = stops.StopContext(
        _state(no_gain_streak=2), LIMITS, flag, untried=lambda: asked.append(1) or []
    )
    assert stops.first_firing(quiet) is None and asked == []  # not asked before patience is spent
