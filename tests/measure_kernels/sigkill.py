"""A kernel ended by SIGKILL, as the kernel's OOM killer ends a process."""

import os
import signal
import sys


def get_inputs(seed: int = 0):
    return (1,)


def reference(x):
    return x


def kernel(x):
    print("allocating a lot...", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    if "--level" in sys.argv:
        kernel(*get_inputs())
