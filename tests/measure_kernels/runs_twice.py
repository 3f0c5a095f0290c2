"""A fast kernel that logs each process's RLIMIT_AS soft limit to $TUNEBOT_RUN_LOG (one line per
process) and, with TUNEBOT_HANG_AFTER_FIRST=1, hangs in every process after the first one: the
msprof backend's name-discovery rerun must be bounded and limited like the measurement."""

import os
import resource
import sys
import time

_logged = False


def get_inputs(seed: int = 0):
    return (3,)


def reference(x):
    return x + 1


def kernel(x):
    global _logged
    if not _logged:
        _logged = True
        log = os.environ["TUNEBOT_RUN_LOG"]
        earlier = os.path.exists(log)
        with open(log, "a") as fh:
            fh.write(f"{resource.getrlimit(resource.RLIMIT_AS)[0]}\n")
        if earlier and os.environ.get("TUNEBOT_HANG_AFTER_FIRST") == "1":
            time.sleep(600)
    return x + 1


if __name__ == "__main__":
    if "--level" in sys.argv:
        assert kernel(*get_inputs()) == reference(*get_inputs())
        print("L0 passed")
