"""Materialise the upstream kernel corpus (tests/data/upstream_kernels/src/) from a local clone.

    python scripts/upstream_corpus.py --git-dir /path/to/tilelang-ascend/.git

Reads MANIFEST.yaml, writes each kernel as src/<id>.py with `git show
<commit>:<path>` (nothing is downloaded) and checks its sha256. The sources stay
out of git: they are third-party code kept only as local test data.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from pathlib import Path

import yaml

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "upstream_kernels"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--git-dir", required=True, help="git directory of a clone holding the manifest's commit"
    )
    args = parser.parse_args(argv)
    manifest = yaml.safe_load((CORPUS / "MANIFEST.yaml").read_text(encoding="utf-8"))
    out = CORPUS / "src"
    out.mkdir(exist_ok=True)
    bad = 0
    for k in manifest["kernels"]:
        commit = k.get("commit", manifest["source"]["commit"])  # a kernel may name its own commit
        run = subprocess.run(
            ["git", "--git-dir", args.git_dir, "show", f"{commit}:{k['path']}"],
            capture_output=True,
            check=False,
        )
        if run.returncode != 0:
            print(
                f"{k['id']}: git show failed: {run.stderr.decode(errors='replace').strip()}",
                file=sys.stderr,
            )
            bad += 1
            continue
        digest = hashlib.sha256(run.stdout).hexdigest()
        if digest != k["sha256"]:
            print(f"{k['id']}: sha256 {digest} differs from the manifest", file=sys.stderr)
            bad += 1
            continue
        (out / f"{k['id']}.py").write_bytes(run.stdout)
    print(f"{len(manifest['kernels']) - bad} kernels in {out}")
    return 2 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
