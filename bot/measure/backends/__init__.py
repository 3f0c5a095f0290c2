"""Latency backends: one module per backend, each a `base.Backend`, all listed in `registry.py`.

This package module holds the hardware probes the backends' `unavailable()` share. They
never import torch in the bot's process: probes run in a child, and only when a cheap
check says the hardware stack might be there.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys


def _imports_in_child(code: str, timeout_s: float = 120.0) -> bool:
    try:
        return (
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, timeout=timeout_s, check=False
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


@functools.cache
def torch_npu_imports() -> bool:
    return importlib.util.find_spec("torch_npu") is not None and _imports_in_child(
        "import torch, torch_npu"
    )


@functools.cache
def cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    if not (os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia")):
        return False  # no NVIDIA driver: skip the 2 s torch import
    return _imports_in_child("import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)")


def detect() -> str:
    """The backend `latency.backend: auto` picks on this machine (bot/measure/backends/registry.py)."""
    from bot.measure.backends.registry import detect as detect_in_registry  # registry imports us

    return detect_in_registry()
