"""npu-msprof: the OpBasicInfo parser on real-format files, and the backend through a stand-in
`msprof` (tests/bin/msprof) that runs the real launch command and writes msprof's layouts."""

from __future__ import annotations

import json
import os
import resource
import stat
import time
from pathlib import Path

import pytest

from bot.errors import MeasureError
from bot.measure.backends import msprof as msprof_backend
from bot.measure.backends.msprof import (
    collect,
    find_csvs,
    kernel_name_of,
    measure_msprof,
    parse_opbasicinfo,
    private_dir,
    summarize_launches,
)

HERE = Path(__file__).parent
KERNELS = HERE / "measure_kernels"
FIXTURES = KERNELS / "msprof_fixtures"
BIN = HERE / "bin"


@pytest.fixture
def standin(monkeypatch, tmp_path):
    """Put the stand-in msprof first on PATH; return its argv log."""
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")
    log = tmp_path / "msprof-argv.jsonl"
    monkeypatch.setenv("TUNEBOT_FAKE_MSPROF_LOG", str(log))
    for var in (
        "TUNEBOT_FAKE_MSPROF_LAYOUT",
        "TUNEBOT_FAKE_MSPROF_CHIP",
        "TUNEBOT_FAKE_MSPROF_FREQ",
        "TUNEBOT_FAKE_MSPROF_NA",
        "TUNEBOT_FAKE_KERNELS",
        "TUNEBOT_FAKE_MSPROF_US",
        "TUNEBOT_FAKE_MSPROF_EXIT0",
    ):
        monkeypatch.delenv(var, raising=False)
    return log


# -- parser on the real samples ------------------------------------------------


def test_parses_the_real_rated_freq_sample():
    (launch,) = parse_opbasicinfo((FIXTURES / "OpBasicInfo_rated_freq.csv").read_text())
    assert launch.op_name == "topk_custom_0" and launch.op_type == "vector"
    assert launch.duration_us == pytest.approx(155.740005)
    assert launch.block_dim == 1 and launch.mix_block_dim is None  # "NA"
    assert (launch.current_freq, launch.rated_freq) == (1800, 1800)
    assert not launch.down_clocked


def test_flags_the_real_down_clocked_sample():
    (launch,) = parse_opbasicinfo((FIXTURES / "OpBasicInfo_downclocked.csv").read_text())
    assert launch.duration_us == pytest.approx(23.16)
    assert launch.down_clocked
    durations, extra, notes, suspect = summarize_launches([launch])
    assert suspect and extra["down_clocked"] == 1
    assert "Current Freq 800 < Rated Freq 1800" in notes[0]


def test_310p_header_without_mix_block_dim():
    text = (
        "Op Name,Op Type,Task Duration(us),Block Dim,Device Id,Pid,Current Freq,Rated Freq,\n"
        "add_custom_0,vector,12.500000,8,0,4242,1000,1000,\n"
    )
    (launch,) = parse_opbasicinfo(text)
    assert launch.duration_us == 12.5 and launch.block_dim == 8
    assert launch.mix_block_dim is None and launch.device_id == 0


def test_na_duration_is_skipped_with_a_note():
    text = (
        "Op Name,Op Type,Task Duration(us),Block Dim,Mix Block Dim,Device Id,Pid,Current Freq,Rated Freq,\n"
        "k_0,mix,NA,20,40,0,1,1800,1800,\nk_0,mix,30.0,20,40,0,1,1800,1800,\n"
    )
    launches = parse_opbasicinfo(text)
    durations, extra, notes, _ = summarize_launches(launches)
    assert durations == [30.0] and extra["mix_block_dim"] == [40]
    assert "1 launch(es) without a Task Duration" in notes[0]


def test_rejects_a_file_that_is_not_opbasicinfo():
    with pytest.raises(MeasureError, match="not an msprof OpBasicInfo file"):
        parse_opbasicinfo("block_id,aiv_time(us)\n0,1\n", "PipeUtilization.csv")


