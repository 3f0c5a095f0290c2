"""Materialise the upstream kernel corpus (tests/data/upstream_kernels/src/) from local clones.

    python scripts/upstream_corpus.py --git-dir /path/to/tilelang-ascend/.git \\
        --git-dir sonokeyu/kernelbench_tilelang_ascend=/path/to/kernelbench/.git

Reads MANIFEST.yaml, writes each kernel as src/<id>.py with `git show
<commit>:<path>` (nothing is downloaded) and checks its sha256. A kernel comes
from its own `repo` (default: the manifest's source.repo); a bare --git-dir is a
clone of source.repo, `OWNER/NAME=PATH` a clone of another repository. A kernel
whose commit is reachable only from a pull-request head names that ref (`ref:`);
when the clone lacks the commit, the error says which ref to fetch. Kernels
whose repository has no clone given are listed and left out. The sources stay
out of git: they are third-party code kept only as local test data.

Kernels read from a search index rather than a clone (no snapshot of their repository
exists) come from a folder of byte-exact copies named `<id>.py`:

    python scripts/upstream_corpus.py --copies /path/to/copies

A copy is written only when its sha256 matches the manifest; a clone given with --git-dir
takes precedence over a copy.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from pathlib import Path

import yaml

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "upstream_kernels"


def clones(values: list[str], default_repo: str) -> dict[str, str]:
    """Repository -> git directory, from the --git-dir values."""
    out: dict[str, str] = {}
    for value in values:
        repo, sep, path = value.partition("=")
        if not sep:
            repo, path = default_repo, value
        out[repo] = path
    return out


def fetch_hint(kernel: dict) -> str:
    """How to bring a kernel's commit into a clone that lacks it (empty without a `ref`)."""
    ref = kernel.get("ref")
    if not ref or ref.startswith("refs/heads/"):
        return ""
    return f" (the commit is on {ref}: run `git fetch origin '+{ref}:{ref}'` in the clone)"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def from_clone(git_dir: str, k: dict, source: dict) -> tuple[bytes | None, str]:
    """The kernel's bytes at its commit in a clone, or None and what went wrong."""
    commit = k.get("commit", source["commit"])  # a kernel may name its own commit
    run = subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{commit}:{k['path']}"],
        capture_output=True,
        check=False,
    )
    if run.returncode != 0:
        why = run.stderr.decode(errors="replace").strip()
        return None, f"git show failed: {why}{fetch_hint(k)}"
    digest = sha256(run.stdout)
    if digest != k["sha256"]:
        return None, f"sha256 {digest} differs from the manifest"
    return run.stdout, ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--git-dir",
        action="append",
        default=[],
        help="git directory of a clone: PATH (the manifest's source repository) or OWNER/NAME=PATH",
    )
    parser.add_argument(
        "--copies",
        type=Path,
        help="folder of byte-exact copies named <id>.py, for kernels no clone is given for",
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        default=CORPUS,
        help="folder holding MANIFEST.yaml; the kernels go to its src/ (default: the test corpus)",
    )
    args = parser.parse_args(argv)
    if not args.git_dir and args.copies is None:
        parser.error(
            "give at least one --git-dir or --copies (tests/data/upstream_kernels/README.md)"
        )
    if args.copies is not None and not args.copies.is_dir():
        parser.error(
            f"--copies {args.copies}: not a folder; give the folder holding <id>.py copies"
        )
    manifest = yaml.safe_load((args.corpus / "MANIFEST.yaml").read_text(encoding="utf-8"))
    source = manifest["source"]
    git_dirs = clones(args.git_dir, source["repo"])
    out = args.corpus / "src"
    out.mkdir(exist_ok=True)
    bad = written = 0
    missing: dict[str, int] = {}
    for k in manifest["kernels"]:
        repo = k.get("repo", source["repo"])
        copy = args.copies / f"{k['id']}.py" if args.copies is not None else None
        have_copy = copy is not None and copy.is_file()
        if repo not in git_dirs and not have_copy:
            missing[repo] = missing.get(repo, 0) + 1
            continue
        data, problem = None, ""
        if repo in git_dirs:
            data, problem = from_clone(git_dirs[repo], k, source)
        if data is None and have_copy:
            # A clone may lack the commit (a snapshot older than the kernel): the copy stands in.
            assert copy is not None
            data = copy.read_bytes()
            if sha256(data) != k["sha256"]:
                data, problem = None, f"{copy} differs from the manifest's sha256"
        if data is None:
            print(f"{k['id']}: {problem}", file=sys.stderr)
            bad += 1
            continue
        (out / f"{k['id']}.py").write_bytes(data)
        written += 1
    for repo, n in missing.items():
        print(
            f"{n} kernels left out: no clone of {repo} given (--git-dir {repo}=PATH)"
            " and no copy in --copies"
        )
    print(f"{written} kernels in {out}")
    return 2 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
