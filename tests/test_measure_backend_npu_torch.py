"""npu-torch: the kernel_details.csv parser on a hand-made real-format file; clear errors
when torch_npu is missing or cannot be imported."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.errors import MeasureError
from bot.measure.backends.npu_torch import measure_npu_torch, parse_kernel_details, per_step_us

KERNELS = Path(__file__).parent / "measure_kernels"

# Columns and quoting as torch_npu's profiler writes ASCEND_PROFILER_OUTPUT/kernel_details.csv
# (BOM, quoted shape lists with commas, N/A cells).
KERNEL_DETAILS = (
    "\ufeffStep Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),"
    "Duration(us),Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,"
    "Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID,aicore_time(us)\n"
    "5,4294967295,11,2,rms_norm_kernel_mix_aiv,rms_norm_kernel_mix_aiv,N/A,MIX_AIV,1717000000000.100\t,"
    '21.34,0,20,40,NO,"""4096,1024;1024""",FLOAT16;FLOAT16,ND;ND,"""4096,1024""",FLOAT16,ND,N/A,19.8\n'
    "5,4294967295,12,2,aclnnCast_CastAiCore_Cast,Cast,dynamic,AI_VECTOR_CORE,1717000000030.000\t,"
    '3.10,0.5,8,0,NO,"""4096,1024""",FLOAT,ND,"""4096,1024""",FLOAT16,ND,N/A,2.9\n'
    "6,4294967295,13,2,rms_norm_kernel_mix_aiv,rms_norm_kernel_mix_aiv,N/A,MIX_AIV,1717000000100.000\t,"
    '20.90,0,20,40,NO,"""4096,1024;1024""",FLOAT16;FLOAT16,ND;ND,"""4096,1024""",FLOAT16,ND,N/A,19.5\n'
    "6,4294967295,14,2,rms_norm_kernel_mix_aiv,rms_norm_kernel_mix_aiv,N/A,MIX_AIV,1717000000130.000\t,"
    '1.00,0,20,40,NO,"""4096,1024;1024""",FLOAT16;FLOAT16,ND;ND,"""4096,1024""",FLOAT16,ND,N/A,0.9\n'
    "7,4294967295,15,2,rms_norm_kernel_mix_aiv,rms_norm_kernel_mix_aiv,N/A,MIX_AIV,N/A,"
    'N/A,0,20,40,NO,"""4096,1024;1024""",FLOAT16;FLOAT16,ND;ND,"""4096,1024""",FLOAT16,ND,N/A,N/A\n'
)


def test_parses_names_types_and_durations():
    rows = parse_kernel_details(KERNEL_DETAILS)
    assert [r.name for r in rows] == [
        "rms_norm_kernel_mix_aiv",
        "aclnnCast_CastAiCore_Cast",
        "rms_norm_kernel_mix_aiv",
        "rms_norm_kernel_mix_aiv",
    ]  # N/A row skipped
    assert rows[0].duration_us == 21.34 and rows[0].step == "5" and rows[0].block_dim == "20"


def test_prefix_filter_and_one_sample_per_step():
    rows = parse_kernel_details(KERNEL_DETAILS, "rms_norm")
    assert {r.name for r in rows} == {"rms_norm_kernel_mix_aiv"}
    assert per_step_us(rows) == pytest.approx([21.34, 21.90])  # step 6 launched twice


def test_not_a_kernel_details_file():
    with pytest.raises(MeasureError, match="not a torch_npu kernel_details.csv"):
        parse_kernel_details("Op Name,Task Duration(us)\nx,1\n")


def test_missing_torch_npu_is_a_clear_error():
    with pytest.raises(MeasureError, match="torch_npu cannot be imported.*latency.backend"):
        measure_npu_torch(KERNELS / "pure.py")


def test_torch_npu_that_fails_to_import_is_a_clear_error(tmp_path, monkeypatch):
    # a torch_npu whose import fails the way a CANN library mismatch does
    pkg = tmp_path / "torch_npu"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "raise ImportError('libhccl.so: cannot open shared object file')\n"
    )
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.syspath_prepend(str(tmp_path))  # so the bot's own find_spec sees it too
    with pytest.raises(MeasureError, match="torch_npu cannot be imported: ImportError: libhccl.so"):
        measure_npu_torch(KERNELS / "pure.py", timeout_s=120)
