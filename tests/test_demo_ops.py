"""The CPU demo ops in examples/demo: the op module contract, L0 as a real subprocess,
broken copies failing L0, every point of every declared knob space computing the right result,
and the committed sweep tables matching the current sources.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from bot.config.discovery import list_ops, resolve_op  # noqa: E402
from bot.config.repo import load_repo_config  # noqa: E402
from bot.config.schema import OpConfig  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CFG = load_repo_config(ROOT)
DEMO_OPS = [q for q in list_ops(ROOT, CFG) if q.startswith("demo/")]


def _sweep_module() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("tunebot_sweep", ROOT / "benchmarks" / "sweep.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


sweep = _sweep_module()


@pytest.fixture(autouse=True)
def _keep_torch_threads():
    # The op modules pin torch to one thread when imported; give the test process its setting back.
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def load_op(name: str) -> OpConfig:
    return resolve_op(ROOT, CFG, name)


def module_from(source: str, name: str) -> types.ModuleType:
    """Execute an op source as a fresh module (not as __main__, so L0 does not run)."""
    module = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)  # noqa: S102 - our own example code
    return module


def run_l0(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, path.name, "--level", "L0"],
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_three_demo_ops_exist() -> None:
    assert DEMO_OPS == ["demo/attention", "demo/matmul", "demo/rms_norm"]
    kinds = {load_op(name).kernel_kind for name in DEMO_OPS}
    assert kinds == {"vector", "cube", "mix"}


@pytest.mark.parametrize("name", DEMO_OPS)
def test_op_module_contract(name: str) -> None:
    op = load_op(name)
    source = (ROOT / op.source).read_text(encoding="utf-8")
    module = module_from(source, op.name)
    for attr in (op.inputs, op.reference, op.entry):
        assert callable(getattr(module, attr)), attr
    assert "torch.set_num_threads(1)" in source
    # every knob is a module constant whose default lies in its declared space
    defaults = sweep.knob_defaults(source, [k.name for k in op.knobs])
    for knob in op.knobs:
        assert defaults.get(knob.name) in knob.values, knob.name
        assert getattr(module, knob.name) == defaults[knob.name]
    assert any(k.strategy == "block_size" for k in op.knobs)
    # inputs are deterministic per seed and differ between seeds
    a, b, other = module.get_inputs(seed=0), module.get_inputs(seed=0), module.get_inputs(seed=1)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(torch.equal(x, y) for x, y in zip(a, other))
    # DESIGN.md carries a performance target the config reads
    assert "## 性能目标" in (ROOT / op.dir / "DESIGN.md").read_text(encoding="utf-8")
    assert op.target_us is not None and op.target_us > 0


@pytest.mark.parametrize("name", DEMO_OPS)
def test_l0_passes_as_a_subprocess(name: str) -> None:
    op = load_op(name)
    run = run_l0(ROOT / op.source)
    assert run.returncode == 0, run.stderr
    assert "L0 pass" in run.stdout


@pytest.mark.parametrize("name", DEMO_OPS)
def test_l0_cli_rejects_unknown_levels(name: str) -> None:
    op = load_op(name)
    run = subprocess.run(
        [sys.executable, op.source.name, "--level", "L7"],
        cwd=ROOT / op.dir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and "invalid choice" in run.stderr


def _perturb(source: str) -> str:
    """Wrap the kernel so its result is 5 % off: a wrong kernel, same shapes and dtypes."""
    wrapper = (
        "_exact_kernel = kernel\n\n\ndef kernel(*inputs):\n"
        "    return (_exact_kernel(*inputs).float() * 1.05).to(_exact_kernel(*inputs).dtype)\n\n\n"
    )
    return source.replace('if __name__ == "__main__":', wrapper + 'if __name__ == "__main__":')


# Realistic bugs a transform could introduce, one per op.
BUGS = {
    "demo/attention": (
        'scores = scores.masked_fill(future, float("-inf"))',
        "pass  # mask dropped",
    ),
    "demo/matmul": (
        "acc += tile @ values[k0:k1]",
        "acc = tile @ values[k0:k1]  # overwrites partial sums",
    ),
    "demo/rms_norm": (
        "block.pow(2).mean(dim=-1, keepdim=True) + EPS",
        "block.pow(2).mean(dim=0, keepdim=True) + EPS",
    ),
}


BREAKAGES = [(name, kind) for name in DEMO_OPS for kind in ("perturbed", "bug")] + [
    ("demo/rms_norm", "crash")
]


@pytest.mark.parametrize("name, breakage", BREAKAGES)
def test_broken_copy_fails_l0(name: str, breakage: str, tmp_path: Path) -> None:
    op = load_op(name)
    source = (ROOT / op.source).read_text(encoding="utf-8")
    if breakage == "perturbed":
        broken = _perturb(source)
    elif breakage == "bug":
        old, new = BUGS[name]
        assert source.count(old) == 1, "the bug site moved; update BUGS"
        broken = source.replace(old, new)
    else:
        broken = source.replace(
            "def kernel(", "def kernel(*_a, **_k):\n    raise RuntimeError('boom')\n\n\ndef _old("
        )
    assert broken != source
    path = tmp_path / op.source.name
    path.write_text(broken, encoding="utf-8")
    run = run_l0(path)
    assert run.returncode != 0
    assert "L0 pass" not in run.stdout
    if breakage != "crash":
        assert "L0 FAIL" in run.stderr


@pytest.mark.parametrize("name", DEMO_OPS)
def test_every_point_of_the_knob_space_is_correct(name: str) -> None:
    op = load_op(name)
    source = (ROOT / op.source).read_text(encoding="utf-8")
    base = module_from(source, op.name)
    inputs = base.get_inputs(seed=3)  # not the L0 seed: a second input set
    expected = base.reference(*inputs)
    tol = 1e-2 if expected.dtype in (torch.float16, torch.bfloat16) else 1e-4
    names = [k.name for k in op.knobs]
    for combo in itertools.product(*(k.values for k in op.knobs)):
        point = dict(zip(names, combo))
        module = module_from(sweep.set_knobs(source, point), op.name)
        assert all(getattr(module, n) == v for n, v in point.items())
        actual = module.kernel(*inputs)
        assert actual.shape == expected.shape and actual.dtype == expected.dtype, point
        torch.testing.assert_close(
            actual, expected, rtol=tol, atol=tol, msg=lambda m, p=point: f"{p}: {m}"
        )


def test_set_knobs_rewrites_exactly_the_named_constants() -> None:
    source = "BLOCK_M = 64  # rows\nBLOCK_MN = 8\nx = BLOCK_M\nBLOCK_N: int = 32\n"
    assert sweep.set_knobs(source, {"BLOCK_M": 128, "BLOCK_N": 16}) == (
        "BLOCK_M = 128  # rows\nBLOCK_MN = 8\nx = BLOCK_M\nBLOCK_N: int = 16\n"
    )
    with pytest.raises(SystemExit, match="found 0"):
        sweep.set_knobs(source, {"NUM_STAGES": 2})


@pytest.mark.parametrize("name", DEMO_OPS)
def test_committed_sweep_matches_the_source_and_has_an_interior_best(name: str) -> None:
    """docs/ops.md shows these tables: they must describe the current kernel and knob space."""
    op = load_op(name)
    path = sweep.cache_path(op.qualified)
    assert path.exists(), f"run `python benchmarks/sweep.py {name}`"
    data = json.loads(path.read_text(encoding="utf-8"))
    source = (ROOT / op.source).read_text(encoding="utf-8")
    assert data["space_key"] == sweep.space_key(op, source), (
        f"stale: run `python benchmarks/sweep.py {name}`"
    )
    grid = list(itertools.product(*(k.values for k in op.knobs)))
    assert len(data["points"]) == len(grid) and all(p["status"] == "ok" for p in data["points"])
    assert data["best_on_edge_of"] == []
    best = data["best"]
    assert all(best[k.name] not in (k.values[0], k.values[-1]) for k in op.knobs)
    defaults = sweep.knob_defaults(source, [k.name for k in op.knobs])
    assert best != defaults, "the baseline must leave the tuner something to find"
    assert data["default_median_us"] > data["best_median_us"]
    for key in ("cpu_model", "torch_version", "date", "warmup", "repeats"):
        assert data["environment"][key] not in (None, "")
    docs = (ROOT / "docs" / "ops.md").read_text(encoding="utf-8")
    assert sweep.render(data) in docs, (
        "docs/ops.md is stale: run `python benchmarks/sweep.py --docs`"
    )
