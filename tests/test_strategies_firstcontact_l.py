"""heldout_l first-contact failures, each on a small kernel written for the test."""

from __future__ import annotations

from bot.config.schema import OpConfig
from bot.strategies.planner import Planner
from bot.strategies.registry import STRATEGIES

PARSED_NOT_BUILT = """
import ast
import inspect
import textwrap

import tilelang.language as T

n = 4096


def staged_copy(block_M, num_steps=8):
    @T.prim_func
    def main(X: T.Tensor((n,), "float16"), Y: T.Tensor((n,), "float16")):
        with T.Kernel(n // (block_M * num_steps)) as bx:
            buf = T.alloc_shared((block_M,), "float16")
            for k in T.Pipelined(num_steps, num_stages=2):
                T.copy(X[(bx * num_steps + k) * block_M], buf)
                T.copy(buf, Y[(bx * num_steps + k) * block_M])

    return main


tree = ast.parse(textwrap.dedent(inspect.getsource(staged_copy)))
print(len(tree.body))
"""


def _specs(src: str):
    op = OpConfig(project="t", name="k", dir=".", kernel_kind="vector")
    return Planner(op).specs(src, list(STRATEGIES))


def test_a_factory_only_read_by_inspect_getsource_is_never_built():
    specs, skipped = _specs(PARSED_NOT_BUILT)
    # the file only parses the factory's text: no depth or block move changes anything
    assert not [s for s in specs if s.kind in ("stages", "knob")], specs
    (why,) = [s for s in skipped if s.startswith("pipeline_depth: T.Pipelined at line 16")]
    assert "inspect.getsource" in why and "never builds" in why


def test_a_factory_the_file_calls_beside_reading_its_source_is_built():
    src = PARSED_NOT_BUILT.replace("print(len(tree.body))", "kernel = staged_copy(64)")
    specs, _ = _specs(src)
    assert any(s.kind == "stages" for s in specs)
