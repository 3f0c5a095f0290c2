"""No depth move on a T.Pipelined loop of a kernel compiled for target npuir: that target's
lowering (tilelang/engine/phase.py OptimizeForTarget) runs no software-pipeline pass, so every
num_stages compiles to the same kernel. Kernels here are written for these tests."""

from pathlib import Path

import pytest

from bot.config.schema import Knob, OpConfig
from bot.strategies import builtin, pipeline
from bot.strategies.base import PlanContext, Refusal
from bot.strategies.planner import Planner

HEAD = "import tilelang\nimport tilelang.language as T\n\n\n"
BODY = """def build(n, block=64):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, _):
            a = T.alloc_shared((block,), "float32")
            for i in T.Pipelined(n // block, num_stages=2):
                T.copy(A[i * block], a)
                T.copy(a, B[i * block])

    return main


def run():
    return tilelang.compile(build(1024), {target})
"""
NPUIR = HEAD + BODY.replace("{target}", 'target="npuir"')
ASCENDC = HEAD + BODY.replace(
    "{target}", 'target="ascend", pass_configs={"tl.ascend_auto_sync": True}'
)
NPUIR_BY_DEFAULT = HEAD + BODY.replace("def run():", 'def run(target="npuir"):').replace(
    "{target}", "target=target"
)

WITH_PIPELINE = """def OptimizeForTarget(mod, target):
    if target.kind.name == "cuda":
        mod = tilelang.transform.PipelinePlanning()(mod)
    elif target.kind.name == "npuir":
        mod = tilelang.transform.NpuLoopVectorize()(mod)
        mod = tilelang.transform.PipelinePlanning()(mod)
        mod = tilelang.transform.InjectSoftwarePipeline()(mod)
        return mod
    else:
        mod = tilelang.transform.InjectSoftwarePipeline()(mod)
    return mod
"""
WITHOUT_PIPELINE = WITH_PIPELINE.replace(
    "        mod = tilelang.transform.PipelinePlanning()(mod)\n"
    "        mod = tilelang.transform.InjectSoftwarePipeline()(mod)\n        return mod\n",
    "        return mod\n",
)


def op(*knobs: Knob) -> OpConfig:
    return OpConfig(project="p", name="k", dir=Path("k"), knobs=knobs)


def plan(src: str, o: OpConfig) -> list[str]:
    return Planner(o).plan(PlanContext(best_source=src))


@pytest.fixture(autouse=True)
def _fresh_lowering():
    pipeline.npuir_pipelines.cache_clear()
    yield
    pipeline.npuir_pipelines.cache_clear()


def test_npuir_kernel_gets_no_depth_move_and_the_reason_names_the_lowering():
    lines = plan(NPUIR, op())
    assert not any("num_stages#0" in line and "not planned" not in line for line in lines), lines
    why = [line for line in lines if "not planned: pipeline_depth" in line]
    assert len(why) == 1, lines
    assert "npuir target's lowering (tilelang/engine/phase.py OptimizeForTarget)" in why[0]
    assert "runs no software-pipeline pass" in why[0] and "TileLang is not installed" in why[0]
    assert pipeline.not_tunable(NPUIR, 0) is not None
    assert builtin.PIPELINE_DEPTH.spaces(NPUIR, op(), set())[0] == []
    # the strategy's own apply refuses too (a spec carried over from elsewhere builds nothing)
    specs, _ = builtin.PIPELINE_DEPTH.spaces(ASCENDC, op(), set())
    r = builtin.PIPELINE_DEPTH.apply(NPUIR, specs[0], 3, "k.py")
    assert isinstance(r, Refusal) and "runs no software-pipeline pass" in r.reason


def test_npuir_target_as_a_parameter_default_is_recognised():
    assert pipeline.unpipelined(NPUIR_BY_DEFAULT) is not None


def test_ascendc_pass_configs_kernel_is_still_planned():
    assert pipeline.unpipelined(ASCENDC) is None
    specs, left_out = builtin.PIPELINE_DEPTH.spaces(ASCENDC, op(), set())
    assert [s.key for s in specs] == ["num_stages#0"] and left_out == []


def _install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, phase: str) -> Path:
    pkg = tmp_path / "tilelang"
    (pkg / "engine").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "engine" / "phase.py").write_text(phase)
    monkeypatch.syspath_prepend(str(tmp_path))
    return pkg / "engine" / "phase.py"


def test_installed_compiler_whose_npuir_branch_pipelines_lifts_the_refusal(tmp_path, monkeypatch):
    _install(tmp_path, monkeypatch, WITH_PIPELINE)
    assert pipeline.unpipelined(NPUIR) is None
    specs, left_out = builtin.PIPELINE_DEPTH.spaces(NPUIR, op(), set())
    assert [s.key for s in specs] == ["num_stages#0"] and left_out == []


def test_installed_compiler_without_the_pass_is_read_and_named(tmp_path, monkeypatch):
    path = _install(tmp_path, monkeypatch, WITHOUT_PIPELINE)
    why = pipeline.unpipelined(NPUIR)
    assert why is not None and f"installed TileLang ({path})" in why


def test_declared_pipeline_depth_knob_is_planned_with_a_warning():
    src = NPUIR.replace("num_stages=2", "num_stages=STAGES").replace(
        "def build", "STAGES = 2\n\n\ndef build"
    )
    lines = plan(src, op(Knob("STAGES", "pipeline_depth", (1, 2, 3))))
    assert any("STAGES" in line and line.lstrip()[:2].strip(".").isdigit() for line in lines), lines
    warn = [line for line in lines if line.startswith("  - warning: pipeline_depth")]
    assert len(warn) == 1 and "runs no software-pipeline pass" in warn[0], lines
