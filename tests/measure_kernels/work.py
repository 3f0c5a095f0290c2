"""A kernel whose cost is set by the knob WORK (benchmarks/noise.py, sensitivity tests).

The loop body is identical for every WORK, so the time is close to proportional to
WORK: a variant with WORK * 0.9 does 10 % less work.
"""

import sys

WORK = 4000


def get_inputs(seed: int = 0):
    return (seed + 1,)


def reference(x):
    return x * WORK


def kernel(x):
    acc = 0
    for _ in range(WORK):
        acc += x
    return acc


if __name__ == "__main__":
    if "--level" in sys.argv:
        assert kernel(*get_inputs()) == reference(*get_inputs())
        print("L0 passed")
