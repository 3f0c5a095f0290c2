"""Hostile kernels (tests/hostile_kernels/) against the measurement layer: real subprocesses.

Each test runs a variant of a hostile op (a knob changed, as tunebot's strategies change it)
and states by hand what must come out. The loop-level faults are in test_fault_injection.py.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

import pytest

from bot.config.schema import AccuracySettings, KernelLimits, LatencySettings, OpConfig
from bot.measure import confine, reaper
from bot.measure.backends.common import implausible_samples
from bot.measure.evaluator import Evaluator, l0_seeds
from bot.measure.sandbox import python_argv, run_sandboxed

HOSTILE = Path(__file__).parent / "hostile_kernels"


def op_dir(tmp_path: Path, name: str, block: int = 32) -> tuple[Path, Path]:
    """A worktree-like folder with op `name` as a variant (BLOCK = `block`); returns (root, source)."""
    root = tmp_path / "wt"
    folder = root / "examples" / "hostile" / name
    folder.mkdir(parents=True)
    text = (HOSTILE / f"{name}.py").read_text().replace("\nBLOCK = 16\n", f"\nBLOCK = {block}\n", 1)
    (folder / f"{name}.py").write_text(text)
    return root, folder / f"{name}.py"


def evaluator(root: Path, name: str, **kw) -> Evaluator:
    op = OpConfig(
        project="hostile",
        name=name,
        dir=Path("examples/hostile") / name,
        latency=LatencySettings(backend="cpu", warmup=1, repeats=9, timeout_s=60),
        accuracy=kw.pop("accuracy", AccuracySettings(timeout_s=60)),
        **kw,
    )
    return Evaluator(op, root)


def marked_processes(mark: str) -> list[int]:
    entry = f"HOSTILE_MARK={mark}".encode()
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) != os.getpid():
            try:
                if entry in (p / "environ").read_bytes().split(b"\0"):
                    state = (p / "stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state != "Z":
                        found.append(int(p.name))
            except OSError:
                continue
    return found


def test_a_kernel_that_patches_the_clock_gets_no_latency(tmp_path):
    root, src = op_dir(tmp_path, "forge_clock")
    result = evaluator(root, "forge_clock").latency(src)
    # honest: 9 calls of ~17.5 ms; forged: 0.5 us each. Either measured honestly or refused.
    assert result.status == "error", result
    assert "not credible" in " ".join(result.notes) and "samples add up to only" in " ".join(
        result.notes
    )


def test_a_kernel_that_writes_forged_results_into_its_pipes_is_an_error(tmp_path):
    root, src = op_dir(tmp_path, "forge_channel")
    result = evaluator(root, "forge_channel").latency(src)
    assert result.status == "error"
    assert "result channel tampered with" in " ".join(result.notes)


def test_the_forged_result_file_of_the_old_protocol_has_no_effect(tmp_path):
    """The issue's attack: overwrite the runner's --result file at exit. There is no such file now:
    the time measured is the kernel's own (~17.5 ms per call, never 0.5 us)."""
    root, src = op_dir(tmp_path, "forge_file")
    result = evaluator(root, "forge_file").latency(src)
    assert result.ok and result.extra["wall"]["median_us"] > 12_000, result


def test_flaky_l0_is_repeated_on_fresh_seeds_and_recorded_as_flaky(tmp_path):
    root, src = op_dir(tmp_path, "flaky")
    seeds = l0_seeds(src.read_text(), 3)
    assert any(s % 13 for s in seeds)  # by hand: the variant is wrong for these inputs
    result = evaluator(root, "flaky").accuracy(src)
    assert result.status == "fail" and result.details["flaky"] is True
    assert "flaky L0" in result.reason and result.details["l0_runs"][0] == "pass"
    steady = evaluator(root, "flaky").accuracy(op_dir(tmp_path / "b", "flaky", block=16)[1])
    assert steady.passed and len(steady.details["l0_runs"]) == 4


