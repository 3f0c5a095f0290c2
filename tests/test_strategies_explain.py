"""What a run will not try is listed with its reason, and survives the records' round trip."""

from __future__ import annotations

from pathlib import Path

from bot.config.schema import OpConfig
from bot.record.opt_log import OptLog, parse_opt_log, render_opt_log
from bot.record.report import CompletionReport
from bot.run.records import Stop
from bot.strategies import explain
from bot.strategies.base import PlanContext
from bot.strategies.planner import Planner

EXPR_STAGES = """import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def f(n, s, block_M=64):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32")):
        with T.Kernel(n // block_M, is_npu=True) as (cid, _):
            for k in T.Pipelined(n, num_stages=s * 2):
                T.copy(A[cid * block_M], A[cid * block_M])

    return main


kernel = f(1024, 1)
"""


def op() -> OpConfig:
    return OpConfig(project="p", name="f", dir=Path("examples/p/f"), kernel_kind="vector")


def test_a_loop_whose_depth_cannot_move_is_listed_not_skipped():
    lines = explain.not_planned(Planner(op()), PlanContext(best_source=EXPR_STAGES))
    # EXPR_STAGES is compiled for target npuir: the loop is listed with the lowering's reason
    assert any(
        s.startswith("pipeline_depth: T.Pipelined at line 10: the npuir target's lowering")
        for s in lines
    ), lines
    ascend = EXPR_STAGES.replace('target="npuir"', 'target="ascend"')  # a target that pipelines
    lines = explain.not_planned(Planner(op()), PlanContext(best_source=ascend))
    assert (
        "pipeline_depth: T.Pipelined at line 10: num_stages is an expression, not a literal"
        in lines
    )
    assert any(s.startswith("block_size: block_M=2048 refused: ") for s in lines)


def test_the_list_round_trips_through_opt_log_and_reaches_the_report():
    lines = ["block_size: block_K: never read by the kernel", "multi_buffer: x: not NPUIR"]
    log = OptLog(op="f", baseline_us=10.0, baseline_source="f.py", not_planned=lines)
    text = render_opt_log(log)
    assert "\n## 未计划\n- block_size: block_K: never read by the kernel\n" in text
    assert parse_opt_log(text).not_planned == lines
    assert render_opt_log(parse_opt_log(text)) == text
    assert "未计划" not in render_opt_log(OptLog(op="f", baseline_us=10.0, baseline_source="f.py"))
    issues = explain.report_issues(explain.from_stop(Stop(reason="exhausted", not_planned=lines)))
    report = CompletionReport("p", "f", 0, 10.0, 10.0, 0.0, "策略耗尽", "s.", issues=issues)
    assert report.issues.startswith("not planned (2): block_size: block_K")
    assert explain.report_issues([]) == [] and explain.from_stop(None) == []


def test_a_refused_single_change_reaches_the_stop_record_s_list():
    # a v-prefix rename nothing shows the kernel's TileLang can take (none installed here)
    src = EXPR_STAGES.replace("T.copy(A[cid * block_M], A[cid * block_M])", "T.npuir_add(A, A, A)")
    lines = explain.not_planned(Planner(op()), PlanContext(best_source=src))
    assert any(
        s.startswith("vprefix: no NPUIR TileLang is installed here") and "vadd" in s for s in lines
    ), lines
    assert not any(
        s.startswith("vprefix")
        for s in explain.not_planned(Planner(op()), PlanContext(best_source=EXPR_STAGES))
    )
