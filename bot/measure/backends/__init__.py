"""Latency backends: cpu, cuda, npu-msprof, npu-torch. Each times the kernel only."""
