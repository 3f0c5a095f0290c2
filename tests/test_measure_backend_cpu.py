"""The cpu backend, for real: a fresh interpreter times the entry only."""

from __future__ import annotations

from pathlib import Path

from bot.measure.backends.cpu import measure_cpu

KERNELS = Path(__file__).parent / "measure_kernels"


def test_times_the_entry_and_summarizes():
    r = measure_cpu(KERNELS / "pure.py", warmup=2, repeats=15, timeout_s=60)
    assert r.ok and r.backend == "cpu"
    assert len(r.samples_us) == 15
    assert r.min_us <= r.q1_us <= r.median_us <= r.q3_us
    assert r.ci_low_us <= r.median_us <= r.ci_high_us
    assert "bot.measure.runners.cpu" in r.command
    assert r.spread is not None and r.spread >= 0


def test_process_start_and_imports_are_not_timed(tmp_path):
    # importing this module takes 0.3 s; the entry takes microseconds
    slow_import = tmp_path / "slow_import.py"
    slow_import.write_text(
        "import time\ntime.sleep(0.3)\n"
        "def get_inputs(seed=0):\n    time.sleep(0.3)\n    return (1,)\n"
        "def kernel(x):\n    return x + 1\n"
    )
    r = measure_cpu(slow_import, warmup=1, repeats=5, timeout_s=60)
    assert r.ok
    assert r.median_us < 100_000  # far below the 300 000 us the import and inputs cost


def test_more_work_measures_slower(tmp_path):
    src = (KERNELS / "work.py").read_text()
    small, big = tmp_path / "small.py", tmp_path / "big.py"
    small.write_text(src.replace("WORK = 4000", "WORK = 500"))
    big.write_text(src.replace("WORK = 4000", "WORK = 20000"))
    a = measure_cpu(small, warmup=2, repeats=15, timeout_s=60)
    b = measure_cpu(big, warmup=2, repeats=15, timeout_s=60)
    assert a.ok and b.ok
    assert b.median_us > 4 * a.median_us  # 40x the work


def test_kernel_output_is_not_mistaken_for_results():
    r = measure_cpu(KERNELS / "noisy_print.py", warmup=0, repeats=3, timeout_s=60)
    assert r.ok and len(r.samples_us) == 3
    assert r.samples_us != [1, 2, 3]
    assert "a warning" in r.tail


def test_hang_becomes_a_timeout_result():
    r = measure_cpu(KERNELS / "hang.py", warmup=0, repeats=1, timeout_s=2)
    assert r.status == "timeout" and not r.ok
    assert r.median_us is None
    assert "timed out" in r.notes[0]


def test_segfault_becomes_an_error_result():
    r = measure_cpu(KERNELS / "segfault.py", warmup=0, repeats=1, timeout_s=60)
    assert r.status == "error"
    assert "SIGSEGV" in r.notes[0]
    assert "about to read address 0" in r.tail


def test_oom_becomes_an_error_result():
    r = measure_cpu(KERNELS / "oom.py", warmup=0, repeats=1, timeout_s=60, memory_limit_mb=512)
    assert r.status == "error"
    assert "MemoryError" in r.tail


def test_missing_entry_is_named(tmp_path):
    op = tmp_path / "op.py"
    op.write_text("def get_inputs(seed=0):\n    return (1,)\n")
    r = measure_cpu(op, entry="kernel", timeout_s=60)
    assert r.status == "error"
    assert any("no function 'kernel'" in n for n in r.notes)


def test_seedless_input_generator_and_single_input(tmp_path):
    op = tmp_path / "op.py"
    op.write_text(
        "def get_inputs():\n    return 5\ndef kernel(x):\n    assert x == 5\n    return x\n"
    )
    r = measure_cpu(op, warmup=0, repeats=2, timeout_s=60)
    assert r.ok, r.tail


def test_cpu_time_is_the_primary_figure_and_wall_time_is_kept(tmp_path):
    # a kernel that sleeps 2 ms per call: wall time sees the sleep, CPU time does not
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text(
        "import time\ndef get_inputs(seed=0):\n    return (0.002,)\n"
        "def kernel(s):\n    time.sleep(s)\n"
    )
    r = measure_cpu(sleeper, warmup=1, repeats=5, timeout_s=60)
    assert r.ok and r.extra["clock"] == "cpu"
    assert r.extra["wall"]["median_us"] >= 2000
    assert r.median_us < 1000  # the process was off the CPU while sleeping
    assert len(r.extra["wall"]["samples_us"]) == 5
    w = measure_cpu(sleeper, warmup=1, repeats=5, timeout_s=60, clock="wall")
    assert w.extra["clock"] == "wall" and w.median_us >= 2000


def test_threads_are_pinned_and_counted(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os, threading\nSEEN = os.environ.get('OMP_NUM_THREADS')\n"
        "def get_inputs(seed=0):\n    return ()\n"
        "def kernel():\n    t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
        "    assert SEEN == '1'\n"
    )
    r = measure_cpu(probe, warmup=0, repeats=3, timeout_s=60)
    assert r.ok and r.extra["pinned_threads"] == 1 and r.extra["threads"] >= 1
    # the kernel's assert would have made the run an error had the variable not been set before import


def test_pair_mode_times_two_variants_side_by_side(tmp_path):
    from bot.measure.backends.cpu import measure_cpu_pair

    src = (KERNELS / "work.py").read_text()
    small, big = tmp_path / "small.py", tmp_path / "big.py"
    small.write_text(src.replace("WORK = 4000", "WORK = 1000"))
    big.write_text(src.replace("WORK = 4000", "WORK = 4000"))
    a, b = measure_cpu_pair(big, small, warmup=2, repeats=15, timeout_s=60)
    assert a.ok and b.ok and len(a.samples_us) == len(b.samples_us) == 15
    # four times the work: the bounds check that each file's samples are its own (a swap
    # gives under 1, a mix near 1), wide because a shared CI host measured a 2x pair at 3.2x
    assert 2.0 < a.median_us / b.median_us < 8.0
    assert "alternately with small.py" in a.notes[-1] and "alternately with big.py" in b.notes[-1]
    broken = tmp_path / "broken.py"
    broken.write_text("def get_inputs(seed=0):\n    return ()\n")
    fa, fb = measure_cpu_pair(big, broken, warmup=0, repeats=2, timeout_s=60)
    assert fa.status == fb.status == "error" and any("no function 'kernel'" in n for n in fb.notes)
