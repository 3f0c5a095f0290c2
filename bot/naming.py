"""Names tunebot gives in git: a run's branches and tunebot's own ref namespaces.

A run of op `O` (or model target `O`) under the configured branch prefix `P` (default
`tunebot`) commits iteration N on branch `P/O/vN` and delivers on `P/O/best`. Git cannot
hold a branch `P/O` beside `P/O/v1` (a ref cannot be both a file and a directory), so the
delivery sits beside the iterations. Branches carry the op's name without its project.

Refs tunebot keeps for itself live under `refs/tunebot/`: archived branches, local-forge
proposals, run records on a remote, and commits imported into a checkout.
"""

from __future__ import annotations

import re

BEST = "best"

TUNEBOT_REFS = "refs/tunebot/"
ARCHIVE_REFS = f"{TUNEBOT_REFS}archive/"  # archive/<label>/<branch>
PROPOSAL_REFS = f"{TUNEBOT_REFS}proposals/"  # proposals/<N> (local forge)
RUN_RECORD_REFS = f"{TUNEBOT_REFS}runs/"  # runs/<project>/<op> (records on a remote)
IMPORT_REFS = f"{TUNEBOT_REFS}import/"  # import/<ref without refs/> (copied into a checkout)
PRIVATE_IMPORT_REFS = "refs/tunebot-import/"  # <i>: staging refs inside a private git dir only

_ITERATION_TAIL = re.compile(r"/v\d+$")


def run_prefix(branch_prefix: str, op_name: str) -> str:
    """`P/O`: the folder of one op's branches (`op_name` is the op's own name, no project)."""
    return f"{branch_prefix}/{op_name}"


def op_prefix(branch_prefix: str, qualified_op: str) -> str:
    """`P/O` for a qualified `project/op` (branches drop the project)."""
    return run_prefix(branch_prefix, qualified_op.rsplit("/", 1)[-1])


def iteration_prefix(run: str) -> str:
    """`P/O/v`, what every iteration branch of run prefix `run` starts with."""
    return f"{run}/v"


def iteration_branch(run: str, n: int) -> str:
    """`P/O/v<n>`: the branch of iteration `n` of run prefix `run`."""
    return f"{iteration_prefix(run)}{n}"


def delivery_branch(branch_prefix: str, op_name: str) -> str:
    """`P/O/best`: the best variant's branch, beside the iterations."""
    return f"{run_prefix(branch_prefix, op_name)}/{BEST}"


def op_delivery_branch(branch_prefix: str, qualified_op: str) -> str:
    """`P/O/best` for a qualified `project/op`."""
    return f"{op_prefix(branch_prefix, qualified_op)}/{BEST}"


def run_of_delivery(delivery: str) -> str:
    """The run prefix `P/O` of delivery branch `P/O/best` (a name without `/best` is returned as is)."""
    return delivery.removesuffix(f"/{BEST}")


def is_iteration_of(name: str, run: str) -> bool:
    """Whether branch `name` is exactly `<run>/v<digits>`."""
    tail = name.removeprefix(iteration_prefix(run))
    return name.startswith(iteration_prefix(run)) and tail.isdigit()


def ends_as_iteration(name: str) -> bool:
    """Whether a branch or ref name ends in `/v<digits>` (an iteration of some run)."""
    return _ITERATION_TAIL.search(name) is not None


def archive_ref(label: str, branch: str) -> str:
    """`refs/tunebot/archive/<label>/<branch>`."""
    return f"{ARCHIVE_REFS}{label}/{branch}"


def record_ref(qualified_op: str) -> str:
    """`refs/tunebot/runs/<project>/<op>`: a run's records on a remote."""
    return f"{RUN_RECORD_REFS}{qualified_op}"


def import_ref(ref: str) -> str:
    """`refs/tunebot/import/<ref without refs/>`: where a commit copied into a checkout waits."""
    return f"{IMPORT_REFS}{ref.removeprefix('refs/')}"