def test_no_kernel_process_survives_its_run(tmp_path, monkeypatch):
    mark = uuid.uuid4().hex
    monkeypatch.setenv("HOSTILE_MARK", mark)
    root, src = op_dir(tmp_path, "leaker")
    result = evaluator(root, "leaker", accuracy=AccuracySettings(timeout_s=60, repeats=0)).accuracy(
        src
    )
    assert result.passed and "LEAKED" in result.tail  # the leaks happened
    time.sleep(0.3)
    assert marked_processes(mark) == []


def test_memory_and_cpu_caps_from_tune_yaml(tmp_path):
    root, src = op_dir(tmp_path, "hog")
    capped = evaluator(root, "hog", limits=KernelLimits(memory_mb=512)).latency(src)
    assert capped.status == "error" and "out of memory" in " ".join(capped.notes)
    root2, src2 = op_dir(tmp_path / "b", "burner")
    started = time.monotonic()
    burnt = evaluator(root2, "burner", limits=KernelLimits(cpu_s=2)).latency(src2)
    assert burnt.status == "error" and "CPU-time cap" in " ".join(burnt.notes)
    assert time.monotonic() - started < 25  # stopped long before its 30 s


def test_default_caps_are_set(tmp_path):
    root, _ = op_dir(tmp_path, "hog")
    limits = evaluator(root, "hog").limits(60)
    assert limits.memory_mb and limits.memory_mb > 512 and limits.memory_kind == "as"
    assert (
        limits.cpu_s is None and limits.file_size_mb == 4096
    )  # CPU time: only when tune.yaml asks
    assert limits.writable == ()


@pytest.mark.skipif(not confine.landlock_abi(), reason="needs Linux Landlock")
def test_a_confined_kernel_cannot_write_outside_its_temporary_folder(tmp_path):
    target = tmp_path / "outside.txt"
    code = (
        f"import os, pathlib\n"
        f"open(os.path.join(os.environ['TMPDIR'], 'ok.txt'), 'w').write('fine')\n"
        f"try:\n    open({str(target)!r}, 'w').write('x')\nexcept PermissionError:\n    print('DENIED')\n"
    )
    run = run_sandboxed(python_argv("-c", code), tmp_path, 30, limits=confine.Limits(writable=()))
    assert run.ok and "DENIED" in run.output and not target.exists()
    free = run_sandboxed(
        python_argv("-c", code), tmp_path, 30, limits=confine.Limits(writable=None)
    )
    assert free.ok and target.exists()


def test_kernel_temp_folders_of_dead_processes_are_swept(tmp_path):
    dead = tmp_path / "tunebot-999999999-kernel-abc"
    dead.mkdir()
    mine = tmp_path / f"tunebot-{os.getpid()}-kernel-abc"
    mine.mkdir()
    other = tmp_path / "unrelated"
    other.mkdir()
    assert reaper.sweep_temp(tmp_path) == [dead.name]
    assert mine.exists() and other.exists()
    shutil.rmtree(mine)


def test_implausible_samples_rules():
    # written by hand: counts, signs and totals against the parent's clock
    assert implausible_samples([1.0] * 3, 4, None, exact=True).startswith("expected 4 samples")
    assert "positive finite" in implausible_samples([1.0, float("nan")], 2, None, exact=True)
    assert "positive finite" in implausible_samples([1.0, -2.0], 2, None, exact=True)
    assert implausible_samples([10_000.0] * 10, 10, 0.1, exact=True) is None  # 0.1 s of 0.1 s
    assert "only" in implausible_samples([0.5] * 10, 10, 0.2, exact=True)  # 5 us of 0.2 s
    assert (
        implausible_samples([0.5] * 10, 10, 0.2, exact=False) is None
    )  # device time: no lower bound
    assert "add up to" in implausible_samples(
        [100_000.0] * 10, 10, 0.2, exact=False
    )  # 1 s in 0.2 s
