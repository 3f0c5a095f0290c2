"""Backend auto-detection: npu-msprof > npu-torch > cuda > cpu, probed in a child process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.measure import backends

BIN = Path(__file__).parent / "bin"


@pytest.fixture
def fresh_probes():
    backends.torch_npu_imports.cache_clear()
    backends.cuda_available.cache_clear()
    yield
    backends.torch_npu_imports.cache_clear()
    backends.cuda_available.cache_clear()


@pytest.fixture
def importable_torch_npu(tmp_path, monkeypatch):
    """A torch_npu package that imports cleanly, visible to the bot and to its children."""
    (tmp_path / "torch_npu").mkdir()
    (tmp_path / "torch_npu" / "__init__.py").write_text("__version__ = '0.0-test'\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_plain_cpu_host_is_cpu(fresh_probes, monkeypatch):
    monkeypatch.setenv(
        "PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}"
    )  # msprof alone is not enough
    assert backends.detect() == ("cuda" if backends.cuda_available() else "cpu")


def test_torch_npu_with_msprof_is_npu_msprof(fresh_probes, importable_torch_npu, monkeypatch):
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")
    assert backends.detect() == "npu-msprof"


def test_torch_npu_without_msprof_is_npu_torch(
    fresh_probes, importable_torch_npu, monkeypatch, tmp_path
):
    monkeypatch.setenv("PATH", str(tmp_path))  # no msprof anywhere; the probe uses sys.executable
    assert backends.detect() == "npu-torch"


def test_torch_npu_that_fails_to_import_is_not_chosen(fresh_probes, tmp_path, monkeypatch):
    (tmp_path / "torch_npu").mkdir()
    (tmp_path / "torch_npu" / "__init__.py").write_text(
        "raise ImportError('libascendcl.so missing')\n"
    )
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert not backends.torch_npu_imports()
