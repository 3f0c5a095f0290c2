"""Knob transform: one literal changes, located by name, constraints respected."""

from pathlib import Path

import libcst as cst
import pytest

from bot.config.schema import Knob
from bot.strategies.base import Refusal, Variant
from bot.strategies.knobs import discover, locate, set_knob
from bot.strategies.source import changed_lines, source_hash

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "tilelang"


def kernel(name: str) -> str:
    return (EXAMPLES / name / f"{name}.py").read_text()


def bs(name: str, values=(8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096), **kw) -> Knob:
    return Knob(name, "block_size", tuple(values), **kw)


@pytest.mark.parametrize(
    "op, knob, new, removed, added",
    [
        # module constant (the CPU demo ops' style), comment kept
        (
            "vec_add",
            "BLOCK_N",
            2048,
            "BLOCK_N = 1024  # columns per tile; UB holds 3 tiles of BLOCK_M x BLOCK_N",
            "BLOCK_N = 2048  # columns per tile; UB holds 3 tiles of BLOCK_M x BLOCK_N",
        ),
        # call-site keyword wins over the factory default block_M=16
        (
            "rms_norm",
            "block_M",
            32,
            "    return rms_norm(ROWS, HIDDEN, block_M=16)(x, gamma)",
            "    return rms_norm(ROWS, HIDDEN, block_M=32)(x, gamma)",
        ),
        # positional call-site argument mapped to the factory's parameter name
        (
            "gemm_developer",
            "block_K",
            128,
            "    return matmul(M, N, K, 128, 256, 64)(a, b)",
            "    return matmul(M, N, K, 128, 256, 128)(a, b)",
        ),
        (
            "gemm_expert",
            "block_N",
            256,
            "    return matmul(M, N, K, block_M=128, block_N=128, block_K=64)(a, b)",
            "    return matmul(M, N, K, block_M=128, block_N=256, block_K=64)(a, b)",
        ),
        # tuple assignment inside the factory: only block_N's element changes
        (
            "flash_attention",
            "block_N",
            64,
            "    block_M, block_N = 64, 128  # query rows per core, KV rows per step",
            "    block_M, block_N = 64, 64  # query rows per core, KV rows per step",
        ),
        # a multiplicity knob (strategy multi_buffer) is a knob like any other
        (
            "gemm_expert",
            "multi_l1",
            3,
            "    multi_l1 = 2  # L1 slots the K loop rotates over (2 = double buffering)",
            "    multi_l1 = 3  # L1 slots the K loop rotates over (2 = double buffering)",
        ),
    ],
)
def test_exactly_the_intended_line_changes(op, knob, new, removed, added):
    src = kernel(op)
    v = set_knob(src, bs(knob), new)
    assert isinstance(v, Variant), v
    assert changed_lines(src, v.source) == [(removed, added)]
    cst.parse_module(v.source)  # still valid Python
    assert v.source_hash == source_hash(v.source)
    assert f"-{removed}\n+{added}\n" in v.diff
    assert v.change.knob == knob and v.change.new == new


def test_positional_site_is_followed_to_the_module_constant():
    src = kernel("vec_add")  # vec_add(M, N, BLOCK_M, BLOCK_N): block_N is bound to BLOCK_N
    site = locate(src, "block_N")
    assert not isinstance(site, str)
    assert site.name == "BLOCK_N" and site.kind == "constant" and site.value == 1024


def test_applying_twice_is_deterministic_and_idempotent_in_value():
    src = kernel("gemm_developer")
    a, b = set_knob(src, bs("block_M"), 256), set_knob(src, bs("block_M"), 256)
    assert isinstance(a, Variant) and a == b
    again = set_knob(a.source, bs("block_M"), 256)
    assert isinstance(again, Refusal) and "already 256" in again.reason


def test_constraints_refuse_with_the_reason():
    src = kernel("vec_add")
    r = set_knob(src, bs("BLOCK_N", divides=4096), 1536)
    assert isinstance(r, Refusal) and "1536 does not divide 4096" in r.reason
    r = set_knob(src, bs("BLOCK_N", multiple_of=512), 768)
    assert isinstance(r, Refusal) and "not a multiple of 512" in r.reason


def test_unknown_knob_and_ambiguous_sites_refuse():
    r = set_knob(kernel("vec_add"), bs("block_Z"), 64)
    assert isinstance(r, Refusal) and "'block_Z' is not set by an integer literal" in r.reason
    src = "BLOCK = 4\n\ndef f():\n    BLOCK = 8\n    return BLOCK\n"
    r = set_knob(src, bs("BLOCK"), 16)
    assert (
        isinstance(r, Refusal)
        and "set at 2 places" in r.reason
        and "line 1" in r.reason
        and "line 4" in r.reason
    )


def test_two_call_sites_are_ambiguous():
    src = "def f(block_M=8):\n    pass\n\nf(block_M=16)\nf(block_M=32)\n"
    r = set_knob(src, bs("block_M"), 64)
    assert isinstance(r, Refusal) and "2 places" in r.reason


def test_invalid_python_refuses():
    r = set_knob("BLOCK_M = (\n", bs("BLOCK_M"), 64)
    assert isinstance(r, Refusal) and "not valid Python" in r.reason


def test_discover_finds_block_names_in_source_order():
    assert discover(kernel("flash_attention")) == ["block_M", "block_N"]
    assert discover(kernel("vec_add")) == ["BLOCK_M", "BLOCK_N"]
    assert discover("x = 1\nBLOCK_SIZE = 20\nblock_m = True\n") == ["BLOCK_SIZE"]
