"""benchmarks/pair_interference.py: times two kernels alone and in pairs with the cpu backend's
own functions and prints the gain each way; a missing file is a usage error."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import pair_interference as pi  # noqa: E402

OP = """\
WORK = {work}


def get_inputs(seed=0):
    return (list(range(WORK)),)


def kernel(xs):
    total = 0
    for _ in range(20):
        total += sum(x * x for x in xs)
    return total
"""


def test_a_kernel_doing_less_work_gains_both_ways(tmp_path, capsys):
    base, cand = tmp_path / "base.py", tmp_path / "cand.py"
    base.write_text(OP.format(work=20000))
    cand.write_text(OP.format(work=2000))
    assert pi.main([str(base), str(cand), "--processes", "2", "--repeats", "5"]) == 0
    out = capsys.readouterr().out
    gains = dict(re.findall(r"^(alone|paired|shared)\s+medians .*gain ([+-][\d.]+)%", out, re.M))
    assert set(gains) == {"alone", "paired", "shared"}
    # a tenth of the work: far faster however it is timed
    assert all(float(g) > 50 for g in gains.values())
    assert len(re.findall(r"^alone\s+base ms\s+((?:[\d.]+ ?){2})$", out, re.M)) == 1


def test_a_missing_file_is_a_usage_error(tmp_path, capsys):
    base = tmp_path / "base.py"
    base.write_text(OP.format(work=10))
    assert pi.main([str(base), str(tmp_path / "nope.py")]) == 2
    assert "nope.py is not a file" in capsys.readouterr().err
