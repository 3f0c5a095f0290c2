"""What a measurement ran on: backend, device, CANN / torch / torch_npu / driver versions, CPU.

Nothing here imports torch or torch_npu (versions come from package metadata),
and each probe tolerates a missing tool: absent facts stay None.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

from bot.measure.types import Environment

TOOLKIT_INFO = "ascend_toolkit_install.info"
DEFAULT_TOOLKIT_ROOTS = ("/usr/local/Ascend/ascend-toolkit/latest", "/usr/local/Ascend/cann")


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def parse_toolkit_info(text: str) -> str | None:
    """`version=8.0.RC3` from ascend_toolkit_install.info."""
    m = re.search(r"^\s*version\s*=\s*(\S+)\s*$", text, re.MULTILINE)
    return m.group(1) if m else None


def toolkit_info_paths(env: dict[str, str]) -> list[Path]:
    """Where the CANN toolkit keeps its install info, most specific first."""
    roots = [env[k] for k in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH") if env.get(k)]
    roots += list(DEFAULT_TOOLKIT_ROOTS)
    paths: list[Path] = []
    for root in roots:
        base = Path(root)
        paths.append(base / TOOLKIT_INFO)
        paths += sorted(base.glob(f"*-linux/{TOOLKIT_INFO}"))  # <root>/<arch>-linux/...
    return paths


def cann_version(env: dict[str, str] | None = None) -> str | None:
    for path in toolkit_info_paths(dict(os.environ if env is None else env)):
        try:
            version = parse_toolkit_info(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        if version:
            return version
    return None


def parse_npu_smi(text: str) -> tuple[str | None, str | None]:
    """(driver version, first device name) from `npu-smi info`'s table."""
    version = re.search(r"Version:\s*(\S+)", text)
    device = None
    after_header = False
    for line in text.splitlines():
        if line.startswith("+====="):
            after_header = True
            continue
        m = re.match(r"\|\s*\d+\s+(\S+)\s*\|", line)
        if after_header and m:
            device = m.group(1)
            break
    return (version.group(1) if version else None), device


def npu_smi() -> tuple[str | None, str | None]:
    exe = shutil.which("npu-smi")
    if exe is None:
        return None, None
    try:
        out = subprocess.run(
            [exe, "info"], capture_output=True, text=True, timeout=20, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    return parse_npu_smi(out)


def parse_cpuinfo(text: str) -> str | None:
    for key in ("model name", "Hardware", "Processor", "cpu model"):
        m = re.search(rf"^{key}\s*:\s*(.+)$", text, re.MULTILINE)
        if m:
            return m.group(1).strip()
    return None


def cpu_model() -> str | None:
    try:
        model = parse_cpuinfo(Path("/proc/cpuinfo").read_text(errors="replace"))
    except OSError:
        model = None
    return model or platform.processor() or platform.machine() or None


def nvidia_device() -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.strip().splitlines()[0] if out.strip() else None


def capture(
    backend: str,
    git_sha: str | None = None,
    command: list[str] | None = None,
    device: str | None = None,
) -> Environment:
    """Everything we can learn without importing torch; call once per run and copy per measurement.

    `device` is the kind of device the backend times ("cpu", "cuda" or "npu"; by default the
    registered backend's `device`): what is probed for the device name.
    """
    if device is None:
        from bot.measure.backends.registry import REGISTRY  # loads every backend: only if asked

        device = REGISTRY[backend].device if backend in REGISTRY else "cpu"
    driver, npu = npu_smi() if device == "npu" or shutil.which("npu-smi") else (None, None)
    cpu = cpu_model()
    probes = {
        "npu": lambda: f"Ascend {npu}" if npu else None,
        "cuda": nvidia_device,
        "cpu": lambda: cpu,
    }
    name = probes.get(device, probes["cpu"])()
    return Environment(
        backend=backend,
        device=name,
        cann_version=cann_version(),
        torch_version=package_version("torch"),
        torch_npu_version=package_version("torch_npu") or package_version("torch-npu"),
        driver_version=driver,
        cpu_model=cpu,
        python_version=platform.python_version(),
        git_sha=git_sha,
        command=list(command) if command else [sys.executable],
    )
