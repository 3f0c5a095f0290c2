"""A kernel that allocates until memory runs out.

It only runs under an address-space limit (RLIMIT_AS, set by the sandbox's
memory_limit_mb): without one it refuses, so a test can never exhaust the host.
"""

import resource
import sys

CHUNK = 64 * 1024 * 1024


def get_inputs(seed: int = 0):
    return (CHUNK,)


def reference(n):
    return n


def kernel(n):
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        raise SystemExit("oom.py refuses to run without RLIMIT_AS")
    hoard = []
    while True:
        hoard.append(bytearray(n))


if __name__ == "__main__":
    if "--level" in sys.argv:
        kernel(*get_inputs())
