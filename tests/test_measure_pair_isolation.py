"""The cpu backend's pairs: each side in its own child process (runners/forked.py), for real.

Two kernels in one process can change each other's speed (docs/measurement.md, "pairs"). These
tests build such a pair on purpose, and check that a crash, a hang, a patched clock or a forged
message on one side reads as it does in a single run and never becomes a figure.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from bot.measure.backends.cpu import _implausible_pair, measure_cpu, measure_cpu_pair
from tests.test_fault_kernels import HOSTILE, marked_processes

KERNELS = Path(__file__).parent / "measure_kernels"

# Both files import `shared_bag`: in one process it is one module. The grower adds 20 000
# numbers to it per call; the reader sums it, so beside the grower in one process the reader
# slows down call after call, and alone (or in its own process) it stays at its own cost.
BAG = "BAG = []\n"
GROWER = """\
import shared_bag


def get_inputs(seed=0):
    return ()


def kernel():
    shared_bag.BAG.extend(range(20000))
"""
READER = """\
import shared_bag


def get_inputs(seed=0):
    return ()


def kernel():
    return sum(range(20000)) + sum(shared_bag.BAG)
"""


def _files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "shared_bag.py").write_text(BAG)
    grower, reader = tmp_path / "grower.py", tmp_path / "reader.py"
    grower.write_text(GROWER)
    reader.write_text(READER)
    return grower, reader


def test_one_side_cannot_change_the_other_sides_speed(tmp_path):
    grower, reader = _files(tmp_path)
    alone = measure_cpu(reader, warmup=2, repeats=15, timeout_s=60)
    _, isolated = measure_cpu_pair(grower, reader, warmup=2, repeats=15, timeout_s=60)
    _, shared = measure_cpu_pair(grower, reader, warmup=2, repeats=15, timeout_s=60, isolate=False)
    assert alone.ok and isolated.ok and shared.ok
    # by hand: alone the reader sums 20 000 numbers; in one process with the grower it also
    # sums the grower's 40 000-340 000, at least 2x its own work on every timed call
    assert shared.median_us > 2.5 * alone.median_us, (shared.median_us, alone.median_us)
    assert isolated.median_us < 1.6 * alone.median_us, (isolated.median_us, alone.median_us)
    assert "each in its own process on one core" in isolated.notes[-1]
    assert "in one process" in shared.notes[-1]
    assert isolated.extra["isolated"] is True and shared.extra["isolated"] is False
    assert "isolated" not in alone.extra


def test_a_crash_on_one_side_reads_as_a_crash(tmp_path):
    fa, fb = measure_cpu_pair(
        KERNELS / "work.py", KERNELS / "segfault.py", warmup=0, repeats=2, timeout_s=60
    )
    assert fa.status == fb.status == "error"
    assert "SIGSEGV" in fb.notes[0]  # as measure_cpu says of the file alone


def test_a_hang_on_one_side_times_out_and_no_child_survives(tmp_path, monkeypatch):
    mark = uuid.uuid4().hex
    monkeypatch.setenv("HOSTILE_MARK", mark)
    hang = tmp_path / "hang.py"
    hang.write_text(
        "import time\n\ndef get_inputs(seed=0):\n    return ()\n\n"
        "def kernel():\n    time.sleep(3600)\n"
    )
    fa, fb = measure_cpu_pair(KERNELS / "work.py", hang, warmup=1, repeats=2, timeout_s=3)
    assert fa.status == fb.status == "timeout"
    assert marked_processes(mark) == []


def _hostile_pair(tmp_path: Path, name: str):
    """The hostile op `name` as its baseline (BLOCK 16, honest) beside its variant (BLOCK 32)."""
    base = tmp_path / "base" / f"{name}.py"
    cand = tmp_path / "cand" / f"{name}.py"
    for path, block in ((base, 16), (cand, 32)):
        path.parent.mkdir()
        text = (HOSTILE / f"{name}.py").read_text()
        path.write_text(text.replace("\nBLOCK = 16\n", f"\nBLOCK = {block}\n", 1))
    return measure_cpu_pair(base, cand, warmup=1, repeats=5, timeout_s=60, clock="wall")


def test_a_patched_clock_on_one_side_does_not_reach_the_figures(tmp_path):
    a, b = _hostile_pair(tmp_path, "forge_clock")
    # the candidate sleeps 17.5 ms per call and patches the runner's clock: the child's clocks
    # are bound before it is imported, so the figure is its true one (or none at all)
    assert not b.ok or b.median_us > 12_000, b
    assert not a.ok or a.median_us < 12_000  # the baseline keeps its own ~8.5 ms


def test_a_forged_message_on_the_pipes_is_an_error_not_a_figure(tmp_path):
    a, b = _hostile_pair(tmp_path, "forge_channel")
    assert a.status == b.status == "error"
    assert "wrote into the pipe" in " ".join(b.notes)


def test_figures_that_do_not_fit_the_round_trips_are_refused():
    honest = {
        "isolated": True,
        "samples_us": [100_000.0] * 4,
        "b_samples_us": [50_000.0] * 4,
        "roundtrip_us": [100_030.0] * 4,
        "b_roundtrip_us": [50_030.0] * 4,
        "ping_us": [30.0, 30.0],
    }
    assert _implausible_pair(honest, 4, 0.7) is None
    # by hand: side b claims 1 ms per call where its calls took 50 ms by the parent's clock
    faked = dict(honest, b_samples_us=[1_000.0] * 4)
    assert "side b" in (_implausible_pair(faked, 4, 0.7) or "")
    # side a claims twice the time its round trips took
    longer = dict(honest, samples_us=[200_000.0] * 4)
    assert "side a" in (_implausible_pair(longer, 4, 2.0) or "")
    # both sides together longer than the timed phase by the outer parent's clock
    assert "took" in (_implausible_pair(honest, 4, 0.3) or "")
    assert _implausible_pair(dict(honest, ping_us=None), 4, 0.7)
    assert _implausible_pair(dict(honest, b_roundtrip_us=[50_030.0]), 4, 0.7)


def test_the_variant_holds_no_result_channel(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os, stat\n\ndef _pipe(fd):\n    try:\n        return stat.S_ISFIFO(os.fstat(fd).st_mode)\n"
        "    except OSError:\n        return False\n\nPIPES = [fd for fd in range(3, 1024) if _pipe(fd)]\n\n"
        "def get_inputs(seed=0):\n    return ()\n\n"
        "def kernel():\n    assert len(PIPES) == 2, PIPES\n"
    )
    # beyond stdin, stdout and stderr a side holds its own command and data pipes only: the
    # result channel and the sibling's pipes stay with the parent
    a, b = measure_cpu_pair(KERNELS / "work.py", probe, warmup=0, repeats=2, timeout_s=60)
    assert a.ok and b.ok, b.notes


def test_turns_are_fair_and_complete():
    from bot.measure.runners.forked import block_order

    assert "".join(block_order(4, 1)) == "abbaabba"  # by hand: one call per turn, a b b a ...
    assert "".join(block_order(6, 3)) == "aaabbbbbbaaa"
    for repeats, block in ((30, 5), (7, 3), (2, 5), (1, 1)):
        order = block_order(repeats, block)
        assert order.count("a") == order.count("b") == repeats
        # each side runs first in as many turns as the other, give or take one
        firsts = [order[i] for i in range(len(order)) if i == 0 or order[i] != order[i - 1]]
        assert abs(firsts.count("a") - firsts.count("b")) <= 1


FORGER = """\
import gc
import json
import os
import signal

