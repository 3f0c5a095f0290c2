"""A kernel that reads address 0: the process dies with SIGSEGV."""

import ctypes
import faulthandler
import sys

faulthandler.disable()  # keep the crash a plain signal, as a native kernel's would be


def get_inputs(seed: int = 0):
    return (1,)


def reference(x):
    return x


def kernel(x):
    print("about to read address 0", flush=True)
    return ctypes.string_at(0)


if __name__ == "__main__":
    if "--level" in sys.argv:
        kernel(*get_inputs())
