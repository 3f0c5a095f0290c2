"""Stand-in benchmark for tunebot's `command` backend: a known latency landscape.

Reads the variant's effective knob values with tunebot's own strategies and
prints one JSON object. Optimum: block_M = 256, num_stages = 3, automatic
multi-buffering left on (its default).
"""

import json
import sys

from bot.strategies import knobs, multibuffer, pipeline

BLOCK = {8: 3.0, 16: 2.2, 32: 1.6, 64: 1.3, 128: 1.1, 256: 1.0, 512: 1.2}
STAGES = {0: 1.4, 1: 1.25, 2: 1.1, 3: 1.0, 4: 1.06}

with open(sys.argv[1], encoding="utf-8") as fh:
    source = fh.read()
block = knobs.current_value(source, "block_M")
stages = pipeline.current_depth(source, 0)
flag = multibuffer.current(source)
latency = 100.0 * BLOCK[block] * STAGES[stages] * (1.0 if flag else 1.08)
print(
    json.dumps(
        {
            "samples": [latency * (1 + 0.001 * (i % 3)) for i in range(9)],
            "unit": "us",
            "environment": {"device": "stand-in"},
        }
    )
)
