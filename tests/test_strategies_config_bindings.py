"""Knobs reached through the file's configuration: an argparse option under another name than the
kernel's parameter, the one entry of a configuration list, a module constant several call sites
share. Each is tuned under the kernel's own rules, or left out with a reason that is true."""

from __future__ import annotations

import textwrap
from pathlib import Path

from conftest import upstream_kernel

from bot.config.schema import Knob, OpConfig
from bot.strategies import knobs
from bot.strategies.base import PlanContext, Refusal, Variant
from bot.strategies.planner import Planner
from bot.strategies.source import changed_lines

BS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip()


def bs(name: str, values: tuple[int, ...] = BS) -> Knob:
    return Knob(name, "block_size", values)


def _declared(name: str, values: tuple[int, ...]) -> OpConfig:
    return OpConfig(
        "p",
        "k",
        Path("x"),
        kernel_kind="vector",
        strategies=("block_size",),
        knobs=(bs(name, values),),
    )


# --- argparse options under another name than the kernel's parameter ---

ARGNAME = src("""
    import argparse
    import tilelang
    import tilelang.language as T

    parser = argparse.ArgumentParser()
    parser.add_argument("--top_k", type=int, default=64)
    parser.add_argument("--block_i", type=int, default=16)
    parser.add_argument("--block_q", type=int, default=32)

    @tilelang.jit(target="npuir")
    def topk(top_k, block_I, block_Q):
        assert top_k % block_I == 0

        @T.prim_func
        def main(A: T.Tensor((top_k,), "float16")):
            with T.Kernel(T.ceildiv(top_k, block_I), is_npu=True) as (cid, _):
                buf = T.alloc_ub((block_I,), "float16")
                T.copy(A[cid * block_I], buf)

        return main

    args = parser.parse_args()
    kernel = topk(args.top_k, block_I=args.block_i, block_Q=args.block_q)
""")


def test_a_declared_argparse_name_takes_the_rules_of_the_parameter_it_feeds():
    # tune.yaml declares `block_i` (the option); the kernel's rules are on `block_I`
    r = knobs.set_knob(ARGNAME, bs("block_i"), 128)
    assert isinstance(r, Refusal) and "block_I=128 breaks the kernel's assert" in r.reason
    v = knobs.set_knob(ARGNAME, bs("block_i"), 64)
    assert isinstance(v, Variant), v
    assert changed_lines(ARGNAME, v.source) == [
        (
            'parser.add_argument("--block_i", type=int, default=16)',
            'parser.add_argument("--block_i", type=int, default=64)',
        )
    ]
    plan = "\n".join(
        Planner(_declared("block_i", (16, 32, 64, 128))).plan(PlanContext(best_source=ARGNAME))
    )
    assert "block_size: block_i=128 refused: block_I=128 breaks the kernel's assert" in plan
    assert "-> 128" not in plan


def test_a_declared_argparse_name_of_a_dead_parameter_says_so():
    # block_Q is never read by the kernel: declaring its option is a no-op, and says why
    r = knobs.set_knob(ARGNAME, bs("block_q"), 64)
    assert isinstance(r, Refusal) and "never read by the kernel" in r.reason
    dropped = {d.name: d.reason for d in knobs.dropped(ARGNAME)}
    assert "not passed to any kernel factory" not in dropped["block_q"]
    assert "is passed to block_Q" in dropped["block_q"]
    assert "never read by the kernel" in dropped["block_q"]


def test_sparse_mla_fwd_declared_block_i_follows_block_I_rules():
    # upstream: `--block_i` (default 32, line 23) is passed as block_I=args.block_i (line 457);
    # the kernel asserts top_k % block_I == 0 with top_k=64 (line 55)
    source = upstream_kernel("sparse_mla_fwd.py")
    legal, refused = knobs.legal_values(source, "block_i", BS)
    # 8 would cut the score gemm's operand into a part fractal (bot/strategies/fractal.py)
    assert legal == (16, 32, 64)
    reasons = dict(refused)
    assert "fractal" in reasons[8]
    assert all("assert at line 55" in reason for v, reason in refused if v != 8)
    r = knobs.set_knob(source, bs("block_i"), 128)
    assert isinstance(r, Refusal) and "top_k % block_I" in r.reason
    v = knobs.set_knob(source, bs("block_i"), 64)
    assert isinstance(v, Variant)
    [(old, new)] = changed_lines(source, v.source)
    assert "--block_i" in old and "default=32" in old and "default=64" in new


