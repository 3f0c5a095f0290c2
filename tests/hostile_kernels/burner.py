"""A variant that spins the CPU for 30 s: under tune.yaml's limits.cpu_s 2 it must be stopped."""

import argparse
import os
import sys
import time

BLOCK = 16
NUM_STAGES = 1


def variant() -> bool:
    return BLOCK != 16 or NUM_STAGES != 1


def get_inputs(seed: int = 0):
    return ([float((i * 7 + seed) % 13) for i in range(64)],)


def reference(x):
    return [v * 2 for v in x]


def kernel(x):
    cost_ms = 1.0 + abs(BLOCK - 64) / 64 * 6.0 + abs(NUM_STAGES - 2) * 1.5
    if variant():
        end = time.monotonic() + 30
        while time.monotonic() < end:
            pass
    time.sleep(cost_ms / 1000)
    return [v * 2 for v in x]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--level", default="L0")
    parser.parse_args()
    (x,) = get_inputs(int(os.environ.get("TUNEBOT_SEED", "0")))
    if any(abs(a - b) > 1e-4 for a, b in zip(kernel(x), reference(x))):
        print("L0 FAIL: kernel differs from reference")
        sys.exit(1)
    print("L0 PASS")
