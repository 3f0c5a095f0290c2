"""Pipeline depth: num_stages of one T.Pipelined loop; keyword added where absent."""

from pathlib import Path

import libcst as cst

from bot.strategies.base import Refusal, Variant
from bot.strategies.pipeline import current_depth, find_loops, set_depth
from bot.strategies.source import changed_lines

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "tilelang"


def kernel(name: str) -> str:
    return (EXAMPLES / name / f"{name}.py").read_text()


def test_literal_num_stages_changes_in_place():
    src = kernel("flash_attention")
    v = set_depth(src, 3)
    assert isinstance(v, Variant), v
    line = "            for j in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages={}):"
    assert changed_lines(src, v.source) == [(line.format(2), line.format(3))]
    assert v.change.knob == "num_stages#0" and (v.change.old, v.change.new) == (2, 3)


def test_absent_keyword_is_added_and_means_zero():
    src = kernel("gemm_developer")
    assert current_depth(src) == 0
    v = set_depth(src, 2)
    assert isinstance(v, Variant), v
    assert changed_lines(src, v.source) == [
        (
            "            for k in T.Pipelined(T.ceildiv(K, block_K)):",
            "            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):",
        )
    ]
    assert current_depth(v.source) == 2


def test_zero_turns_pipelining_off():
    src = kernel("layer_norm")
    v = set_depth(src, 0)
    assert isinstance(v, Variant) and "num_stages=0" in v.source and v.change.new == 0


def test_multi_line_call_keeps_its_layout():
    src = "for k in T.Pipelined(\n    n,\n    order=[0, 1],\n):\n    pass\n"
    v = set_depth(src, 2)
    assert isinstance(v, Variant)
    assert (
        v.source
        == "for k in T.Pipelined(\n    n,\n    order=[0, 1],\n    num_stages=2,\n):\n    pass\n"
    )


def test_second_loop_only():
    src = "for a in T.Pipelined(4, num_stages=1):\n    pass\nfor b in T.Pipelined(8, num_stages=1):\n    pass\n"
    v = set_depth(src, 3, index=1)
    assert isinstance(v, Variant)
    assert changed_lines(src, v.source) == [
        ("for b in T.Pipelined(8, num_stages=1):", "for b in T.Pipelined(8, num_stages=3):")
    ]


def test_num_stages_bound_to_a_parameter_changes_the_call_site():
    src = (
        "def matmul(K, num_stages):\n    for k in T.Pipelined(K, num_stages=num_stages):\n        pass\n\n"
        "kernel = matmul(1024, num_stages=0)\n"
    )
    assert find_loops(src)[0].bound_to == "num_stages"
    assert current_depth(src) == 0
    v = set_depth(src, 2)
    assert isinstance(v, Variant), v
    assert changed_lines(src, v.source) == [
        ("kernel = matmul(1024, num_stages=0)", "kernel = matmul(1024, num_stages=2)")
    ]


def test_a_depth_past_a_one_iteration_loop_is_refused():
    r = set_depth(kernel("rms_norm"), 2)
    assert (
        isinstance(r, Refusal)
        and "deeper than the loop runs" in r.reason
        and "(1 iteration (`1`))" in r.reason
    )


def test_refusals_say_why():
    r = set_depth(kernel("vec_add"), 2)
    assert isinstance(r, Refusal) and "no T.Pipelined" in r.reason
    r = set_depth(kernel("flash_attention"), 2)
    assert isinstance(r, Refusal) and "already has num_stages=2" in r.reason
    r = set_depth(kernel("flash_attention"), -1)
    assert isinstance(r, Refusal) and ">= 0" in r.reason
    r = set_depth(kernel("flash_attention"), 1, index=4)
    assert isinstance(r, Refusal) and "only 1 T.Pipelined" in r.reason


def test_deterministic_and_parses():
    for name in ("gemm_developer", "gemm_expert", "layer_norm", "rms_norm", "flash_attention"):
        src = kernel(name)
        depth = 1 if name == "rms_norm" else 4  # its T.Pipelined(1) runs one iteration
        a, b = set_depth(src, depth), set_depth(src, depth)
        assert isinstance(a, Variant) and a == b
        cst.parse_module(a.source)
        assert len(changed_lines(src, a.source)) == 1
