"""Materialise the MindIE-SD docs layouts (tests/data/mindiesd-layouts/<layout>/) without committing them.

    python scripts/mindiesd_layouts.py --git-dir Ascend/MindIE-SD=/path/a.git \
        --git-dir verylucky01/MindIE-SD=/path/b.git
    python scripts/mindiesd_layouts.py --from DIR      # a folder that already holds <layout>/<file>.md

Reads FILES.tsv (layout, file, sha256, repository, commit, path), writes each document with
`git show <commit>:<path>` from the named local clone (or copies it from DIR) and checks its
sha256. Nothing is downloaded. The documents stay out of git: they are third-party docs kept
only as local test data; the hand-written expectations (expected/*.json) are ours and committed.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "mindiesd-layouts"


def entries() -> list[list[str]]:
    rows = (CORPUS / "FILES.tsv").read_text(encoding="utf-8").splitlines()
    return [r.split("\t") for r in rows if r and not r.startswith("#")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--git-dir",
        action="append",
        default=[],
        metavar="REPO=PATH",
        help="git directory of a local clone of REPO (repeatable)",
    )
    parser.add_argument(
        "--from", dest="source", type=Path, help="folder holding <layout>/<file> copies"
    )
    args = parser.parse_args(argv)
    clones = dict(item.split("=", 1) for item in args.git_dir)
    bad = 0
    for layout, name, sha, repo, commit, path in entries():
        if args.source is not None and (args.source / layout / name).is_file():
            data = (args.source / layout / name).read_bytes()
        elif repo in clones:
            run = subprocess.run(
                ["git", "--git-dir", clones[repo], "show", f"{commit}:{path}"],
                capture_output=True,
                check=False,
            )
            data = run.stdout if run.returncode == 0 else b""
        else:
            print(
                f"{layout}/{name}: no source given for {repo} (use --git-dir {repo}=PATH or --from DIR)",
                file=sys.stderr,
            )
            bad += 1
            continue
        if hashlib.sha256(data).hexdigest() != sha:
            print(f"{layout}/{name}: missing or its sha256 differs from FILES.tsv", file=sys.stderr)
            bad += 1
            continue
        (CORPUS / layout).mkdir(exist_ok=True)
        (CORPUS / layout / name).write_bytes(data)
    print(f"{len(entries()) - bad} documents in {CORPUS}")
    return 2 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
