"""A correct kernel that prints while it runs (the runner must not mistake that for results)."""

import sys


def get_inputs(seed: int = 0):
    return (3,)


def reference(x):
    return x * 2


def kernel(x):
    print('{"samples_us": [1, 2, 3]}')
    print("a warning", file=sys.stderr)
    return x * 2


if __name__ == "__main__":
    if "--level" in sys.argv:
        print("L0 passed")
