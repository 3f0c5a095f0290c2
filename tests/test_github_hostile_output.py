"""What PR-controlled code prints cannot steer the GitHub flow's later steps.

A failed run's message carries the output tail of the op (its L0 script, or a `command` latency
harness), and the failure is posted in the op's status comment, which the report step reads back
for the op's phase and proposal link. Expected, written before running: the tail is posted as a
fenced code block nothing in it can close, so markdown in it renders as text (checked with a real
markdown parser), and the report step reads neither a heading nor a "Proposal:" line from it.
"""

from __future__ import annotations

from conftest import make_commit
from markdown_it import MarkdownIt

from bot.errors import TunebotError
from bot.forge.github.comments import status_marker
from bot.forge.github.report import op_states
from bot.forge.github.status import quoted
from bot.forge.local import LocalForge
from bot.run.machine import run_tune
from bot.run.request import TuneRequest

FAKE = (
    "### tunebot · `other` · done\n"
    "Proposal: [#7](https://evil.example/pull/7)\n"
    "```\n"
    "@org/admins please merge ![x](https://evil.example/pixel.png)\n"
    "````"
)

# an op whose own L0 check prints the fake lines, then fails
OP = f"""import sys

BLOCK = 32


def get_inputs(seed=0):
    return (1,)


def reference(x):
    return x


def kernel(x):
    return x


if __name__ == "__main__":
    print({FAKE!r})
    sys.exit(1)
"""


def test_quoted_text_renders_as_one_code_block_whatever_it_holds():
    block = quoted(FAKE)
    tokens = MarkdownIt().parse("**Failed:**\n\n" + block + "\n\nRetry with `/tune`.")
    fences = [t for t in tokens if t.type == "fence"]
    assert len(fences) == 1 and fences[0].content == FAKE + "\n"
    inline = [c for t in tokens if t.type == "inline" for c in (t.children or [])]
    assert not any(c.type in ("link_open", "image") for c in inline)


def test_the_report_step_reads_no_heading_or_proposal_from_a_failure(git_repo):
    make_commit(
        git_repo,
        {"examples/proj/liar/liar.py": OP, "examples/proj/liar/tune.yaml": "kernel_kind: vector\n"},
        "an op that prints a fake status",
    )
    try:
        run_tune(TuneRequest(repo=git_repo.path, op="liar", max_iters=1), LocalForge(git_repo.path))
    except TunebotError as exc:  # the baseline fails L0; its message holds the printed lines
        failure = str(exc)
    else:
        raise AssertionError("the baseline was expected to fail L0")
    assert "Proposal: [#7](https://evil.example/pull/7)" in failure
    body = (
        f"{status_marker('proj/liar')}\n### tunebot · `proj/liar` · failed\n\nPR head `abc`\n\n"
        f"**Failed:**\n\n{quoted(failure)}\n\nRetry with `/tune proj/liar`."
    )
    comments = {"proj/liar": body, "proj/other": body.replace("liar", "other")}
    (state,) = op_states(comments, ("proj/liar",))
    assert (state.phase, state.proposal, state.state) == ("failed", "", "failure")
    # without the fence the same text would have given the op a proposal link
    raw = body.replace(quoted(failure), failure)
    (fooled,) = op_states({"proj/liar": raw}, ("proj/liar",))
    assert fooled.proposal == "[#7](https://evil.example/pull/7)"
