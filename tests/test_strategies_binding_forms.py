"""Binding across the call forms real kernel files use: functools.partial, an alias of the
factory, keyword-only parameters, `*args`/`**kw` parameters, a factory returning a jitted
closure, symbolic shapes and a second wrapper. The knob is the literal the running kernel sees,
or it is left out with a reason that is true."""

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


def rows(signature: str) -> str:
    return src(f"""
        import functools
        import tilelang
        import tilelang.language as T

        @tilelang.jit(target="npuir")
        def rows({signature}):
            @T.prim_func
            def main(A: T.Tensor((M,), "float16")):
                with T.Kernel(M // block_M, is_npu=True) as (cid, _):
                    buf = T.alloc_ub((block_M,), "float16")
                    T.copy(A[cid * block_M], buf)

            return main

    """)


def _tuned(text: str, old: str, new: str, refused_at: int = 2048, size: int = 1024) -> None:
    assert knobs.discover(text) == ["block_M"], knobs.dropped(text)
    v = knobs.set_knob(text, bs("block_M"), 128)
    assert isinstance(v, Variant), v
    assert changed_lines(text, v.source) == [(old, new)]
    r = knobs.set_knob(text, bs("block_M"), refused_at)
    assert isinstance(r, Refusal) and f"does not divide {size}" in r.reason, r


def test_a_partial_binds_the_knob_where_it_is_made_not_at_the_default():
    text = rows("M, block_M=32") + "k = functools.partial(rows, block_M=64)\nkernel = k(1024)\n"
    _tuned(
        text, "k = functools.partial(rows, block_M=64)", "k = functools.partial(rows, block_M=128)"
    )


def test_a_partial_of_the_sizes_leaves_the_block_to_its_call():
    text = rows("M, block_M") + "from functools import partial\n"
    text += "k = partial(rows, 1024)\nkernel = k(64)\n"
    _tuned(text, "kernel = k(64)", "kernel = k(128)")
    # the call's keyword wins over the partial's
    both = rows("M, block_M") + "k = functools.partial(rows, 1024, block_M=16)\n"
    both += "kernel = k(block_M=64)\n"
    _tuned(both, "kernel = k(block_M=64)", "kernel = k(block_M=128)")


def test_an_alias_of_the_factory_is_a_call_of_it():
    text = rows("M, block_M=32") + "build = rows\nkernel = build(1024, 64)\n"
    _tuned(text, "kernel = build(1024, 64)", "kernel = build(1024, 128)")


def test_a_keyword_only_parameter_is_never_the_same_named_module_constant():
    text = rows("M, *, block_M") + "block_M = 16\nprint(block_M)\nkernel = rows(1024, block_M=64)\n"
    _tuned(text, "kernel = rows(1024, block_M=64)", "kernel = rows(1024, block_M=128)")
    default = rows("M, *, block_M=64") + "kernel = rows(1024)\n"
    _tuned(default, "def rows(M, *, block_M=64):", "def rows(M, *, block_M=128):")


def test_star_parameters_are_named_as_the_reason():
    star = rows("M, **opts").replace(
        "    @T.prim_func", '    block_M = opts["block_M"]\n\n    @T.prim_func'
    )
    star += "kernel = rows(1024, block_M=64)\n"
    assert knobs.discover(star) == []
    why = {d.name: d.reason for d in knobs.dropped(star)}["block_M"]
    assert "'opts' is a parameter of rows()" in why, why
    gathered = rows("M, *block_M") + "kernel = rows(1024, 64)\n"
    assert knobs.discover(gathered) == []
    why = {d.name: d.reason for d in knobs.dropped(gathered)}["block_M"]
    assert "the `*block_M`/`**block_M` parameter of rows()" in why, why


CLOSURE = src("""
    import tilelang
    import tilelang.language as T

    def make(block_M):
        @tilelang.jit(target="npuir")
        def rows(M):
            @T.prim_func
            def main(A: T.Tensor((M,), "float16")):
                with T.Kernel(M // block_M, is_npu=True) as (cid, _):
                    buf = T.alloc_ub((block_M,), "float16")
                    T.copy(A[cid * block_M], buf)

            return main

        return rows

""")


def test_a_factory_returning_a_jitted_closure():
    named = CLOSURE + "build = make(64)\nkernel = build(1024)\n"
    _tuned(named, "build = make(64)", "build = make(128)")
    inline = CLOSURE + "kernel = make(64)(1024)\n"  # M from the inline call of the closure
    _tuned(inline, "kernel = make(64)(1024)", "kernel = make(128)(1024)")


def test_symbolic_sizes_keep_the_block_bound_at_its_call():
    text = rows("block_M").replace(
        "    @T.prim_func", '    M = T.symbolic("M")\n\n    @T.prim_func'
    )
    text += "kernel = rows(64)\n"
    assert knobs.discover(text) == ["block_M"]
    site = knobs.locate(text, "block_M")
    assert not isinstance(site, str) and (site.kind, site.value) == ("positional", 64)


def test_a_second_wrapper_passes_the_knob_through_its_parameter():
    text = rows("M, block_M") + src("""
        def run(M, bm):
            return rows(M, block_M=bm)

        def bench(size):
            return run(size, 64)

        if __name__ == "__main__":
            bench(1024)
    """)
    _tuned(text, "    return run(size, 64)", "    return run(size, 128)")


