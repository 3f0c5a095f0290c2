"""tunebot's git layer: the only code that runs git or opens repositories.

One module per job: `runner` (running git), `repository` (opening, resolving, reading
commits), `commits` (commits with explicit parents), `worktrees` (tunebot's own
worktrees), `refs` (compare-and-swap refs, `refs/tunebot/...`), `branches` (the
branch-ownership store), `merge`, `remotes` (fetch, push with retry), `isolated`
(a private git dir for pushes with a credential), `gitdir` (a checkout's refs read
as files) and `folders` (where any folder's files came from). Branch and ref names come
from `bot.naming`; locks and atomic files from `bot.fs`.

Inside this package `import git` is GitPython (imports are absolute).
"""
