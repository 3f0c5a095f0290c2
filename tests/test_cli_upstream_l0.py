"""L0 for upstream-style files, as a user meets it: real upstream kernels (the corpus of
tests/data/upstream_kernels, byte for byte) and files written the way upstream writes them
(argparse at module level with a strict parse_args(), checks in `__main__` or at top level),
checked by real subprocesses and the real CLI.

Expected outcomes, written before running: on this CPU machine TileLang is not installed, so a
real upstream kernel's baseline fails L0 with exit 1 and a message naming the missing module
(nothing measured, no iteration, no proposal); after the toolchain problem is fixed and committed
the same command starts over at HEAD without --restart. Harness mode imports a file with a
strict module-level parse_args() without handing it the runner's flags; a file that exits while
being imported, or lacks the harness functions, is an error that names the fix; a script with
no check at all never passes command mode.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import make_commit, third_party_corpus

from bot.config.schema import AccuracySettings
from bot.measure.accuracy import l0_command, l0_harness
from bot.measure.backends.cpu import measure_cpu

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "upstream_kernels"
MANIFEST = {k["id"]: k for k in yaml.safe_load((CORPUS / "MANIFEST.yaml").read_text())["kernels"]}

# upstream's style: flags parsed strictly at import time, a check at the bottom
STRICT = """import argparse
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--n", type=int, default=64)
args = parser.parse_args()
N = args.n


def get_inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(N, generator=g),)


def reference(x):
    return x * 2


def kernel(x):
    return x + x


if __name__ == "__main__":
    (x,) = get_inputs()
    torch.testing.assert_close(kernel(x), reference(x))
    print("Kernel Output Match!")