# --- the one entry of a configuration list ---

CONFIGS = src("""
    import tilelang
    import tilelang.language as T

    @tilelang.jit(target="npuir")
    def rows(M, N, block_M, block_N):
        @T.prim_func
        def main(A: T.Tensor((M, N), "float16")):
            with T.Kernel(M // block_M, is_npu=True) as (cid, _):
                buf = T.alloc_ub((block_M, block_N), "float16")
                for j in T.serial(N // block_N):
                    T.copy(A[cid * block_M, j * block_N], buf)

        return main

    def run(x, block_M, block_N):
        M, N = x.shape  # the sizes of the tensor the loop below built
        return rows(M, N, block_M, block_N)(x)

    test_configs = [
        (256, 96, 64, 32),
    ]
    for M, N, block_M, block_N in test_configs:
        run(make(M, N), block_M, block_N)
""")


def test_the_one_entry_of_a_configuration_list_is_the_knob():
    assert knobs.discover(CONFIGS) == ["block_M", "block_N"]
    site = knobs.locate(CONFIGS, "block_M")
    assert not isinstance(site, str) and site.kind == "entry" and site.value == 64
    v = knobs.set_knob(CONFIGS, bs("block_M"), 128)
    assert isinstance(v, Variant), v
    assert changed_lines(CONFIGS, v.source) == [
        ("    (256, 96, 64, 32),", "    (256, 96, 128, 32),")
    ]
    assert "configuration list" in v.change.description
    # the same rules as any block: sizes from the entry (M=256, N=96) through x.shape
    r = knobs.set_knob(CONFIGS, bs("block_M"), 512)
    assert isinstance(r, Refusal) and "does not divide 256" in r.reason
    r = knobs.set_knob(CONFIGS, bs("block_N"), 64)
    assert isinstance(r, Refusal) and "does not divide 96" in r.reason
    legal, refused = knobs.legal_values(CONFIGS, "block_N", BS)
    assert legal == (16, 32)
    assert "32-byte blocks" in dict(refused)[8]  # 16-byte fp16 rows of `buf` (ubrows.py)


def test_a_list_of_several_configurations_or_one_that_changes_is_left_out():
    two = CONFIGS.replace("(256, 96, 64, 32),", "(256, 96, 64, 32),\n    (512, 96, 128, 32),")
    grown = CONFIGS + "test_configs.append((512, 96, 128, 32))\n"
    for text in (two, grown):
        assert knobs.discover(text) == []
        dropped = {d.name: d.reason for d in knobs.dropped(text)}
        assert "set by the for loop at line" in dropped["block_M"]
        assert "not the entries of the list a loop walks" in dropped["block_M"]
        assert isinstance(knobs.set_knob(text, bs("block_M"), 128), Refusal)


def test_a_tuple_unpacked_local_is_not_the_module_name_of_the_same_name():
    # `M, N = x.shape` makes M local to run(): the module's M = 64 is another name
    text = CONFIGS.replace("test_configs = [", "M = 64\ntest_configs = [")
    r = knobs.set_knob(text, bs("block_M"), 128)
    assert isinstance(r, Variant), r  # 128 divides the M=256 the loop runs, not 64's rule


def test_linear_attention_normalize_block_L_block_D_are_tuned_at_their_list_entry():
    # upstream: test_configs = [(2, 32, 512, 128, 64, 64)] (line 169), walked by the loop at
    # line 172 into linear_attention(q, k, v, block_L, block_D) and both kernels; L=512, D=128
    source = upstream_kernel("pto_linear_attention_normalize.py")
    assert {"block_L", "block_D"} <= set(knobs.discover(source))
    for name in ("block_L", "block_D"):
        site = knobs.locate(source, name)
        assert not isinstance(site, str) and (site.line, site.value) == (169, 64)
    v = knobs.set_knob(source, bs("block_L"), 128)
    assert isinstance(v, Variant), v
    assert changed_lines(source, v.source) == [
        ("\t(2, 32, 512, 128, 64, 64),", "\t(2, 32, 512, 128, 128, 64),")
    ]
    # 8 is a part cube fractal (fractal.py); 16 halves k_half_ub's fp16 rows to 8 elements,
    # 16 bytes, a part 32-byte block (ubrows.py)
    legal, refused = knobs.legal_values(source, "block_D", BS)
    assert legal == (32, 64, 128)
    assert "fractal" in dict(refused)[8] and "32-byte blocks" in dict(refused)[16]
    r = knobs.set_knob(source, bs("block_D"), 256)
    assert isinstance(r, Refusal) and "does not divide 128" in r.reason
    r = knobs.set_knob(source, bs("block_L"), 256)  # ker2's UB: 1026 * block_L + 768 bytes
    assert isinstance(r, Refusal) and "UB" in r.reason
    r = knobs.set_knob(source, bs("block_L"), 1024)
    assert isinstance(r, Refusal) and "does not divide 512" in r.reason


