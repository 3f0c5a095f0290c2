"""A test op whose latency is set by its knobs, so the loop's decisions are predictable.

Pure Python (no torch import) so that each sandboxed run starts fast. The kernel
burns CPU time (the cpu backend's clock): least (1 ms) at BLOCK = 64 and NUM_STAGES = 2, doubling per step below,
x1.5 (BLOCK) and x1.25 (NUM_STAGES) per step above, so each knob's far end also beats its start;
`--level L0` follows upstream's template (exit 0 = pass). BLOCK == WRONG_AT makes
the kernel return a wrong result, HANG_AT hang and CRASH_AT die of SIGSEGV, to
exercise rollback and the sandbox from the loop.
"""

import argparse
import math
import os
import signal
import sys
import time

BLOCK = 16
NUM_STAGES = 1
WRONG_AT = -1
HANG_AT = -1
CRASH_AT = -1


def get_inputs(seed: int = 0):
    return ([float((i * 7 + seed) % 13) for i in range(64)],)


def reference(x):
    return [v * 2 for v in x]


def kernel(x):
    # every step below the optimum doubles the time, a step above costs 50 % / 25 %: each good
    # move gains 22-50 %, clear of the noise of a busy shared machine
    block_steps = math.log2(BLOCK / 64)
    cost_ms = (
        1.0
        * (1.5 if block_steps > 0 else 2.0) ** abs(block_steps)
        * (1.25 if NUM_STAGES > 2 else 2.0) ** abs(NUM_STAGES - 2)
    )
    end = time.process_time() + cost_ms / 1000
    while time.process_time() < end:  # CPU work, not a sleep: load does not change how much
        pass
    if BLOCK == HANG_AT:
        time.sleep(3600)
    if BLOCK == CRASH_AT:
        os.kill(os.getpid(), signal.SIGSEGV)
    if BLOCK == WRONG_AT:
        return [v * 3 for v in x]
    return [v * 2 for v in x]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--level", default="L0")
    parser.parse_args()
    (x,) = get_inputs()
    if any(abs(a - b) > 1e-4 for a, b in zip(kernel(x), reference(x), strict=False)):
        print("L0 FAIL: kernel differs from reference")
        sys.exit(1)
    print("L0 PASS")
