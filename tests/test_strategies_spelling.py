"""A kernel means the same to the strategies however it spells what it means.

The rules name TileLang's language module `T`, as nearly every kernel does; a file may bind it
as `import tilelang.language as TL`, reach it as `tl.language` or `tilelang.language`, or import
its functions by name. A binding may carry an annotation (`bm: int = 128`, `def f(block_M: int
= 64)`). A helper may hold its own locals of the knobs' names. Each spelling below is the
same kernel as GEMM; every planned knob, value and refusal must be the same (a message quotes
the file, so its spelling is read back to `T` first)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from bot.config.schema import OpConfig
from bot.strategies import vprefix
from bot.strategies.base import Variant
from bot.strategies.planner import Planner
from bot.strategies.source import _SPELLED, dotted, parse

STRATEGIES = ["block_size", "pipeline_depth", "multi_buffer", "vprefix"]

GEMM = textwrap.dedent("""
    import tilelang
    import tilelang.language as T


    @tilelang.jit(target="npuir", pass_configs={"npuir.enable_auto_multi_buffer": False})
    def matmul(M, N, K, block_M, block_N, K_L1=64, dtype="float16", accum_dtype="float32"):
        BLOCK_NUM = 20
        if N > 4096:
            SPLIT = 2
        else:
            SPLIT = 1
        ROWS = block_M if SPLIT == 1 else block_M // 2

        @T.prim_func
        def main(
            A: T.Tensor((M, K), dtype),
            B: T.Tensor((K, N), dtype),
            C: T.Tensor((M, N), dtype),
        ):
            with T.Kernel(T.ceildiv(M, block_M) * T.ceildiv(N, block_N), is_npu=True) as (cid, _):
                bx = cid // T.ceildiv(N, block_N)
                by = cid % T.ceildiv(N, block_N)
                A_L1 = T.alloc_L1((block_M, K_L1), dtype)
                B_L1 = T.alloc_L1((K_L1, block_N), dtype)
                C_L0 = T.alloc_L0C((ROWS, block_N), accum_dtype)
                for k in T.Pipelined(T.ceildiv(K, K_L1), num_stages=2):
                    T.copy(A[bx * block_M, k * K_L1], A_L1)
                    T.copy(B[k * K_L1, by * block_N], B_L1)
                    T.gemm(A_L1, B_L1, C_L0, init=(k == 0))
                T.copy(C_L0, C[bx * block_M, by * block_N])
            with T.Kernel(BLOCK_NUM, is_npu=True) as (core, _):
                T.pipe_barrier("PIPE_ALL")

        return main


    def main():
        bm = 128
        bn = 256
        kernel = matmul(1024, 1024, 1024, bm, bn)
        return kernel


    if __name__ == "__main__":
        main()
""").lstrip()


def _alias(src: str) -> str:
    return re.sub(r"\bT\b", "TL", src)


def _qualified(src: str) -> str:
    """`import tilelang as tl` and every `T.x` as `tl.language.x`."""
    out = src.replace("import tilelang.language as T\n", "import tilelang as tl\n")
    return re.sub(r"\bT\.", "tl.language.", out)


def _full(src: str) -> str:
    """`import tilelang.language` and every `T.x` as `tilelang.language.x`."""
    out = src.replace("import tilelang.language as T\n", "import tilelang.language\n")
    return re.sub(r"\bT\.", "tilelang.language.", out)


def _by_name(src: str) -> str:
    """`from tilelang.language import Kernel, ...` and every `T.x` as the bare `x`."""
    used = sorted(set(re.findall(r"\bT\.(\w+)", src)))
    out = src.replace(
        "import tilelang.language as T\n",
        f"from tilelang.language import {', '.join(used)}\n",
    )
    return re.sub(r"\bT\.", "", out)


def _annotated(src: str) -> str:
    out = src.replace("    bm = 128\n", "    bm: int = 128\n").replace(
        "BLOCK_NUM = 20", "BLOCK_NUM: int = 20"
    )
    out = out.replace("SPLIT = 1", "SPLIT: int = 1").replace("SPLIT = 2", "SPLIT: int = 2")
    return out.replace("K_L1=64", "K_L1: int = 64")


def _decoy(src: str) -> str:
    """An unrelated helper with its own locals of the knobs' names, read there."""
    return src + (
        "\n\ndef _unrelated_helper():\n    block_M = 7\n    BLOCK_NUM = 7\n    bm = 7\n"
        "    return (block_M, BLOCK_NUM, bm)\n"
    )


