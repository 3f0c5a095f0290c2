"""A variant right on the first L0's inputs (seed 0) and wrong on most others: the row-0 value
is 0 only for seeds that are multiples of 13, and the variant mishandles any other."""

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
    time.sleep(cost_ms / 1000)
    if variant() and x[0] != 0:
        return [v * 2 + 1 for v in x]
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
