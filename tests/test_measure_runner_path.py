"""A runner's own imports cannot be stood in for by files in the op's folder.

The runners run with the op's folder as their working directory, and the tuned code may have
written files there. Before the runner imports the variant, nothing there may run: not a
`json.py` or `struct.py` standing in for the standard library the runner imports, nor a
`sitecustomize.py` that Python runs at start for every folder on PYTHONPATH. By hand: every
measurement below comes out ok, and none of those files runs in a runner before the variant
(the variant itself imports none of them).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.schema import AccuracySettings
from bot.measure.accuracy import l0_harness
from bot.measure.backends.cpu import measure_cpu, measure_cpu_pair

SHADOWS = ("json", "struct", "argparse", "runpy", "sitecustomize")

KERNEL = """\
def get_inputs(seed=0):
    return (3,)


def reference(x):
    return x * 2


def kernel(x):
    return x * 2
"""


@pytest.fixture
def op(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "op"
    folder.mkdir()
    log = tmp_path / "ran.log"
    for name in SHADOWS:
        (folder / f"{name}.py").write_text(
            "import sys\n"
            "after = any(k.startswith('tunebot_variant') for k in sys.modules)\n"
            f"with open({str(log)!r}, 'a') as f:\n"
            f"    f.write({name!r} + (' after' if after else ' before') + ' the variant\\n')\n"
            "raise SystemExit(97)\n"
        )
    (folder / "k.py").write_text(KERNEL)
    return folder, log


def test_the_cpu_runner_runs_no_file_of_the_op_folder_but_the_variant(op):
    folder, log = op
    r = measure_cpu(folder / "k.py", warmup=0, repeats=3, timeout_s=60, cwd=folder)
    assert r.ok, (r.notes, r.tail)
    assert not log.exists(), log.read_text()


def test_a_pair_runs_no_file_of_the_op_folder_but_the_variants(op):
    folder, log = op
    (folder / "k2.py").write_text(KERNEL.replace("x * 2\n\n\ndef get", "x + x\n\n\ndef get"))
    a, b = measure_cpu_pair(folder / "k.py", folder / "k2.py", warmup=0, repeats=3, cwd=folder)
    assert a.ok and b.ok, (a.notes, a.tail)
    assert not log.exists(), log.read_text()


def test_the_l0_harness_runs_no_file_of_the_op_folder_before_the_variant(op):
    """The harness imports torch after the variant (only it needs torch), when the variant's own
    code already runs in the process and its folder is first on sys.path, as for `python k.py`:
    torch's `import struct` then finds the op's struct.py, as the op's own script would. What
    must not happen is a file of the folder running before the variant, as the runner."""
    folder, log = op
    l0_harness(folder / "k.py", folder, AccuracySettings(timeout_s=60))
    ran = log.read_text().splitlines() if log.exists() else []
    assert all(line.endswith(" after the variant") for line in ran), ran
    (folder / "struct.py").unlink()
    (folder / "json.py").unlink()
    log.unlink(missing_ok=True)
    result = l0_harness(folder / "k.py", folder, AccuracySettings(timeout_s=60))
    assert result.passed, (result.reason, result.tail)
    assert not log.exists(), log.read_text()


def test_a_sibling_helper_and_a_module_of_the_working_directory_still_import(tmp_path):
    here, there = tmp_path / "cwd", tmp_path / "variant"
    here.mkdir()
    there.mkdir()
    (here / "from_cwd.py").write_text("TWO = 2\n")
    (there / "sibling.py").write_text("THREE = 3\n")
    (there / "k.py").write_text(
        "import from_cwd\nimport sibling\n\n"
        "def get_inputs(seed=0):\n    return ()\n\n"
        "def kernel():\n    return from_cwd.TWO + sibling.THREE\n"
    )
    r = measure_cpu(there / "k.py", warmup=0, repeats=2, timeout_s=60, cwd=here)
    assert r.ok, (r.notes, r.tail)