def _write(path: Path, name: str, us: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (FIXTURES / "OpBasicInfo_rated_freq.csv").read_text().splitlines()[0]
    path.write_text(f"{header}\n{name},vector,{us:.6f},1,NA,0,1,1800,1800,\n")


def test_finds_csvs_in_flat_and_nested_layouts_in_launch_order(tmp_path):
    flat = tmp_path / "flat"
    _write(flat / "OPPROF_20250101_AAA" / "OpBasicInfo.csv", "k_0", 10)
    assert [launch.duration_us for launch in collect(flat, "k")[0]] == [10]
    nested = tmp_path / "nested" / "OPPROF_20250101_BBB" / "k_0"
    for i in (0, 1, 2, 10):  # numeric order: 10 after 2
        _write(nested / str(i) / f"OpBasicInfo_2025{i}.csv", "k_0", 100 + i)
    launches, seen = collect(tmp_path / "nested", "k")
    assert [launch.duration_us for launch in launches] == [100, 101, 102, 110]
    assert seen == ["k_0"]
    assert len(find_csvs(tmp_path)) == 5


def test_no_csv_and_no_match_are_clear_errors(tmp_path):
    with pytest.raises(MeasureError, match="wrote no OpBasicInfo"):
        collect(tmp_path, "k")
    _write(tmp_path / "OPPROF_x" / "OpBasicInfo.csv", "other_kernel_0", 5)
    with pytest.raises(MeasureError, match="matched no launch.*kernels seen: other_kernel_0"):
        collect(tmp_path, "k")


def test_private_dir_is_mode_700_under_a_private_parent():
    out = private_dir()
    try:
        assert stat.S_IMODE(out.stat().st_mode) == 0o700
        assert stat.S_IMODE(out.parent.stat().st_mode) & (stat.S_IWGRP | stat.S_IWOTH) == 0
    finally:
        out.rmdir()
        out.parent.rmdir()


def test_kernel_name_is_the_prim_func_name():
    src = (
        "import tilelang.language as T\n@T.prim_func\ndef rms_norm_kernel(A: T.Tensor):\n    pass\n"
    )
    assert kernel_name_of(src) == "rms_norm_kernel"
    assert kernel_name_of("def kernel(x):\n    return x\n") is None


# -- the backend through the stand-in -------------------------------------------


def test_nested_layout_collects_every_launch(standin, monkeypatch):
    r = measure_msprof(KERNELS / "pure.py", "add_kernel", warmup=2, repeats=12, timeout_s=60)
    assert r.ok and r.backend == "npu-msprof"
    assert len(r.samples_us) == 12
    assert r.median_us == pytest.approx(155.74, rel=0.02)
    assert r.extra["block_dim"] == [8] and r.extra["op_type"] == ["vector"]
    assert not r.suspect
    (argv,) = [json.loads(line) for line in standin.read_text().splitlines()]
    assert argv[:2] == ["op", "--kernel-name=add_kernel"]
    assert "--launch-count=12" in argv and "--warm-up=2" in argv
    assert "bot.measure.runners.launch" in argv and "--calls" in argv
    assert argv[argv.index("--calls") + 1] == "14"  # warm-up + launch count


def test_flat_layout_single_launch_310p_down_clocked(standin, monkeypatch):
    monkeypatch.setenv("TUNEBOT_FAKE_MSPROF_CHIP", "310P")
    monkeypatch.setenv("TUNEBOT_FAKE_MSPROF_FREQ", "800/1800")
    r = measure_msprof(KERNELS / "pure.py", "add_kernel", warmup=0, repeats=1, timeout_s=60)
    assert r.ok and len(r.samples_us) == 1
    assert r.suspect and r.extra["current_freq"] == [800] and r.extra["mix_block_dim"] == []
    assert any("down-clocked" in n for n in r.notes)


def test_device_level_layout_and_na_launches(standin, monkeypatch):
    monkeypatch.setenv("TUNEBOT_FAKE_MSPROF_LAYOUT", "device")
    monkeypatch.setenv("TUNEBOT_FAKE_MSPROF_NA", "0,3")
    r = measure_msprof(KERNELS / "pure.py", "add_kernel", warmup=0, repeats=6, timeout_s=60)
    assert r.ok and len(r.samples_us) == 4
    assert any("2 launch(es) without a Task Duration" in n for n in r.notes)


def test_kernel_name_that_matches_nothing_lists_what_msprof_saw(standin, monkeypatch):
    monkeypatch.setenv("TUNEBOT_FAKE_KERNELS", "rms_norm_kernel_mix_aiv,cast_0")
    with pytest.raises(MeasureError) as err:
        measure_msprof(KERNELS / "pure.py", "rmsnorm", warmup=0, repeats=3, timeout_s=60)
    assert "'rmsnorm' matched no launch" in str(err.value)
    assert "rms_norm_kernel_mix_aiv" in str(err.value)
    assert "latency.kernel_name" in str(err.value)


def test_crashing_and_hanging_kernels_are_results_under_msprof(standin):
    r = measure_msprof(KERNELS / "segfault.py", "add_kernel", warmup=0, repeats=2, timeout_s=60)
    assert r.status == "error" and "about to read address 0" in r.tail
    r = measure_msprof(KERNELS / "hang.py", "add_kernel", warmup=0, repeats=2, timeout_s=2)
    assert r.status == "timeout"


def test_a_crash_under_an_msprof_that_exits_0_is_an_error_result(standin, monkeypatch):
    monkeypatch.setenv("TUNEBOT_FAKE_MSPROF_EXIT0", "1")
    r = measure_msprof(KERNELS / "segfault.py", "add_kernel", warmup=0, repeats=2, timeout_s=60)
    assert r.status == "error"  # not a MeasureError: one bad variant must not end the run
    assert "about to read address 0" in r.tail
    assert any("crashed under msprof" in n for n in r.notes)
    r = measure_msprof(KERNELS / "exit_nonzero.py", "add_kernel", warmup=0, repeats=2, timeout_s=60)
    assert r.status == "error" and "kernel launch failed" in r.tail


def test_an_op_contract_error_under_an_msprof_that_exits_0_is_an_error_result(standin, monkeypatch):
    monkeypatch.setenv("TUNEBOT_FAKE_MSPROF_EXIT0", "1")
    r = measure_msprof(
        KERNELS / "pure.py", "add_kernel", entry="no_such_entry", warmup=0, repeats=2, timeout_s=60
    )
    assert r.status == "error"
    assert any("the launched program failed" in n and "no_such_entry" in n for n in r.notes)


def test_the_name_rerun_keeps_the_memory_limit(standin, monkeypatch, tmp_path):
    log = tmp_path / "runs.log"
    monkeypatch.setenv("TUNEBOT_RUN_LOG", str(log))
    monkeypatch.setenv("TUNEBOT_FAKE_KERNELS", "other_kernel_0")
    with pytest.raises(MeasureError, match="kernels seen: other_kernel_0"):
        measure_msprof(
            KERNELS / "runs_twice.py",
            "mine",
            warmup=0,
            repeats=2,
            timeout_s=60,
            memory_limit_mb=2048,
        )
    limits = log.read_text().split()
    assert len(limits) == 2 and set(limits) == {str(2048 * 1024 * 1024)}
    assert resource.getrlimit(resource.RLIMIT_AS)[0] != 2048 * 1024 * 1024  # not inherited from us


def test_the_name_rerun_has_a_bounded_timeout(standin, monkeypatch, tmp_path):
    monkeypatch.setenv("TUNEBOT_RUN_LOG", str(tmp_path / "runs.log"))
    monkeypatch.setenv("TUNEBOT_HANG_AFTER_FIRST", "1")
    monkeypatch.setenv("TUNEBOT_FAKE_KERNELS", "other_kernel_0")
    monkeypatch.setattr(msprof_backend, "NAMES_TIMEOUT_S", 2.0)
    start = time.monotonic()
    with pytest.raises(
        MeasureError, match="wrote no OpBasicInfo"
    ):  # the rerun saw nothing before its cut
        measure_msprof(KERNELS / "runs_twice.py", "mine", warmup=0, repeats=2, timeout_s=120)
    assert time.monotonic() - start < 30  # the hanging rerun was cut at NAMES_TIMEOUT_S, not 120 s


def test_repeats_beyond_msprofs_documented_maximum_are_clamped(standin):
    r = measure_msprof(KERNELS / "pure.py", "add_kernel", warmup=0, repeats=150, timeout_s=60)
    assert r.ok and len(r.samples_us) == 100
    (argv,) = [json.loads(line) for line in standin.read_text().splitlines()]
    assert "--launch-count=100" in argv
    assert any("clamped" in n for n in r.notes)


def test_missing_msprof_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MeasureError, match="msprof was not found on PATH.*set_env.sh"):
        measure_msprof(KERNELS / "pure.py", "add_kernel")