# --- a module constant that several (not all) call sites share ---

SHARED = src("""
    import tilelang
    import tilelang.language as T

    DEFAULT_BLOCK_M = 64

    @tilelang.jit(target="npuir")
    def rows(M, block_M):
        @T.prim_func
        def main(A: T.Tensor((M,), "float16")):
            with T.Kernel(M // block_M, is_npu=True) as (cid, _):
                buf = T.alloc_ub((block_M,), "float16")
                T.copy(A[cid * block_M], buf)

        return main

    def test_small():
        M = 48
        block_M = 16
        return rows(M, block_M)

    def test_typical():
        M = 1024
        block_M = DEFAULT_BLOCK_M
        return rows(M, block_M)

    def bench():
        M = 512
        return rows(M, block_M=DEFAULT_BLOCK_M)

    if __name__ == "__main__":
        test_small()
        test_typical()
        bench()
""")


def test_a_module_constant_shared_by_the_calls_the_file_runs_is_the_knob():
    assert knobs.discover(SHARED) == ["DEFAULT_BLOCK_M"]
    v = knobs.set_knob(SHARED, bs("DEFAULT_BLOCK_M"), 128)
    assert isinstance(v, Variant), v
    assert changed_lines(SHARED, v.source) == [("DEFAULT_BLOCK_M = 64", "DEFAULT_BLOCK_M = 128")]
    # every call the constant feeds must meet the rule (M=1024 and M=512); test_small's M=48
    # runs its own block_M=16 and does not restrict the constant
    r = knobs.set_knob(SHARED, bs("DEFAULT_BLOCK_M"), 1024)
    assert isinstance(r, Refusal) and "does not divide 512" in r.reason
    assert knobs.legal_values(SHARED, "DEFAULT_BLOCK_M", BS)[0] == (8, 16, 32, 64, 128, 256, 512)
    # the call with its own literal is named, not tuned
    plan = "\n".join(Planner(_declared_none()).plan(PlanContext(best_source=SHARED)))
    assert "block_M=16 (local at line 18, the call at line 19 in test_small())" in plan
    assert "DEFAULT_BLOCK_M (line 4), which feeds the calls at lines 24, 28, is tuned" in plan


def _declared_none() -> OpConfig:
    return OpConfig("p", "k", Path("x"), kernel_kind="vector", strategies=("block_size",))


def test_call_sites_that_share_no_single_constant_stay_ambiguous_with_the_exact_reason():
    two = SHARED.replace("DEFAULT_BLOCK_M = 64", "DEFAULT_BLOCK_M = 64\nBENCH_BLOCK_M = 32")
    two = two.replace("block_M=DEFAULT_BLOCK_M", "block_M=BENCH_BLOCK_M")
    unrun = SHARED.replace("    test_typical()\n    bench()\n", "")
    computed = SHARED.replace("block_M = 16", "block_M = M // 3")
    for text, why in (
        (two, "through 2 different module constants (DEFAULT_BLOCK_M (line 4), BENCH_BLOCK_M"),
        (unrun, "feeds only calls the file never runs (lines 24, 28)"),
        (computed, "at the call at line 19: 'block_M' is computed at line 18"),
    ):
        assert knobs.discover(text) == [], text
        dropped = {d.name: d.reason for d in knobs.dropped(text)}
        assert why in dropped["block_M"], dropped["block_M"]
        assert (
            "one change cannot pick one" in dropped["block_M"]
            or "nothing measured" in (dropped["block_M"])
        )


