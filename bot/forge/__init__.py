"""Forges: where proposals (pull requests) live. `local` keeps them in the git repo; `github` uses PyGithub."""
