"""A fast stand-in pipeline for the model-loop tests (no torch): latency, outputs and analysis
follow from settings.yaml and behavior.json, so every decision in a test is known in advance.

    python fakepipe.py --benchmark | --analysis | --quality

behavior.json (committed beside it):
    {"base_ms": 100, "jitter": 0.002, "analysis": {<layers>},
     "effects": {"<key>=<value>": {"factor": 0.7, "perturb": 0.01, "workload": {"steps": 4},
                                   "crash": "import" | "type" | "exit", "analysis": {<layers>}}}}

$FAKEPIPE_CONTROL (a JSON file outside the repository, toggled by a test between runs):
    {"benchmark_garbage": true, "analysis_garbage": true, "quality_crash": true,
     "sleep_s": 0.5, "mindiesd_version": "2.2.0"}
Each benchmark run appends one line to $FAKEPIPE_CONTROL.calls (for counting).
"""

import json
import math
import os
import sys
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def control() -> dict:
    path = os.environ.get("FAKEPIPE_CONTROL")
    return json.loads(Path(path).read_text()) if path and Path(path).exists() else {}


def active_effects(behavior: dict, settings: dict) -> list[dict]:
    out = []
    for key, value in settings.items():
        name = f"{key}={json.dumps(value) if not isinstance(value, str) else value}"
        if name in behavior.get("effects", {}):
            out.append(behavior["effects"][name])
    return out


def merge(base: dict, extra: dict) -> dict:
    out = {k: dict(v) for k, v in base.items()}
    for layer, values in extra.items():
        out.setdefault(layer, {}).update(values)
    return out


def main() -> int:
    mode = sys.argv[1]
    behavior = json.loads((HERE / "behavior.json").read_text())
    settings = yaml.safe_load((HERE / "settings.yaml").read_text()) or {}
    effects = active_effects(behavior, settings)
    ctl = control()
    if mode == "--quality":
        if ctl.get("quality_crash"):
            raise RuntimeError("quality harness crashed (FAKEPIPE_CONTROL quality_crash)")
        ref = json.loads((Path(os.environ["TUNEBOT_REFERENCE_DIR"]) / "out.json").read_text())
        out = json.loads((Path(os.environ["TUNEBOT_OUTPUT_DIR"]) / "out.json").read_text())
        dot = sum(a * b for a, b in zip(ref, out, strict=False))
        cos = dot / math.sqrt(sum(a * a for a in ref) * sum(b * b for b in out))
        print(json.dumps({"schema": "tunebot.quality/v1", "cosine": cos}))
        return 0
    if mode == "--analysis":
        if ctl.get("analysis_garbage"):
            print("Profiling... done\nsee ./prof_out for the trace")
            return 0
        layers = behavior.get("analysis", {})
        for e in effects:
            layers = merge(layers, e.get("analysis", {}))
        print(json.dumps({"schema": "tunebot.analysis/v1", "layers": layers}))
        return 0
    for e in effects:
        if e.get("crash") == "import":
            from mindiesd import sparse_attention  # noqa: F401  (the fake package lacks it)
        if e.get("crash") == "type":
            from mindiesd import attention_forward

            attention_forward(
                1, 2, 3, fused=True
            )  # the table's signature; the installed one lacks it
        if e.get("crash") == "exit":
            print("segfault-like failure", file=sys.stderr)
            return 3
    calls = os.environ.get("FAKEPIPE_CONTROL")
    if calls:
        with open(calls + ".calls", "a") as f:
            f.write(json.dumps(settings, sort_keys=True) + "\n")
    time.sleep(ctl.get("sleep_s", 0))
    if ctl.get("benchmark_garbage"):
        print("Loading pipeline... 100%|##########| 4/4\nWARNING: latency not available")
        return 0
    latency = behavior.get("base_ms", 100.0)
    vector = [float(i % 7 + 1) for i in range(32)]
    workload = {
        "model": "fake",
        "resolution": "64x64",
        "frames": 1,
        "steps": 8,
        "precision": "fp32",
        "device_count": 1,
        "hardware": "cpu",
    }
    for n, e in enumerate(effects):
        latency *= e.get("factor", 1.0)
        p = e.get("perturb", 0.0)
        vector = [v + p * (1 if (i + n) % 2 else -1) * 10 for i, v in enumerate(vector)]
        workload.update(e.get("workload", {}))
    jitter = behavior.get("jitter", 0.002)
    samples = [latency * (1 + jitter * (i - 4) / 4) for i in range(9)]
    out_dir = os.environ.get("TUNEBOT_OUTPUT_DIR")
    if out_dir:
        (Path(out_dir) / "out.json").write_text(json.dumps(vector))
    print("pipeline log line on stdout before the result")
    print(
        json.dumps(
            {
                "schema": "tunebot.benchmark/v1",
                "latency_ms": samples,
                "stages_ms": {"dit": latency * 0.9, "vae": latency * 0.1},
                "workload": workload,
                "mindiesd_version": ctl.get("mindiesd_version"),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
