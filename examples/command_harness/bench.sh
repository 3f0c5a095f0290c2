#!/bin/sh
# Example shell harness for tunebot's `command` latency backend (docs/measurement.md).
#
#   bench.sh <python> <variant.py>
#
# Shows the usual shape of a shell harness: run a timing tool that prints text, turn its
# number into the ONE JSON object tunebot reads. Here the tool is Python's timeit ("2000 loops,
# best of 5: 143 usec per loop"); a team would call its own benchmark binary or profiler.
# It prints a median only (timeit's best of 5 per run), so tunebot runs it 5 times and uses
# each run's figure as one sample. Any other output is allowed and ends up in the record's tail.
set -eu
python=$1
variant=$2
# the path goes through the environment, so quotes or spaces in it cannot break the code below
line=$(VARIANT="$variant" "$python" -m timeit -s '
import importlib.util, os
spec = importlib.util.spec_from_file_location("variant_under_test", os.environ["VARIANT"])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
inputs = module.get_inputs()
' 'module.kernel(*inputs)')
echo "timeit: $line"
echo "$line" | awk '{
  unit = $(NF-2); value = $(NF-3)
  if (unit == "usec") unit = "us"; else if (unit == "msec") unit = "ms"
  else if (unit == "nsec") unit = "ns"; else if (unit == "sec") unit = "s"
  printf "{\"median\": %s, \"unit\": \"%s\", \"environment\": {\"harness\": \"examples/command_harness/bench.sh\"}}\n", value, unit
}'
