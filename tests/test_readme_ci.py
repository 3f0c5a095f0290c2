"""README's test command and CI's entry point must be the same line, and it must install what it needs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_test_command() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Tests", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README's Tests section has no sh block"
    lines = [ln.strip() for ln in block.group(1).splitlines() if ln.strip()]
    assert len(lines) == 1, f"README's test command must be one line, got {lines}"
    return lines[0]


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    commands = [
        ln.strip() for ln in ci if ln.strip() and not ln.lstrip().startswith(("#", "set ", "cd "))
    ]
    assert commands[-1] == _readme_test_command()


def test_readme_test_command_installs_the_test_extra_before_pytest():
    cmd = _readme_test_command()
    install, _, run = cmd.partition("&&")
    assert "pip install" in install and ".[test]" in install and "torch==" in install
    assert "pytest" in run and "pytest" not in install
