#!/usr/bin/env python3
"""A deterministic external proposer for tests: `fixed.py MODE CONTEXT_JSON OUTPUT_PY`.

Modes:
  vectorize  replace rms_norm's scalar T.Parallel gamma loop with one vector multiply
  comment    append a comment line naming the strategy and the history length (a valid, new source)
  identical  write the best source unchanged
  invalid    write a source that is not valid Python
  signature  rename the first parameter of the @T.prim_func function
  fail       print a message and exit 3
  nothing    exit 0 without writing anything
  sleep      start a child process, record its pid in $PROPOSER_PID_FILE, and sleep
  background write a valid proposal, leave `sleep 30` running in the background (pid in
             $PROPOSER_PID_FILE, stdout inherited) and exit 0 at once
  reference  weaken the reference function so that L0 would pass anything
  env        write a valid proposal and dump the environment as JSON to $PROPOSER_ENV_COPY
"""

import json
import os
import re
import subprocess
import sys
import time


def main() -> int:
    mode, context_path, output_path = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(context_path) as f:
        ctx = json.loads(f.read())
    assert ctx["output_path"] == output_path and os.environ["TUNEBOT_CONTEXT"] == context_path
    with open(ctx["best_source_path"]) as f:
        best = f.read()
    if "PROPOSER_CONTEXT_COPY" in os.environ:
        with open(os.environ["PROPOSER_CONTEXT_COPY"], "w") as f:
            json.dump(ctx, f)
    if mode == "vectorize":
        loop = re.compile(
            r"( *)for i, j in T\.Parallel\(block_M, hidden\):\n\s*x_ub\[i, j\] = x_ub\[i, j\] \* gamma_ub\[0, j\]\n"
        )
        new, n = loop.subn(
            r"\1T.npuir_mul(x_ub, gamma_ub, x_ub)  # vector op instead of a scalar loop\n", best
        )
        if n != 1:
            print("no scalar gamma loop found")
            return 1
        write(output_path, new)
        write(ctx["description_path"], "gamma multiply: scalar T.Parallel loop -> T.npuir_mul\n")
    elif mode == "comment":
        write(
            output_path,
            best + f"# {ctx['strategy']['id']} proposal after {len(ctx['history'])} attempts\n",
        )
    elif mode == "identical":
        write(output_path, best)
    elif mode == "invalid":
        write(output_path, best + "\ndef broken(:\n")
    elif mode == "signature":
        write(
            output_path,
            re.sub(r"(@T\.prim_func\s*\n\s*def \w+\(\s*)(\w+)", r"\1Renamed", best, count=1),
        )
    elif mode == "fail":
        print("cannot help with this kernel")
        return 3
    elif mode == "background":
        write(output_path, best + "# background proposal\n")
        child = subprocess.Popen(["sleep", "30"])  # inherits our stdout; never waited for
        write(os.environ["PROPOSER_PID_FILE"], str(child.pid))
    elif mode == "reference":
        write(
            output_path,
            best.replace(
                "def reference(x, gamma):\n",
                "def reference(x, gamma):\n    return kernel(x, gamma)\n",
            ),
        )
    elif mode == "env":
        write(output_path, best + "# env proposal\n")
        write(os.environ["PROPOSER_ENV_COPY"], json.dumps(dict(os.environ)))
    elif mode == "sleep":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        write(os.environ["PROPOSER_PID_FILE"], str(child.pid))
        time.sleep(60)
    return 0


def write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    sys.exit(main())