"""


def upstream(kid: str) -> str:
    shared = third_party_corpus("upstream_kernels", f"src/{kid}.py")
    path = (shared or CORPUS) / "src" / f"{kid}.py"
    if not path.is_file():
        pytest.skip(f"{path} is not materialised: run scripts/upstream_corpus.py")
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == MANIFEST[kid]["sha256"]
    return data.decode("utf-8")


def tune(repo, op: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bot", "tune", op, "--repo", str(repo.path), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=dict(os.environ),
    )


def records(repo, op: str) -> list[dict]:
    path = repo.path / f".git/tunebot/runs/up/{op}/results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


BENCH = 'import json\nprint(json.dumps({"samples": [100.0, 100.1, 100.2]}))\n'
TUNE = (
    "kernel_kind: mix\n"
    "accuracy: {mode: command, timeout_s: 120, repeats: 0}\n"
    'latency: {backend: command, command: ["{python}", bench.py, "{source}"], timeout_s: 60}\n'
)


@pytest.mark.parametrize("kid", ["sparse_mla_fwd", "pto_silu"])
def test_a_real_upstream_kernel_without_its_toolchain_fails_the_baseline_naming_it(git_repo, kid):
    # sparse_mla_fwd: argparse at module level and an `if __name__` main; pto_silu: checks at
    # top level, no main. Neither declares --level, so neither is given it.
    make_commit(
        git_repo,
        {
            f"examples/up/{kid}/{kid}.py": upstream(kid),
            f"examples/up/{kid}/tune.yaml": TUNE,
            f"examples/up/{kid}/bench.py": BENCH,
        },
        f"add upstream {kid}",
    )
    done = tune(git_repo, kid, "--max-iters", "2")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "fails L0 (error" in done.stderr
    assert "this machine lacks the `tilelang` module the op needs" in done.stderr, done.stderr
    assert "unrecognized arguments" not in done.stderr
    assert [r["kind"] for r in records(git_repo, kid)] == ["start"]
    assert "proposal" not in done.stdout
    branches = subprocess.run(
        ["git", "branch", "--list", "tunebot/*"], cwd=git_repo.path, capture_output=True, text=True
    ).stdout
    assert branches == ""
    # the user makes the op runnable here (a stand-in toolchain that only imports) and commits:
    # the same command starts over at the new HEAD, no --restart needed
    stub = "import sys\nsys.exit(0)  # stand-in: nothing to run on this machine\n"
    make_commit(
        git_repo,
        {
            f"examples/up/{kid}/tilelang/__init__.py": stub,
            f"examples/up/{kid}/torch_npu/__init__.py": stub,
        },
        "stand-in toolchain",
    )
    again = tune(git_repo, kid, "--max-iters", "1")
    assert again.returncode == 0, again.stderr
    assert "resumed" not in again.stdout
    base = next(r for r in records(git_repo, kid) if r["kind"] == "baseline")
    assert base["accuracy"]["status"] == "pass"
    assert base["accuracy"]["command"][-1].endswith(f"{kid}.py")  # no --level flag
    assert "no --level option" in base["accuracy"]["details"]["flags"]


def test_harness_mode_does_not_hand_the_runner_flags_to_a_strict_parse_args(tmp_path):
    (tmp_path / "op.py").write_text(STRICT)
    r = l0_harness(tmp_path / "op.py", tmp_path, AccuracySettings(timeout_s=120))
    assert r.status == "pass", (r.reason, r.tail)
    assert "unrecognized arguments" not in r.tail
    lat = measure_cpu(tmp_path / "op.py", repeats=5, warmup=1, cwd=tmp_path, timeout_s=120)
    assert lat.ok, (lat.notes, lat.tail)
    # and the file's own check, run as a script with no flags, passes command mode too
    assert l0_command(tmp_path / "op.py", tmp_path, timeout_s=120).status == "pass"


@pytest.mark.parametrize("exit_code", ["0", "2"])
def test_a_file_that_exits_while_imported_is_an_error_naming_the_fix(tmp_path, exit_code):
    text = STRICT.replace("args = parser.parse_args()", f"raise SystemExit({exit_code})")
    (tmp_path / "op.py").write_text(text)
    r = l0_harness(tmp_path / "op.py", tmp_path, AccuracySettings(timeout_s=120))
    assert r.status == "error"
    assert f"op.py exited with code {exit_code} while being imported" in r.reason, r.reason
    assert 'if __name__ == "__main__":' in r.reason


def test_harness_mode_on_a_file_without_the_harness_functions_points_to_command_mode(tmp_path):
    (tmp_path / "op.py").write_text("import math\nX = math.pi\n")
    r = l0_harness(tmp_path / "op.py", tmp_path, AccuracySettings(timeout_s=120))
    assert r.status == "error"
    assert "has no function 'kernel'" in r.reason and "accuracy.mode: command" in r.reason


def test_a_harness_that_ends_the_process_itself_says_so(tmp_path):
    (tmp_path / "op.py").write_text(
        "import os\n\ndef get_inputs(seed=0):\n    return (1,)\n\n"
        "def reference(x):\n    return x\n\ndef kernel(x):\n    os._exit(0)\n"
    )
    r = l0_harness(tmp_path / "op.py", tmp_path, AccuracySettings(timeout_s=120))
    assert r.status == "error" and "exited 0 without reporting a result" in r.reason, r.reason


def test_a_script_that_checks_nothing_never_passes_command_mode(tmp_path):
    library = "import torch\n\nBLOCK = 32\n\n\ndef kernel(x):\n    return x * 2\n"
    (tmp_path / "lib.py").write_text(library)
    r = l0_command(tmp_path / "lib.py", tmp_path, timeout_s=120)
    assert r.status == "error" and "checks nothing when run" in r.reason, r.reason
    # the same definitions with a check at top level (upstream's ascendc_pto style) are run
    (tmp_path / "top.py").write_text(library + "\nassert kernel(3) == 6\n")
    assert l0_command(tmp_path / "top.py", tmp_path, timeout_s=120).status == "pass"
    (tmp_path / "wrong.py").write_text(library + "\nassert kernel(3) == 7, 'L0 FAIL'\n")
    assert l0_command(tmp_path / "wrong.py", tmp_path, timeout_s=120).status == "fail"


def test_a_check_less_op_fails_its_baseline_through_the_cli(git_repo):
    make_commit(
        git_repo,
        {
            "examples/up/lib/lib.py": "BLOCK_M = 32\n\n\ndef kernel(x):\n    return x\n",
            "examples/up/lib/tune.yaml": TUNE,
            "examples/up/lib/bench.py": BENCH,
        },
        "a library file as the op",
    )
    done = tune(git_repo, "lib", "--max-iters", "1")
    assert done.returncode == 1
    assert "fails L0 (error: lib.py checks nothing when run" in done.stderr, done.stderr
    assert "accuracy.mode: harness" in done.stderr
