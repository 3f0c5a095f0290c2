"""Which v-aliases every known TileLang-NPUIR tree has, given one it calls (bot/strategies/vprefix.py).

    python scripts/vprefix_implied.py --git-dir /path/to/tilelang-ascend/.git [--git-dir ...]
    python scripts/vprefix_implied.py --git-dir ... --check    # exit 1 if IMPLIED differs

Upstream (tile-ai/tilelang-ascend, npuir branch) added the `npuir_<op> as v<op>` aliases in
batches, and pull requests based on older trees added some of them alone (PR #524's head has
vmin and vexp2 but not the earlier vcmp). A kernel that calls `T.vcmp` runs on a tree with vcmp,
and what else that tree aliases is known only from the trees that exist. This reads every
version of `tilelang/language/__init__.py` in the clones' whole history (every branch, tag and
fetched pull-request head), and prints, for each v-name of vprefix.ALIASES, the npuir_ ops whose
alias (as ALIASES spells it) every version defining that v-name also defines: the table
`IMPLIED` in vprefix.py. Nothing is downloaded; the clones are read with `git log` / `git show`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.strategies.vprefix import ALIASES, IMPLIED, _aliases_in  # noqa: E402

PATH = "tilelang/language/__init__.py"


def versions(git_dir: str) -> dict[str, str]:
    """blob id -> text of every version of PATH in the clone's history."""
    log = subprocess.run(
        [
            "git",
            f"--git-dir={git_dir}",
            "log",
            "--all",
            "--full-history",
            "--format=%H",
            "--",
            PATH,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    found: dict[str, str] = {}
    for commit in log:
        ls = subprocess.run(
            ["git", f"--git-dir={git_dir}", "ls-tree", commit, PATH],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        if len(ls) < 3 or ls[2] in found:
            continue  # deleted there, or a version already read
        found[ls[2]] = subprocess.run(
            ["git", f"--git-dir={git_dir}", "cat-file", "blob", ls[2]],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    return found


def implied(texts: list[str]) -> dict[str, list[str]]:
    """v-name -> the npuir_ ops aliased (as ALIASES spells them) in every text defining it."""
    tables = [_aliases_in(t) for t in texts]
    out: dict[str, list[str]] = {}
    for v in sorted(set(ALIASES.values())):
        having = [t for t in tables if v in t.values()]
        if not having:
            continue
        common = set.intersection(
            *({k for k, a in t.items() if ALIASES.get(k) == a} for t in having)
        )
        out[v] = sorted(common)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", action="append", required=True, help="a clone's git directory")
    parser.add_argument("--check", action="store_true", help="compare with vprefix.IMPLIED")
    args = parser.parse_args(argv)
    texts: dict[str, str] = {}
    for git_dir in args.git_dir:
        texts.update(versions(git_dir))
    table = implied(list(texts.values()))
    with_aliases = sum(1 for t in texts.values() if _aliases_in(t))
    print(f"# {len(texts)} versions of {PATH} read, {with_aliases} with v-aliases")
    print("IMPLIED: dict[str, tuple[str, ...]] = {")
    for v, ops in table.items():
        print(f"    {v!r}: {tuple(ops)!r},")
    print("}")
    if args.check:
        ours = {v: sorted(ops) for v, ops in IMPLIED.items()}
        differ = sorted(v for v in set(ours) | set(table) if ours.get(v) != table.get(v))
        print(f"IMPLIED differs for: {', '.join(differ)}" if differ else "IMPLIED matches")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
