"""Knobs reached through the file's configuration: an argparse option under another name than the
kernel's parameter, the one entry of a configuration list, a module constant several call sites
share. Each is tuned under the kernel's own rules, or left out with a reason that is true."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from bot.config.schema import Knob, OpConfig
from bot.strategies import knobs
from bot.strategies.base import PlanContext, Refusal, Variant
from bot.strategies.planner import Planner
from bot.strategies.source import changed_lines

UPSTREAM = Path(__file__).parent / "data" / "upstream_kernels" / "src"
BS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip()


def _upstream(name: str) -> str:
    """A corpus kernel's text; the test skips when the corpus is not materialised (as in CI)."""
    path = UPSTREAM / name
    if not path.exists():
        pytest.skip(
            f"{path} is not materialised: run `python scripts/upstream_corpus.py --git-dir <clone>`"
        )
    return path.read_text()


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
    source = _upstream("sparse_mla_fwd.py")
    legal, refused = knobs.legal_values(source, "block_i", BS)
    assert legal == (8, 16, 32, 64)
    assert all("assert at line 55" in reason for _, reason in refused)
    r = knobs.set_knob(source, bs("block_i"), 128)
    assert isinstance(r, Refusal) and "top_k % block_I" in r.reason
    v = knobs.set_knob(source, bs("block_i"), 64)
    assert isinstance(v, Variant)
    [(old, new)] = changed_lines(source, v.source)
    assert "--block_i" in old and "default=32" in old and "default=64" in new
