"""A name rebound after its literal (`block_M *= 2`, a parameter reassigned in a branch) is not
tuned as if the literal were its value: it is left out, naming the statement that rebinds it,
and the kernel's rules do not read the literal as its size."""

from __future__ import annotations

import textwrap

from bot.config.schema import Knob
from bot.strategies import knobs
from bot.strategies.base import Refusal, Variant
from bot.strategies.source import changed_lines

BS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip()


def bs(name: str) -> Knob:
    return Knob(name, "block_size", BS)


def factory(prologue: str, signature: str = "M, block_M") -> str:
    """A kernel factory `rows(<signature>)` whose body starts with `prologue` (line 6 on)."""
    head = 'import tilelang\nimport tilelang.language as T\n\n@tilelang.jit(target="npuir")\n'
    head += f"def rows({signature}):\n"
    return head + textwrap.indent(prologue.strip("\n"), "    ") + "\n" + KERNEL_BODY


KERNEL_BODY = """
    @T.prim_func
    def main(A: T.Tensor((M,), "float16")):
        with T.Kernel(M // block_M, is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_M,), "float16")
            T.copy(A[cid * block_M], buf)

    return main

"""


def _dropped(text: str, name: str = "block_M") -> str:
    assert name not in knobs.discover(text)
    assert isinstance(knobs.set_knob(text, bs(name), 16), Refusal)
    return {d.name: d.reason for d in knobs.dropped(text)}[name]


def test_an_augmented_parameter_is_not_tuned_at_its_augmenting_literal():
    text = factory("block_M *= 2") + "kernel = rows(1024, 64)\n"
    why = _dropped(text)
    assert "'block_M' is rebound at line 6 by `block_M *= 2` in rows()" in why, why


def test_a_literal_local_augmented_later_is_not_its_value():
    for aug in ("block_M *= 2", "block_M += 16", "block_M //= 2"):
        text = factory(f"block_M = 64\n{aug}", "M") + "kernel = rows(1024)\n"
        why = _dropped(text)
        assert f"rebound at line 7 by `{aug}`" in why, why


def test_a_module_constant_augmented_at_module_level():
    text = src("""
        import tilelang
        import tilelang.language as T

        BLOCK_M = 64
        BLOCK_M *= 2

        @tilelang.jit(target="npuir")
        def rows(M):
            @T.prim_func
            def main(A: T.Tensor((M,), "float16")):
                with T.Kernel(M // BLOCK_M, is_npu=True) as (cid, _):
                    buf = T.alloc_ub((BLOCK_M,), "float16")
                    T.copy(A[cid * BLOCK_M], buf)

            return main

        kernel = rows(1024)
    """)
    why = _dropped(text, "BLOCK_M")
    assert "'BLOCK_M' is rebound at line 5 by `BLOCK_M *= 2`" in why, why


def test_a_parameter_reassigned_in_a_branch_is_left_out():
    for branch, line in (("if block_M > M:\n    block_M = M", 7),):
        text = factory(branch, "M, block_M=None") + "kernel = rows(1024, 32)\n"
        why = _dropped(text)
        assert f"parameter 'block_M' of rows() is reassigned at line {line}" in why, why
        assert "depends on the path taken" in why, why


def test_a_none_fill_runs_only_for_none_so_the_value_passed_is_the_knob():
    # `if block_M is None: block_M = 64` never runs when 32 (or any tried number) is passed
    text = factory("if block_M is None:\n    block_M = 64", "M, block_M=None")
    text += "kernel = rows(1024, 32)\n"
    v = knobs.set_knob(text, bs("block_M"), 64)
    assert isinstance(v, Variant), v
    assert changed_lines(text, v.source) == [("kernel = rows(1024, 32)", "kernel = rows(1024, 64)")]


def test_a_parameter_overridden_unconditionally_is_the_local_literal():
    # the local literal is what the kernel reads; the caller's value is dead
    text = factory("block_M = 64", "M, block_M") + "kernel = rows(1024, 32)\n"
    v = knobs.set_knob(text, bs("block_M"), 128)
    assert isinstance(v, Variant), v
    assert changed_lines(text, v.source) == [("    block_M = 64", "    block_M = 128")]


def test_a_size_rebound_before_the_kernel_is_read_with_its_change():
    # M *= 2 makes the extent 2048, not the 1024 passed: the rules use 2048
    text = factory("M *= 2", "M, block_M") + "kernel = rows(1024, 64)\n"
    assert knobs.discover(text) == ["block_M"]
    legal, refused = knobs.legal_values(text, "block_M", (*BS, 4096))
    assert legal == BS, refused
    assert [(v, "does not divide 2048" in why) for v, why in refused] == [(4096, True)]
    local = factory("M = 96\nM *= 2", "block_M") + "kernel = rows(64)\n"
    legal, refused = knobs.legal_values(local, "block_M", BS)
    assert legal == (8, 16, 32, 64), refused  # divisors of 192 (not only of the current 64)
    assert all("does not divide 192" in why for _, why in refused), refused
    branch = factory("if block_M > 32:\n    M *= 2", "M, block_M") + "kernel = rows(1024, 64)\n"
    legal, refused = knobs.legal_values(branch, "block_M", BS)
    assert all("could not resolve its extent" in why for _, why in refused), refused
