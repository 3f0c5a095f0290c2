"""A configuration reaching the kernel through a parameter: `def test(config)` run once as
`test(config)` over a list the file spells out. Its entries (`config["M"]`,
`config.get("block_N", 128)`) size the kernel for the rules that check a move, as a
configuration written in the same function does; two calls, or a list of several
configurations, leave the sizes unknown (each call may run other ones)."""

from __future__ import annotations

import textwrap

from bot.config.schema import Knob
from bot.strategies import knobs
from bot.strategies.base import Refusal, Variant

BS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip()


ROWS = src("""
    import tilelang
    import tilelang.language as T

    @tilelang.jit(target="npuir")
    def rows(M, block_M=32):
        @T.prim_func
        def main(A: T.Tensor((M,), "float16")):
            with T.Kernel(M // block_M, is_npu=True) as (cid, _):
                buf = T.alloc_ub((block_M,), "float16")
                T.copy(A[cid * block_M], buf)

        return main


    def test(config):
        M = config["M"]
        return rows(M)

""")


def _move(text: str, value: int) -> Variant | Refusal:
    return knobs.set_knob(text, Knob("block_M", "block_size", BS), value, "block_size")


def test_a_configuration_passed_by_the_one_call_sizes_the_kernel():
    text = (
        ROWS + 'if __name__ == "__main__":\n    for config in [{"M": 128}]:\n        test(config)\n'
    )
    # M = 128 is read through test(config): 64 divides it (unknown, only divisors of 32 would)
    assert isinstance(_move(text, 64), Variant)
    r = _move(text, 256)
    assert isinstance(r, Refusal) and "128" in r.reason, r


def test_several_configurations_or_calls_leave_the_size_unknown():
    several = ROWS + 'for config in [{"M": 128}, {"M": 96}]:\n    test(config)\n'
    two_calls = ROWS + 'test({"M": 128})\ntest({"M": 96})\n'
    for text in (several, two_calls):
        r = _move(text, 64)
        assert isinstance(r, Refusal) and "divisors of the current 32" in r.reason, r


def test_a_call_passing_an_inline_dict_sizes_the_kernel():
    text = ROWS + 'test({"M": 128})\n'
    assert isinstance(_move(text, 64), Variant)


L0 = src("""
    import tilelang
    import tilelang.language as T

    @tilelang.jit(target="npuir")
    def attn(M, block_M=128, block_N=128):
        @T.prim_func
        def main(A: T.Tensor((M, 128), "float16")):
            with T.Kernel(T.ceildiv(M, block_M), is_npu=True) as (cid, _):
                a = T.alloc_L0A((2, block_M, block_N), "float16")
                T.copy(A[cid * block_M, 0], a[0, :, :])

        return main


    def test(config, block_M=128):
        block_N = config.get("block_N", 128)
        return attn(4096, block_M=block_M, block_N=block_N)


    for config in [{CONFIG}]:
        test(config)
""")


def test_a_get_with_a_default_reads_the_entry_or_the_default():
    # the default 128 runs: [2, 256, 128] half is 128 KiB, past the 64 KiB of L0A
    r = _move(L0.replace("{CONFIG}", '{"H": 8}'), 256)
    assert isinstance(r, Refusal) and "L0A" in r.reason and "65536" not in r.reason, r
    # the configuration's own 32 runs: [2, 256, 32] is 32 KiB
    assert isinstance(_move(L0.replace("{CONFIG}", '{"H": 8, "block_N": 32}'), 256), Variant)


def test_a_call_a_test_runner_makes_counts_beside_the_main_one():
    # pytest runs test_small with M = 96: the configuration is not the main call's alone
    text = ROWS + src("""
        def test_small():
            test({"M": 96})


        if __name__ == "__main__":
            test({"M": 128})
    """)
    r = _move(text, 64)
    assert isinstance(r, Refusal) and "divisors of the current 32" in r.reason, r


def test_a_configuration_is_read_in_the_scope_that_writes_it():
    # {"M": M} is main's M (128), not the module's 96 the callee would see
    text = ROWS + src("""
        M = 96


        def main():
            M = 128
            test({"M": M})


        main()
    """)
    assert isinstance(_move(text, 64), Variant)
    r = _move(text, 256)
    assert isinstance(r, Refusal) and "128" in r.reason, r
    # a loop target of the caller hides the module's M: the sizes are the loop's
    looped = text.replace("    M = 128\n    test(", "    for M in [96, 200]:\n        test(")
    r = _move(looped, 64)
    assert isinstance(r, Refusal) and "128" not in r.reason, r


def test_a_knob_passed_in_the_callers_dict_is_the_callers_literal():
    call = '    M = config["M"]\n    return rows(M)'
    assert call in ROWS
    text = ROWS.replace(call, '    return rows(config["M"], config["block_M"])')
    text += src("""
        def main():
            block_M = 64
            test({"M": 128, "block_M": block_M})


        main()
    """)
    site = knobs.locate(text, "block_M")
    assert not isinstance(site, str) and site.kind == "local" and site.value == 64, site


def test_a_function_passing_its_own_configuration_on_to_itself_is_not_followed():
    text = ROWS + src("""
        def again(extra):
            again(**extra)
            return rows(extra["M"])
    """)
    # no crash, and no size read from the cycle
    r = _move(text, 64)
    assert isinstance(r, Refusal) and "divisors of the current 32" in r.reason, r


def test_one_written_configuration_passed_by_several_calls_is_followed():
    text = ROWS + src("""
        CFG = {"M": 128}


        def test_it():
            test(CFG)


        if __name__ == "__main__":
            test(CFG)
    """)
    assert isinstance(_move(text, 64), Variant)
    assert "\n    test(CFG)\n" in text
    two = text.replace("\n    test(CFG)\n", '\n    test({"M": 96})\n', 1)
    r = _move(two, 64)
    assert isinstance(r, Refusal), r
