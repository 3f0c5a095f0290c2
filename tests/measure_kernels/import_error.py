"""A kernel whose module cannot be imported: a broken variant, not a wrong result."""

import sys

import tunebot_no_such_module  # noqa: F401  (ImportError at import time)


def get_inputs(seed: int = 0):
    return (1,)


def reference(x):
    return x


def kernel(x):
    return x


if __name__ == "__main__":
    if "--level" in sys.argv:
        print("L0 passed")
