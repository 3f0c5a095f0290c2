"""tunebot on GitHub: the forge, the event flow and the job's guard.

- `client`: one PyGithub connection to one repository, with the retry policy.
- `forge`: the Forge protocol on pull requests (`GithubForge`), built from `settings`.
- `comments`: the bot's marked comments, reactions and commit statuses.
- `gate`: the merge gate (approval on the head, checks, origin) and CODEOWNERS reviewers.
- `grammar`: the `/tune` command grammar; `events`: payloads -> requests, authorization.
- `flow`: the router (one handler per request kind) over `commands`, `tune`, `review`,
  `scheduled`; `runs`: one op's run on a runner; `status`: the sticky status comment;
  `report`: the matrix's aggregated answer; `context`: FlowConfig and the event's one forge.
- `job_guard`: what PR code never sees (secrets, the step's file commands, leftovers).
"""
