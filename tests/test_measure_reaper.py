"""The process-table reads the sandbox does around every kernel run: children and descendants."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from bot.measure import reaper


def _scan_children(pid: int) -> set[int]:
    """Children by reading every process's stat (what the children files replace)."""
    return {p for p in reaper._pids() if (st := reaper._stat(p)) and st[0] == pid}


@pytest.mark.skipif(not reaper._children_files(), reason="no /proc/<pid>/task/<tid>/children")
def test_children_files_agree_with_a_scan_of_the_process_table():
    # a child that starts a grandchild, which starts a great-grandchild: all sleep
    code = (
        "import subprocess, sys, time\n"
        "depth = int(sys.argv[1])\n"
        "if depth: subprocess.Popen([sys.executable, '-c', "
        "open(sys.argv[2]).read(), str(depth - 1), sys.argv[2]])\n"
        "time.sleep(30)\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "tree.py"
        script.write_text(code)
        procs = [subprocess.Popen([sys.executable, "-c", code, "2", str(script)]) for _ in range(2)]
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                tree = reaper._descendants({p.pid for p in procs})
                if len(tree) == 6:
                    break
                time.sleep(0.1)
            assert len(tree) == 6  # two children, two grandchildren, two great-grandchildren
            mine = reaper.children()
            assert {p.pid for p in procs} <= mine
            assert mine == _scan_children(reaper.os.getpid())
            for p in procs:
                assert reaper.children(p.pid) == _scan_children(p.pid)
        finally:
            reaper._kill(reaper._descendants({p.pid for p in procs}))
            for p in procs:
                p.wait()
