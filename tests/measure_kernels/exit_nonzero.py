"""A kernel that exits with status 7 (a failed assertion in native code, say)."""

import sys


def get_inputs(seed: int = 0):
    return (1,)


def reference(x):
    return x


def kernel(x):
    print("device error 507011: kernel launch failed", file=sys.stderr, flush=True)
    sys.exit(7)


if __name__ == "__main__":
    if "--level" in sys.argv:
        kernel(*get_inputs())
