"""Contract of every registered latency backend (bot/measure/backends/registry.py).

Each backend that can run on this machine measures a real kernel in a real child process,
turns a crash and a hang into results, and either times pairs or refuses them; backends
that cannot run here (cuda without a GPU, the NPU ones without torch_npu) are skipped with
their own reason. A backend that needs settings beyond the common ones gets them from
`EXTRA` below.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bot.config.discovery import load_op_config
from bot.config.schema import LatencySettings, OpConfig
from bot.errors import ConfigError, MeasureError
from bot.measure.backends.base import Request
from bot.measure.backends.cpu import CpuBackend
from bot.measure.backends.registry import REGISTRY, detect
from bot.measure.evaluator import Evaluator
from bot.measure.types import LatencyResult

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "tests" / "measure_kernels"
HARNESS = ROOT / "examples" / "command_harness" / "bench.py"

# settings only some backends read, per backend name
EXTRA: dict[str, dict] = {
    "command": {
        "command": (
            sys.executable,
            str(HARNESS),
            "{source}",
            "--warmup",
            "{warmup}",
            "--repeats",
            "{repeats}",
        )
    },
}


def request(name: str, cwd: Path, **kw) -> Request:
    base = Request(
        warmup=1, repeats=6, timeout_s=120, cwd=cwd, op_name="pure", **EXTRA.get(name, {})
    )
    return replace(base, **kw)


@pytest.fixture
def kernels(tmp_path) -> Path:
    for name in ("pure", "work", "segfault", "hang"):
        shutil.copy(KERNELS / f"{name}.py", tmp_path / f"{name}.py")
    return tmp_path


def available(name: str):
    backend = REGISTRY[name]
    why = backend.unavailable()
    if why is not None:
        pytest.skip(f"{name}: {why}")
    return backend


def _op_with(tmp_path: Path, latency: str) -> Path:
    op_dir = tmp_path / "examples" / "p" / "pure"
    op_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(KERNELS / "pure.py", op_dir / "pure.py")
    (op_dir / "tune.yaml").write_text(f"latency:\n{latency}")
    return op_dir


def test_config_accepts_exactly_the_registered_backends(tmp_path):
    with pytest.raises(ConfigError) as refused:
        load_op_config(tmp_path, _op_with(tmp_path, "  backend: nope\n"))
    assert all(name in str(refused.value) for name in ("auto", *REGISTRY))
    for name, backend in REGISTRY.items():
        needs = "".join(f"  {key}: [python, bench.py]\n" for key, _, _ in backend.requires)
        op = load_op_config(tmp_path, _op_with(tmp_path, f"  backend: {name}\n{needs}"))
        assert op.latency.backend == name
        for key, problem, _ in backend.requires:  # what it cannot run without is demanded
            with pytest.raises(ConfigError, match=problem) as missing:
                load_op_config(tmp_path, _op_with(tmp_path, f"  backend: {name}\n"))
            assert f"latency.{key}" in str(missing.value)


def test_auto_picks_an_available_registered_backend():
    assert detect() in REGISTRY and REGISTRY[detect()].auto_rank > 0
    assert REGISTRY[detect()].unavailable() is None


@pytest.mark.parametrize("name", list(REGISTRY))
def test_declares_what_the_evaluator_reads(name):
    backend = REGISTRY[name]
    assert backend.name == name
    assert backend.memory_kind in ("as", "data")
    assert backend.device in ("cpu", "cuda", "npu")
    assert isinstance(backend.auto_rank, int) and isinstance(backend.pairs, bool)
    assert all(len(need) == 3 and all(need) for need in backend.requires)
    why = backend.unavailable()
    assert why is None or (isinstance(why, str) and why)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_measures_a_real_kernel(name, kernels):
    backend = available(name)
    result = backend.measure(kernels / "pure.py", request(name, kernels))
    assert isinstance(result, LatencyResult)
    assert result.ok and result.backend == name, result.notes
    assert result.samples_us and all(x > 0 for x in result.samples_us)
    assert result.min_us <= result.median_us
    assert result.command  # what was run is recorded


@pytest.mark.parametrize("name", list(REGISTRY))
def test_a_crash_and_a_hang_are_results(name, kernels):
    backend = available(name)
    crashed = backend.measure(kernels / "segfault.py", request(name, kernels))
    assert crashed.status == "error" and not crashed.ok and crashed.backend == name
    hung = backend.measure(kernels / "hang.py", request(name, kernels, timeout_s=3))
    assert hung.status == "timeout" and not hung.ok


@pytest.mark.parametrize("name", list(REGISTRY))
def test_pairs_are_timed_in_one_process_or_refused(name, kernels):
    backend = available(name)
    if not backend.pairs:
        with pytest.raises(MeasureError, match="cannot time two variants"):
            backend.measure_pair(kernels / "pure.py", kernels / "work.py", request(name, kernels))
        return
    a, b = backend.measure_pair(kernels / "pure.py", kernels / "work.py", request(name, kernels))
    assert a.ok and b.ok and a.backend == b.backend == name
    assert len(a.samples_us) == len(b.samples_us) == 6


class _CpuWallClock(CpuBackend):
    """A newcomer's backend: the cpu runner deciding on wall time, registered by one line."""

    name = "cpu-wall"
    pairs = False
    auto_rank = 0

    def measure(self, source: Path, request: Request) -> LatencyResult:
        result = super().measure(source, request)
        return replace(result, backend=self.name)


def test_a_new_backend_is_one_class_and_one_registry_line(monkeypatch, kernels):
    monkeypatch.setitem(REGISTRY, "cpu-wall", _CpuWallClock())
    op = OpConfig(
        project="demo",
        name="pure",
        dir=Path("."),
        latency=LatencySettings(backend="cpu-wall", warmup=1, repeats=5, timeout_s=60),
    )
    ev = Evaluator(op, kernels)
    result = ev.latency(Path("pure.py"))
    assert ev.backend == "cpu-wall" and result.ok and result.backend == "cpu-wall"
    assert ev.environment(Path("pure.py"), "abc").backend == "cpu-wall"
    assert detect() != "cpu-wall"  # not `auto`: only when asked for by name
