"""scripts/strategy_sweep.py: every strategy over every TileLang file of a real git repository.

Each test builds a real git repository in a temp dir holding small self-written kernels and
runs the script as a subprocess, or calls its per-file check directly.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "strategy_sweep.py"
KERNEL = """import tilelang
import tilelang.language as T

M, N = 1024, 1024
block_M = 64


@tilelang.jit(target="npuir")
def add(M, N, block_M):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block_M), is_npu=True) as (cid, _):
            a = T.alloc_ub((block_M, N), "float16")
            T.copy(A[cid * block_M, 0], a)
            T.copy(a, B[cid * block_M, 0])

    return main


kernel = add(M, N, block_M)
"""


def _module():
    spec = importlib.util.spec_from_file_location("strategy_sweep", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["strategy_sweep"] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_a_plain_kernel_gives_round_tripping_variants_and_no_finding():
    r = _module().sweep_one("x@0:k.py", KERNEL, 60.0)
    assert r.findings == []
    assert r.specs >= 2  # block_M and the multi-buffer flag at least
    assert r.variants >= 2


def test_a_hang_is_reported_as_a_timeout_not_waited_for(monkeypatch):
    mod = _module()

    def forever(origin, source):
        while True:
            pass

    monkeypatch.setattr(mod, "_sweep", forever)
    r = mod.sweep_one("x@0:k.py", KERNEL, 0.3)
    assert r.findings == ["timeout after 0.3 s"]


def test_a_crash_is_a_finding_with_its_place(monkeypatch):
    mod = _module()
    from bot.strategies import planner

    def boom(self, source, strategies):
        raise KeyError("boom")

    monkeypatch.setattr(planner.Planner, "specs", boom)
    r = mod.sweep_one("x@0:k.py", KERNEL, 60.0)
    assert len(r.findings) == 1 and r.findings[0].startswith("crash in discovery")
    assert "KeyError" in r.findings[0]


def test_cli_reads_only_tilelang_files_of_the_revision_and_keeps_their_origin(
    tmp_path, git_repo, make_commit
):
    files = {"ops/add.py": KERNEL, "ops/copy_of_add.py": KERNEL, "tools/plain.py": "print(1)\n"}
    make_commit(git_repo, files, "kernels")
    repo = git_repo.path
    out = tmp_path / "out.json"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), str(repo), "--json", str(out)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads(out.read_text())
    # two identical files are one content; the file without tilelang is not read
    assert len(results) == 1
    assert results[0]["origin"].startswith(f"{repo.name}@") and results[0]["origin"].endswith(".py")
    assert results[0]["variants"] >= 2


def test_cli_refuses_a_folder_that_is_not_git_with_exit_2(tmp_path):
    run = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True
    )
    assert run.returncode == 2
    assert "not a git directory" in run.stderr
