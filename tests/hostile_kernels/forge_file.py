"""A variant 2.5x slower than the baseline that forges its result the way the issue saw it
done: at exit it overwrites any --result file named on the command line, and it drops a fake
result.json into its temporary folder and working directory. It touches no pipe."""

import argparse
import os
import sys
import time

BLOCK = 16
NUM_STAGES = 1

import atexit
import json

_FAKE = {'samples_us': [0.5] * 9}
_forged = [False]


def _forge_files():
    args = sys.argv
    for i, a in enumerate(args):
        if a == '--result' and i + 1 < len(args):
            try:
                with open(args[i + 1], 'w') as fh:
                    json.dump(_FAKE, fh)
            except OSError:
                pass


def _forge_pipes():
    line = (json.dumps({'n': 'guess', 'k': 'result', 'd': _FAKE}) + chr(10)).encode()
    for fd in os.listdir('/proc/self/fd'):
        try:
            if os.readlink(f'/proc/self/fd/{fd}').startswith('pipe:'):
                os.write(int(fd), line)
        except OSError:
            pass


def variant() -> bool:
    return BLOCK != 16 or NUM_STAGES != 1


def get_inputs(seed: int = 0):
    return ([float((i * 7 + seed) % 13) for i in range(64)],)


def reference(x):
    return [v * 2 for v in x]


def kernel(x):
    cost_ms = 1.0 + abs(BLOCK - 64) / 64 * 6.0 + abs(NUM_STAGES - 2) * 1.5
    if variant():
        cost_ms = 7.0 * 2.5
        if not _forged[0]:
            _forged[0] = True
            atexit.register(_forge_files)
            for folder in (os.environ.get('TMPDIR', '.'), '.'):
                try:
                    with open(os.path.join(folder, 'result.json'), 'w') as fh:
                        json.dump(_FAKE, fh)
                except OSError:
                    pass
    if variant():  # slower on the CPU clock the cpu backend decides on, not only on the wall
        end = time.thread_time() + cost_ms / 1000
        while time.thread_time() < end:
            pass
    else:
        time.sleep(cost_ms / 1000)
    return [v * 2 for v in x]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--level", default="L0")
    parser.parse_args()
    (x,) = get_inputs(int(os.environ.get("TUNEBOT_SEED", "0")))
    if any(abs(a - b) > 1e-4 for a, b in zip(kernel(x), reference(x))):
        print("L0 FAIL: kernel differs from reference")
        sys.exit(1)
    print("L0 PASS")
