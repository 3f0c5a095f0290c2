"""cuda backend: where CUDA is missing (this CI), a clear error instead of a wrong number."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import MeasureError
from bot.measure.backends import cuda_available
from bot.measure.backends.cuda import measure_cuda

KERNELS = Path(__file__).parent / "measure_kernels"


@pytest.mark.skipif(cuda_available(), reason="this machine has CUDA")
def test_no_cuda_is_a_clear_error():
    with pytest.raises(MeasureError, match="CUDA not available.*latency.backend to cpu"):
        measure_cuda(KERNELS / "good.py", repeats=3, timeout_s=120)


@pytest.mark.skipif(not cuda_available(), reason="needs an NVIDIA GPU and a CUDA build of torch")
def test_cuda_times_the_kernel_on_the_device():
    r = measure_cuda(KERNELS / "good.py", repeats=10, timeout_s=300)
    assert r.ok and len(r.samples_us) == 10 and r.extra["device"]
    assert r.min_us > 0