def test_a_factory_written_as_a_method_is_bound_at_its_calls():
    method = src("""
        import tilelang
        import tilelang.language as T

        class Kernels:
            @staticmethod
            @tilelang.jit(target="npuir")
            def rows(M, block_M):
                @T.prim_func
                def main(A: T.Tensor((M,), "float16")):
                    with T.Kernel(M // block_M, is_npu=True) as (cid, _):
                        buf = T.alloc_ub((block_M,), "float16")
                        T.copy(A[cid * block_M], buf)

                return main

            def run(self):
                return self.rows(1024, 64)

        Kernels().run()
    """)
    _tuned(method, "        return self.rows(1024, 64)", "        return self.rows(1024, 128)")
    bound = method.replace("    @staticmethod\n", "").replace("def rows(M,", "def rows(self, M,")
    _tuned(bound, "        return self.rows(1024, 64)", "        return self.rows(1024, 128)")
    by_class = method.replace("self.rows(1024, 64)", "Kernels.rows(1024, 64)")
    _tuned(
        by_class, "        return Kernels.rows(1024, 64)", "        return Kernels.rows(1024, 128)"
    )


def test_a_block_left_to_the_autotuner_says_so():
    text = src("""
        import tilelang
        import tilelang.language as T

        @tilelang.autotune(configs=[{"block_M": 32}, {"block_M": 64}])
        @tilelang.jit(target="npuir")
        def rows(M, block_M):
            @T.prim_func
            def main(A: T.Tensor((M,), "float16")):
                with T.Kernel(M // block_M, is_npu=True) as (cid, _):
                    buf = T.alloc_ub((block_M,), "float16")
                    T.copy(A[cid * block_M], buf)

            return main

        kernel = rows(1024)
    """)
    assert knobs.discover(text) == []
    why = {d.name: d.reason for d in knobs.dropped(text)}["block_M"]
    assert "'block_M' of rows() is left to @tilelang.autotune" in why, why


def test_a_name_bound_by_a_lambda_or_a_with_is_named_for_what_binds_it():
    lam = rows("M, block_M") + "make = lambda bm: rows(1024, bm)\nkernel = make(64)\n"
    assert knobs.discover(lam) == []
    why = {d.name: d.reason for d in knobs.dropped(lam)}["block_M"]
    assert "'bm' is bound by a lambda's parameter at line 15" in why, why
    assert "not bound in this module" not in why
    ctx = rows("M, block_M") + "with open('sizes') as bm:\n    kernel = rows(1024, bm)\n"
    why = {d.name: d.reason for d in knobs.dropped(ctx)}["block_M"]
    assert "'bm' is bound by `with ... as` at line 15" in why, why


def test_a_default_is_not_the_knob_when_calls_through_a_value_may_pass_it():
    table = rows("M=1024, block_M=64") + 'KERNELS = {"rows": rows}\n'
    quiet = table + 'kernel = KERNELS["rows"]()\n'  # a dispatch that passes nothing
    _tuned(quiet, "def rows(M=1024, block_M=64):", "def rows(M=1024, block_M=128):")
    loud = table + 'kernel = KERNELS["rows"](512, 32)\n'
    assert knobs.discover(loud) == []
    why = {d.name: d.reason for d in knobs.dropped(loud)}["block_M"]
    assert "would take its default, but rows is called through `KERNELS` at line 16" in why, why
    # passed to a function of another module, whose calls through it the file cannot see
    passed = rows("M=1024, block_M=64") + "from harness import bench\n\nbench(rows)\n"
    why = {d.name: d.reason for d in knobs.dropped(passed)}["block_M"]
    assert "rows is also passed as a value at line 17" in why, why
    # passed to a runner in this file: the runner's call binds it (its literal is the knob)
    ran = rows("M=1024, block_M=64") + "def bench(build):\n    return build(512, 32)\n\n"
    ran += "bench(rows)\n"
    site = knobs.locate(ran, "block_M")
    assert not isinstance(site, str) and (site.kind, site.line, site.value) == (
        "positional",
        16,
        32,
    )
    # a method call names `rows` as an attribute, not as a value
    called = rows("M=1024, block_M=64") + "import sys\nsys.rows = 1\nkernel = rows()\n"
    assert knobs.discover(called) == ["block_M"]


def test_a_wrapper_passing_its_keywords_on_is_followed_to_its_callers():
    text = rows("M, block_M=32") + src("""
        def run(M, **kw):
            return rows(M, **kw)

        kernel = run(1024, block_M=64)
    """)
    _tuned(text, "kernel = run(1024, block_M=64)", "kernel = run(1024, block_M=128)")
    # callers that do not pass it leave the factory's default in force
    plain = text.replace("run(1024, block_M=64)", "run(1024)")
    _tuned(plain, "def rows(M, block_M=32):", "def rows(M, block_M=128):")
    two = text + "other = run(1024, block_M=16)\n"
    why = {d.name: d.reason for d in knobs.dropped(two)}["block_M"]
    assert "bound at 2 call sites" in why and "one change cannot pick one" in why, why


def test_a_wrapper_passing_its_positions_on_is_named_as_the_reason():
    text = rows("M, block_M") + src("""
        def run(*args):
            return rows(*args)

        kernel = run(1024, 64)
    """)
    assert knobs.discover(text) == []
    why = {d.name: d.reason for d in knobs.dropped(text)}["block_M"]
    assert "may come from `*args` at line 16, the `*args` parameter of run()" in why, why
