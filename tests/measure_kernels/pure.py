"""A correct kernel that needs no torch: sum of squares of a list."""

import sys

N = 2000


def get_inputs(seed: int = 0):
    return ([float((i * 7 + seed) % 13) for i in range(N)],)


def reference(xs):
    return sum(x * x for x in xs)


def kernel(xs):
    total = 0.0
    for x in xs:
        total += x * x
    return total


if __name__ == "__main__":
    if "--level" in sys.argv:
        assert abs(kernel(*get_inputs()) - reference(*get_inputs())) < 1e-6
        print("L0 passed")
