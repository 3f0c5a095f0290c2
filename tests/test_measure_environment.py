"""Environment capture: CANN install info, npu-smi (stand-in), package versions, CPU model."""

from __future__ import annotations

import os
import platform
from pathlib import Path

from bot.measure import environment as env

BIN = Path(__file__).parent / "bin"

TOOLKIT_INFO = """package_name=Ascend-cann-toolkit
version=8.0.RC3
innerversion=V100R001C19SPC001B163
compatible_version=[V100R001C15],[V100R001C17],[V100R001C18],[V100R001C19]
arch=aarch64
os=linux
path=/usr/local/Ascend/ascend-toolkit/8.0.RC3/aarch64-linux
"""


def test_parse_toolkit_info():
    assert env.parse_toolkit_info(TOOLKIT_INFO) == "8.0.RC3"
    assert env.parse_toolkit_info("package_name=x\n") is None


def test_cann_version_from_ascend_home_path_arch_dir(tmp_path):
    info = tmp_path / "latest" / "aarch64-linux" / env.TOOLKIT_INFO
    info.parent.mkdir(parents=True)
    info.write_text(TOOLKIT_INFO)
    assert env.cann_version({"ASCEND_HOME_PATH": str(tmp_path / "latest")}) == "8.0.RC3"
    # ASCEND_TOOLKIT_HOME wins over ASCEND_HOME_PATH
    other = tmp_path / "other"
    other.mkdir()
    (other / env.TOOLKIT_INFO).write_text("version=8.3.RC1\n")
    assert (
        env.cann_version(
            {"ASCEND_TOOLKIT_HOME": str(other), "ASCEND_HOME_PATH": str(tmp_path / "latest")}
        )
        == "8.3.RC1"
    )


def test_no_cann_is_none(tmp_path, monkeypatch):
    monkeypatch.setattr(env, "DEFAULT_TOOLKIT_ROOTS", (str(tmp_path / "nowhere"),))
    assert env.cann_version({}) is None


def test_parse_npu_smi_real_layout():
    text = (
        "+------------------------------------------------------------------------------------------------+\n"
        "| npu-smi 23.0.6                   Version: 23.0.6                                               |\n"
        "+---------------------------+---------------+----------------------------------------------------+\n"
        "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n"
        "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n"
        "+===========================+===============+====================================================+\n"
        "| 1     910B4               | OK            | 95.9        39                0    / 0             |\n"
        "| 0                         | 0000:C1:00.0  | 0           0    / 0          3338 / 65536         |\n"
    )
    assert env.parse_npu_smi(text) == ("23.0.6", "910B4")
    assert env.parse_npu_smi("") == (None, None)


def test_parse_cpuinfo():
    assert env.parse_cpuinfo("processor\t: 0\nmodel name\t: AMD EPYC 7B13\n") == "AMD EPYC 7B13"
    assert env.parse_cpuinfo("Hardware\t: Kunpeng 920\n") == "Kunpeng 920"


def test_capture_on_an_npu_host_with_the_npu_smi_stand_in(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("TUNEBOT_FAKE_NPU_SMI_VERSION", "24.1.rc2")
    monkeypatch.setenv("TUNEBOT_FAKE_NPU_NAME", "910B2C")
    (tmp_path / env.TOOLKIT_INFO).write_text(TOOLKIT_INFO)
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", str(tmp_path))
    e = env.capture("npu-msprof", git_sha="abc123", command=["msprof", "op", "python"])
    assert e.backend == "npu-msprof"
    assert e.device == "Ascend 910B2C" and e.driver_version == "24.1.rc2"
    assert e.cann_version == "8.0.RC3"
    assert e.git_sha == "abc123" and e.command == ["msprof", "op", "python"]
    assert e.python_version == platform.python_version()


def test_capture_on_a_cpu_host_reads_versions_without_importing_torch(monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    e = env.capture("cpu")
    assert e.device == e.cpu_model and e.cpu_model
    assert e.torch_version == env.package_version("torch")
    assert e.torch_npu_version is None
    assert "torch" not in sys.modules
