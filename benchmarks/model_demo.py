"""Demo model benchmark: what each setting of examples/demo/dit_tiny does to latency and output.

    python benchmarks/model_demo.py                  # 3 benchmark runs per setting, interleaved
    python benchmarks/model_demo.py --runs 1 --out /tmp/m.json

For every setting value listed in the demo's model.yaml (one at a time, on top of the
baseline settings), the pipeline's own benchmark command runs `--runs` times, interleaved
with the other settings so that machine load hits all alike. Reported per setting: the
median of all end-to-end samples (ms), the relative IQR of those samples, the ratio to the
baseline median, and the cosine of the output latent against the baseline's (the quality
gate of the loop: min_cosine in model.yaml). Writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.model import spec as spec_mod  # noqa: E402 (after the sys.path line: runs as a script)

DEMO = ROOT / "examples/demo/dit_tiny"


def bench(settings: dict, out_dir: Path) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(settings, f)
    env = {**os.environ, "DIT_TINY_SETTINGS": f.name, "TUNEBOT_OUTPUT_DIR": str(out_dir)}
    done = subprocess.run(
        [sys.executable, "pipeline.py", "--benchmark"],
        cwd=DEMO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    os.unlink(f.name)
    return json.loads(done.stdout.strip().splitlines()[-1])


def cosine(ref: Path, out: Path) -> float:
    env = {**os.environ, "TUNEBOT_REFERENCE_DIR": str(ref), "TUNEBOT_OUTPUT_DIR": str(out)}
    done = subprocess.run(
        [sys.executable, "pipeline.py", "--quality"],
        cwd=DEMO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)["per_output"]["latent"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/model_demo.json")
    args = parser.parse_args()
    spec = spec_mod.load(ROOT, Path("examples/demo/dit_tiny"))
    base = spec_mod.read_settings((DEMO / "settings.yaml").read_text(), "settings.yaml")
    cases = [("baseline", base)] + [
        (f"{s.key}={v}", {**base, s.key: v}) for s in spec.settings for v in s.values
    ]
    samples: dict[str, list[float]] = {name: [] for name, _ in cases}
    cos: dict[str, float] = {}
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            for name, settings in cases if run % 2 == 0 else list(reversed(cases)):
                out = Path(tmp) / name
                out.mkdir(exist_ok=True)
                samples[name] += bench(settings, out)["latency_ms"]
        for name, _ in cases:
            cos[name] = cosine(Path(tmp) / "baseline", Path(tmp) / name)
    base_median = statistics.median(samples["baseline"])
    rows = []
    print(
        f"{'setting':<22} {'median ms':>10} {'rel IQR':>8} {'vs base':>8} {'cosine':>10}  gate {spec.min_cosine}"
    )
    for name, _ in cases:
        xs = sorted(samples[name])
        q = statistics.quantiles(xs, n=4)
        median = statistics.median(xs)
        row = {
            "setting": name,
            "n": len(xs),
            "median_ms": median,
            "rel_iqr": (q[2] - q[0]) / median,
            "ratio": median / base_median,
            "cosine": cos[name],
            "passes_gate": cos[name] >= spec.min_cosine,
        }
        rows.append(row)
        print(
            f"{name:<22} {median:>10.1f} {row['rel_iqr']:>8.1%} {row['ratio']:>8.2f} {cos[name]:>10.6f}  "
            f"{'pass' if row['passes_gate'] else 'FAIL'}"
        )
    meta = {
        "runs_per_setting": args.runs,
        "samples_per_run": len(samples["baseline"]) // args.runs,
        "seconds": round(time.time() - started, 1),
        "cpu_count": os.cpu_count(),
        "loadavg_end": os.getloadavg(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    print(
        f"wrote {args.out} ({meta['seconds']} s; load average at the end {meta['loadavg_end'][0]:.1f})"
    )


if __name__ == "__main__":
    main()