def _plan(src: str) -> tuple[list[tuple], list[str]]:
    op = OpConfig(project="p", name="gemm", dir=Path("examples/p/gemm"))
    specs, skipped = Planner(op).specs(src, STRATEGIES)
    seen = [(s.kind, s.key, tuple(s.values)) for s in specs]
    # a message quotes the file as written: read each spelling back to T's
    back = [
        re.sub(r"\b(TL|tl\.language|tilelang\.language)\.", "T.", s).replace(": int =", " =")
        for s in skipped
    ]
    back = [re.sub(r"(?<![.\w])ceildiv\(", "T.ceildiv(", s) for s in back]  # imported by name
    return seen, back


@pytest.mark.parametrize("spell", [_alias, _qualified, _full, _by_name, _annotated, _decoy])
def test_every_spelling_plans_what_the_plain_file_plans(spell):
    plain = _plan(GEMM)
    assert plain[0], "the plain kernel plans knobs"
    assert any("BLOCK_NUM" in s and "core index" in s for s in plain[1]), plain[1]
    assert any("block_M=256" in s and "L0C" in s for s in plain[1]), "capacity read through SPLIT"
    spelled = spell(GEMM)
    assert spelled != GEMM
    assert _plan(spelled) == plain


def test_by_name_imports_leave_other_bare_names_alone():
    wrapper = parse("from tilelang.language import copy\nimport shutil\ncopy(1)\nshutil.copy(2)\n")
    calls = [
        s.body[0].value.func  # type: ignore[attr-defined]
        for s in wrapper.module.body[2:]
    ]
    assert [dotted(c) for c in calls] == ["T.copy", "shutil.copy"]


def test_the_import_line_itself_is_not_respelled():
    wrapper = parse("import tilelang.language as TL\nTL.copy(1)\n")
    imp = wrapper.module.body[0].body[0]  # type: ignore[attr-defined]
    assert dotted(imp.names[0].asname.name) == "TL"
    assert dotted(wrapper.module.body[1].body[0].value.func) == "T.copy"  # type: ignore[attr-defined]


def test_a_file_spelling_t_records_nothing():
    before = len(_SPELLED)
    parse("import tilelang.language as T\nT.copy(1)\n")
    assert len(_SPELLED) == before


VECTOR = textwrap.dedent("""
    import tilelang
    import tilelang.language as T


    def add(N, block_N=64, dtype="float16"):
        @T.prim_func
        def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
            with T.Kernel(T.ceildiv(N, block_N), is_npu=True) as (cid, _):
                a = T.alloc_ub((block_N,), dtype)
                T.copy(A[cid * block_N], a)
                T.npuir_add(a, a, a)
                T.copy(a, B[cid * block_N])

        return main
""").lstrip()


@pytest.mark.parametrize("spell", [_alias, _qualified, _full])
def test_the_v_prefix_rename_reads_every_spelling_of_the_module(spell, upstream_tilelang):
    plain = vprefix.rename(VECTOR, "k.py")
    spelled = vprefix.rename(spell(VECTOR), "k.py")
    assert isinstance(plain, Variant) and isinstance(spelled, Variant)
    assert spelled.change.description == plain.change.description
    assert "npuir_add" not in spelled.source and ".vadd(a, a, a)" in spelled.source


def test_a_held_parse_keeps_its_spelling_while_dropped_parses_free_theirs():
    held = parse("import tilelang.language as TL\nTL.gemm(1)\n")
    call = held.module.body[1].body[0].value  # type: ignore[attr-defined]
    for i in range(1100):  # more files than any sweep keeps; none of them is held
        parse(f"import tilelang.language as TL\nTL.copy({i})\n")
    assert dotted(call.func) == "T.gemm"
    from bot.strategies import source

    assert len(source._SPELLED_FILES) < 600, "trees nothing holds were not let go"


def test_a_shadowing_helpers_default_reads_the_outer_knob():
    src = textwrap.dedent("""
        import tilelang
        import tilelang.language as T

        BLOCK_NUM = 20


        def rows_per_core(total, BLOCK_NUM=BLOCK_NUM):
            return (total + BLOCK_NUM - 1) // BLOCK_NUM


        @tilelang.jit(target="npuir")
        def add(N, dtype="float16"):
            ROWS = rows_per_core(N)

            @T.prim_func
            def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
                with T.Kernel(BLOCK_NUM, is_npu=True) as (cid, _):
                    a = T.alloc_ub((ROWS,), dtype)
                    T.copy(A[0], a)
                    T.copy(a, B[0])

            return main
    """).lstrip()
    specs, _ = _plan(src)
    # BLOCK_NUM sizes ROWS through the helper's default: a live knob, not an unread grid
    assert any(key == "BLOCK_NUM" for _, key, _ in specs), specs