def test_blocksparse_gemm_default_blocks_are_tuned_for_the_calls_they_feed():
    # upstream: DEFAULT_BLOCK_M/N/K (lines 9-11) feed test_typical, both boundary tests and
    # main (M=N=K=1024; asserts M % block_M, N % block_N); test_basic passes its own 32s
    source = upstream_kernel("pto_blocksparse_gemm.py")
    assert knobs.discover(source) == ["DEFAULT_BLOCK_M", "DEFAULT_BLOCK_N", "DEFAULT_BLOCK_K"]
    v = knobs.set_knob(source, bs("DEFAULT_BLOCK_M"), 256)
    assert isinstance(v, Variant), v
    assert changed_lines(source, v.source) == [("DEFAULT_BLOCK_M = 128", "DEFAULT_BLOCK_M = 256")]
    # 512 fills L0C (fp32 512 x 128); test_basic's M=128 is not the constant's size; 8 is a
    # part cube fractal (fractal.py)
    assert knobs.legal_values(source, "DEFAULT_BLOCK_M", BS)[0] == (16, 32, 64, 128, 256)
    assert knobs.legal_values(source, "DEFAULT_BLOCK_K", BS)[0][-1] == 1024
    r = knobs.set_knob(source, bs("DEFAULT_BLOCK_N"), 2048)
    assert isinstance(r, Refusal) and "assert at line 61" in r.reason
    assert any(
        "the call at line 104 in test_basic()" in n and "DEFAULT_BLOCK_M (line 9)" in n
        for n in knobs.notes(source)
    )


def test_a_one_entry_list_of_configurations_passed_with_star_or_double_star():
    kernel = src("""
        import tilelang
        import tilelang.language as T

        @tilelang.jit(target="npuir")
        def rows(M, block_M):
            @T.prim_func
            def main(A: T.Tensor((M,), "float16")):
                with T.Kernel(M // block_M, is_npu=True) as (cid, _):
                    buf = T.alloc_ub((block_M,), "float16")
                    T.copy(A[cid * block_M], buf)

            return main
    """)
    star = kernel + "for cfg in [(256, 64)]:\n    rows(*cfg)\n"
    double = (
        kernel + 'configs = [{"M": 256, "block_M": 64}]\nfor cfg in configs:\n    rows(**cfg)\n'
    )
    for text, old, new in (
        (star, "for cfg in [(256, 64)]:", "for cfg in [(256, 128)]:"),
        (double, 'configs = [{"M": 256, "block_M": 64}]', 'configs = [{"M": 256, "block_M": 128}]'),
    ):
        v = knobs.set_knob(text, bs("block_M"), 128)
        assert isinstance(v, Variant), v
        assert changed_lines(text, v.source) == [(old, new)]
        r = knobs.set_knob(text, bs("block_M"), 512)  # M=256 from the same entry
        assert isinstance(r, Refusal) and "does not divide 256" in r.reason
    two = kernel + "for cfg in [(256, 64), (512, 64)]:\n    rows(*cfg)\n"
    assert isinstance(knobs.set_knob(two, bs("block_M"), 128), Refusal)
    dropped = {d.name: d.reason for d in knobs.dropped(two)}
    assert "may come from `*cfg` at line 14" in dropped["block_M"], dropped
    assert "no call site" not in dropped["block_M"]
    # a keyword after an unknown `*x` still binds the parameter (M unknown: divisors only)
    keyword = kernel + "rows(*sizes(), block_M=64)\n"
    v = knobs.set_knob(keyword, bs("block_M"), 32)
    assert isinstance(v, Variant), v
    assert changed_lines(keyword, v.source) == [
        ("rows(*sizes(), block_M=64)", "rows(*sizes(), block_M=32)")
    ]


def test_the_op_contracts_kernel_entry_counts_as_run():
    # a harness calls `kernel(...)` itself: a constant feeding it is the knob even when the
    # file's __main__ runs only a smoke test with its own literal
    text = SHARED.replace("def bench():", "def kernel():").replace(
        "    test_typical()\n    bench()\n", ""
    )
    assert knobs.discover(text) == ["DEFAULT_BLOCK_M"]


