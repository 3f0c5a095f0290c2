"""A kernel that never returns (a deadlock, an infinite loop on device)."""

import sys
import time


def get_inputs(seed: int = 0):
    return (1,)


def reference(x):
    return x


def kernel(x):
    while True:
        time.sleep(0.05)


if __name__ == "__main__":
    if "--level" in sys.argv:
        print("starting L0, will hang", flush=True)
        kernel(*get_inputs())
