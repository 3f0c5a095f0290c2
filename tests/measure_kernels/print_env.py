"""A correct kernel whose L0 run prints its environment as one JSON line (`ENV {...}`)."""

import json
import os
import sys


def get_inputs(seed: int = 0):
    return (2,)


def reference(x):
    return x * 2


def kernel(x):
    return x * 2


if __name__ == "__main__":
    if "--level" in sys.argv:
        print("ENV " + json.dumps(dict(os.environ)))
        print("L0 passed")