def test_a_shared_constants_rules_use_the_sizes_of_every_call_it_feeds():
    # DEFAULT_BLOCK_M feeds big() (M from the module constant SIZE_M=1024) and odd() (M=96);
    # small() passes its own block and SIZE_M. 64 divides 1024 but not 96: refused.
    text = src("""
        import tilelang
        import tilelang.language as T

        DEFAULT_BLOCK_M = 32
        SIZE_M = 1024

        @tilelang.jit(target="npuir")
        def rows(M, block_M):
            @T.prim_func
            def main(A: T.Tensor((M,), "float16")):
                with T.Kernel(M // block_M, is_npu=True) as (cid, _):
                    buf = T.alloc_ub((block_M,), "float16")
                    T.copy(A[cid * block_M], buf)

            return main

        def big():
            return rows(SIZE_M, DEFAULT_BLOCK_M)

        def odd():
            return rows(96, DEFAULT_BLOCK_M)

        def small():
            return rows(SIZE_M, 16)

        if __name__ == "__main__":
            big()
            odd()
            small()
    """)
    assert knobs.discover(text) == ["DEFAULT_BLOCK_M"]
    r = knobs.set_knob(text, bs("DEFAULT_BLOCK_M"), 64)
    assert isinstance(r, Refusal) and "does not divide 96" in r.reason
    assert knobs.legal_values(text, "DEFAULT_BLOCK_M", BS)[0] == (8, 16, 32)


def test_a_configuration_unpacked_in_the_loop_body_or_from_a_module_tuple():
    kernel = CONFIGS.split("test_configs = [")[0]
    body = kernel + "for cfg in [(256, 96, 64, 32)]:\n    M, N, block_M, block_N = cfg\n"
    body += "    run(make(M, N), block_M, block_N)\n"
    module = kernel + "SIZES = (256, 96, 64, 32)\nM, N, block_M, block_N = SIZES\n"
    module += "run(make(M, N), block_M, block_N)\n"
    for text, line in (
        (body, "for cfg in [(256, 96, 64, 32)]:"),
        (module, "SIZES = (256, 96, 64, 32)"),
    ):
        v = knobs.set_knob(text, bs("block_M"), 128)
        assert isinstance(v, Variant), v
        assert changed_lines(text, v.source) == [(line, line.replace("64", "128"))]
        r = knobs.set_knob(text, bs("block_N"), 64)  # N=96 from the same tuple
        assert isinstance(r, Refusal) and "does not divide 96" in r.reason
    two = kernel + "for cfg in [(256, 96, 64, 32), (512, 96, 64, 32)]:\n"
    two += "    M, N, block_M, block_N = cfg\n    run(make(M, N), block_M, block_N)\n"
    assert isinstance(knobs.set_knob(two, bs("block_M"), 128), Refusal)


def test_a_constant_feeding_only_a_helper_nothing_calls_is_dropped_when_the_run_path_autotunes():
    # upstream shape (tma_gqa_sliding_window): the module constant reaches the kernel only
    # through a helper nothing calls; `__main__` calls the @tilelang.autotune kernel without
    # the block size, so editing the constant changes nothing measured
    text = src("""
        import tilelang
        import tilelang.language as T

        block_M = 64
        M = 1024

        @tilelang.autotune(configs=[{"block_M": 32}, {"block_M": 64}])
        @tilelang.jit(target="npuir")
        def rows(M, block_M):
            @T.prim_func
            def main(A: T.Tensor((M,), "float16")):
                with T.Kernel(M // block_M, is_npu=True) as (cid, _):
                    buf = T.alloc_ub((block_M,), "float16")
                    T.copy(A[cid * block_M], buf)

            return main

        def helper():
            return rows(M, block_M)

        if __name__ == "__main__":
            kernel = rows(M=M)
    """)
    assert knobs.discover(text) == []
    dropped = {d.name: d.reason for d in knobs.dropped(text)}
    assert "block_M" in dropped, dropped
    why = dropped["block_M"]
    assert "block_M (line 4) feeds only the call at line 19 in helper()" in why, why
    assert "the call at line 22 leaves it unset" in why and "autotune" in why, why
    # the helper called from the run path: the constant is the knob again
    run = text.replace("kernel = rows(M=M)", "kernel = helper()")
    assert knobs.discover(run) == ["block_M"]
