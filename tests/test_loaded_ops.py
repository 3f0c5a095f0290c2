"""The ops of benchmarks/loaded_ops (issue 11's unseen ops): each loads as an op tunebot can
tune, passes L0 as a real subprocess, fails L0 when its kernel is 5 % off, declares knob
spaces that hold the file's current value, and computes the right result at both ends of
every declared space (a benchmark that delivers a wrong variant would measure nothing).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from bot.config.discovery import list_ops, resolve_op  # noqa: E402
from bot.config.repo import load_repo_config  # noqa: E402
from bot.strategies.knobs import current_value  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OPS_ROOT = ROOT / "benchmarks" / "loaded_ops"
OP_NAMES = sorted(p.name for p in (OPS_ROOT / "unseen").iterdir() if p.is_dir())


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # loaded_tune.py copies the ops into a repository as examples/unseen/<op>; do the same.
    root = tmp_path_factory.mktemp("loaded_ops")
    shutil.copytree(OPS_ROOT / "unseen", root / "examples" / "unseen")
    return root


@pytest.fixture(autouse=True)
def _keep_torch_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _module(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)  # noqa: S102 - our own benchmark op
    return module


def _l0(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, path.name, "--level", "L0"],
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_op_folder_is_listed(repo: Path) -> None:
    listed = [q for q in list_ops(repo, load_repo_config(repo)) if q.startswith("unseen/")]
    assert listed == [f"unseen/{name}" for name in OP_NAMES]
    assert len(OP_NAMES) >= 6
    readme = (OPS_ROOT / "README.md").read_text(encoding="utf-8")
    for name in OP_NAMES:
        assert f"`unseen/{name}`" in readme, (
            f"{name} is not described in benchmarks/loaded_ops/README.md"
        )


@pytest.mark.parametrize("name", OP_NAMES)
def test_op_contract_and_knob_spaces(repo: Path, name: str) -> None:
    op = resolve_op(repo, load_repo_config(repo), f"unseen/{name}")
    assert op.latency.backend == "cpu"
    source = (repo / op.source).read_text(encoding="utf-8")
    assert "torch.set_num_threads(1)" in source
    module = _module(source, name)
    inputs = module.get_inputs(seed=0)
    expected = module.reference(*inputs)
    for knob in op.knobs:
        assert current_value(source, knob.name) in knob.values, knob.name
        # both ends of the declared space compute the right result
        for value in (knob.values[0], knob.values[-1]):
            setattr(module, knob.name, value)
            torch.testing.assert_close(module.kernel(*inputs), expected, rtol=1e-3, atol=1e-3)
        setattr(module, knob.name, current_value(source, knob.name))


@pytest.mark.parametrize("name", OP_NAMES)
def test_l0_passes_and_a_wrong_kernel_fails(tmp_path: Path, name: str) -> None:
    path = OPS_ROOT / "unseen" / name / f"{name}.py"
    run = _l0(path)
    assert run.returncode == 0, run.stderr
    assert "L0 pass" in run.stdout
    source = path.read_text(encoding="utf-8")
    wrapper = "_exact = kernel\n\n\ndef kernel(*inputs):\n    return _exact(*inputs) * 1.05\n\n\n"
    broken = tmp_path / path.name
    broken.write_text(
        source.replace('if __name__ == "__main__":', wrapper + 'if __name__ == "__main__":')
    )
    run = _l0(broken)
    assert run.returncode == 1 and "L0 FAIL" in run.stderr
