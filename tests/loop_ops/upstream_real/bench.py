"""Stand-in benchmark for a real upstream kernel (tile-ai/tilelang-ascend examples/log2.py).

Reads the variant's effective knob values with tunebot's own strategies and prints one JSON
object for the `command` backend. Known optimum: BLOCK_M = 16, BLOCK_N = 16, BLOCK_SIZE = 32,
automatic multi-buffering left on (its default): 100 us. A kernel without these knobs
(vec_add_1d.py) times at 100 us.
"""

import json
import sys

from bot.strategies import knobs, multibuffer

TILE = {8: 1.2, 16: 1.0}  # BLOCK_M and BLOCK_N: the kernel's own rules allow 8 and 16 (M = N = 16)
GRID = {8: 1.3, 16: 1.15, 32: 1.0, 64: 1.05, 128: 1.1, 256: 1.2, 512: 1.3, 1024: 1.4, 2048: 1.5}

with open(sys.argv[1], encoding="utf-8") as fh:
    source = fh.read()
latency = (
    100.0
    * TILE.get(knobs.current_value(source, "BLOCK_M"), 1.0)
    * TILE.get(knobs.current_value(source, "BLOCK_N"), 1.0)
    * GRID.get(knobs.current_value(source, "BLOCK_SIZE"), 1.0)
    * (1.0 if multibuffer.current(source) else 1.08)
)
print(
    json.dumps(
        {
            "samples": [latency * (1 + 0.001 * (i % 3)) for i in range(9)],
            "unit": "us",
            "environment": {"device": "stand-in"},
        }
    )
)