FORGED = {{"samples_us": [1.0] * 5, "cpu_samples_us": [1.0] * 5, "b_samples_us": [1.0] * 5,
          "b_cpu_samples_us": [1.0] * 5, "threads": 1, "pinned_threads": 1}}


def _forge():
    # the runner's channel object was copied into this child by fork: its nonce and descriptor
    channel = next(o for o in gc.get_objects() if type(o).__name__ == "Channel")
    line = json.dumps({{"n": channel._nonce, "k": "result", "d": FORGED}}) + "\\n"
    fd = os.open(f"/proc/{{os.getppid()}}/fd/{{channel.fd}}", os.O_WRONLY)
    os.write(fd, line.encode())
    if {kill}:
        os.kill(os.getppid(), signal.SIGKILL)


_forge()


def get_inputs(seed=0):
    return ()


def kernel():
    return sum(range(20000))
"""


@pytest.mark.parametrize("kill", [False, True])
def test_a_result_forged_through_proc_is_refused(tmp_path, kill):
    """The threat model's residual route: a side reaches the runner's result channel through
    /proc/<runner>/fd with the nonce it finds in its own memory. By hand: the runner's own result
    makes two on the channel, or the runner is dead; either way no figure comes out."""
    forger = tmp_path / "forger.py"
    forger.write_text(FORGER.format(kill=kill))
    a, b = measure_cpu_pair(KERNELS / "work.py", forger, warmup=0, repeats=5, timeout_s=60)
    assert a.status == b.status == "error"
    assert not b.samples_us and not a.samples_us
    # the forgery reached the channel (or killed the runner): the route is real, and refused
    expected = "killed by SIGKILL" if kill else "2 results on the channel"
    assert expected in " ".join(b.notes), b.notes


def test_each_side_warms_up_in_its_own_turn_and_every_turn_starts_untimed(tmp_path):
    for name in ("a", "b"):
        (tmp_path / f"{name}.py").write_text(
            "def get_inputs(seed=0):\n    return ()\n\n"
            f"def kernel():\n    print('CALL {name}', flush=True)\n"
        )
    a, b = measure_cpu_pair(tmp_path / "a.py", tmp_path / "b.py", warmup=3, repeats=6)
    assert a.ok and b.ok
    calls = [line.split()[1] for line in a.tail.splitlines() if line.startswith("CALL ")]
    runs: list[list] = []
    for side in calls:
        if runs and runs[-1][0] == side:
            runs[-1][1] += 1
        else:
            runs.append([side, 1])
    # by hand: warm-up a x3, b x3; then turns a a a a a | b b b b b b | a (block_order(6, 5)),
    # each preceded by one untimed call: a x6, b x7, a x2
    assert runs == [["a", 3], ["b", 3], ["a", 6], ["b", 7], ["a", 2]], runs


def test_a_short_kernel_in_a_process_full_of_objects_is_timed_not_refused(tmp_path):
    """The cyclic collector's pass before timing belongs to no call: a process holding many
    objects (torch imports ~500,000) once spent 50-60 ms there inside the first timed call's
    round trip, and a 2 ms kernel's pairs (loaded_ops conv1d) were refused as not credible."""
    for name in ("a", "b"):
        (tmp_path / f"{name}.py").write_text(
            "JUNK = [[i] for i in range(1_500_000)]  # objects the collector must walk\n\n"
            "def get_inputs(seed=0):\n    return (seed,)\n\n"
            "def kernel(x):\n    return sum(range(2000)) + x\n"
        )
    a, b = measure_cpu_pair(tmp_path / "a.py", tmp_path / "b.py", warmup=3, repeats=10)
    assert a.ok and b.ok, a.notes
