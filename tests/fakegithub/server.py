"""A fake GitHub REST API for tests: a real HTTP server with state, checked against the spec.

- Standard-library `ThreadingHTTPServer` on 127.0.0.1 at a free port; `base_url` is what
  PyGithub gets as `base_url` (the same role as `GITHUB_API_URL`).
- Branches and SHAs are those of a real bare git repository (the git remote of the test),
  so pushes by the bot are seen by the API and merges really move the base branch.
- Every request is matched to an operation of tests/fakegithub/openapi.json and its path,
  query and body validated; every answer is validated too (status declared, body schema).
  Problems go to `violations`; each test ends with `fake.assert_no_violations()`.
- Answers start from the spec's own examples, with URLs rewritten to the fake's base URL.
- `inject()` queues 5xx or rate-limit answers for matching requests.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from . import spec

EXAMPLE_API_REPO = "https://api.github.com/repos/octocat/Hello-World"
EXAMPLE_HTML_REPO = "https://github.com/octocat/Hello-World"
NOW = "2026-01-01T00:00:00Z"


@dataclass
class Call:
    method: str
    path: str
    op_id: str | None
    query: dict[str, list[str]]
    body: object
    status: int = 0
    injected: bool = False


@dataclass
class GitRequest:
    method: str
    path: str  # after the repository's .git: /info/refs, /git-receive-pack, ...
    query: str
    authorization: str | None


def _read_body(h: BaseHTTPRequestHandler) -> bytes:
    """The request body, Content-Length or chunked (git sends large packs chunked)."""
    if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int(h.rfile.readline().strip().split(b";")[0], 16)
            if size == 0:
                h.rfile.readline()
                return b"".join(chunks)
            chunks.append(h.rfile.read(size))
            h.rfile.readline()
    length = int(h.headers.get("Content-Length") or 0)
    return h.rfile.read(length) if length else b""


@dataclass
class Injection:
    pattern: re.Pattern[str]
    status: int
    headers: dict[str, str]
    message: str
    times: int


@dataclass
class PullState:
    number: int
    title: str
    body: str
    head_ref: str
    base_ref: str
    user: str
    head_owner: str  # the fork's owner for fork PRs
    state: str = "open"
    merged: bool = False
    merge_commit_sha: str | None = None
    merged_by: str | None = None
    labels: list[str] = field(default_factory=list)
    requested_reviewers: list[str] = field(default_factory=list)
    mergeable: bool | None = None  # None: computed from the git repo
    draft: bool = False


@dataclass
class CommentState:
    id: int
    issue: int
    body: str
    user: str
    created_at: str = NOW
    updated_at: str = NOW


@dataclass
class ReviewState:
    id: int
    pull: int
    user: str
    state: str  # REST spelling: APPROVED | CHANGES_REQUESTED | COMMENTED | DISMISSED
    commit_id: str
    body: str = ""


def _rewrite(node: object, replacements: list[tuple[str, str]]) -> object:
    if isinstance(node, dict):
        return {k: _rewrite(v, replacements) for k, v in node.items()}
    if isinstance(node, list):
        return [_rewrite(v, replacements) for v in node]
    if isinstance(node, str):
        for old, new in replacements:
            node = node.replace(old, new)
    return node


class FakeGitHub:
    def __init__(
        self,
        bare_repo: Path,
        owner: str = "octo-org",
        name: str = "kernels",
        default_branch: str = "main",
    ) -> None:
        self.bare = Path(bare_repo)
        self.owner, self.name, self.default_branch = owner, name, default_branch
        self.permissions: dict[
            str, str
        ] = {}  # login -> role: admin | maintain | write | triage | read
        self.pulls: dict[int, PullState] = {}
        self.comments: dict[int, CommentState] = {}
        self.reactions: dict[int, list[tuple[str, str]]] = {}
        self.reviews: dict[int, ReviewState] = {}
        self.statuses: dict[str, list[dict]] = {}
        self.check_runs: dict[str, list[dict]] = {}
        self.calls: list[Call] = []
        self.violations: list[str] = []
        self.injections: list[Injection] = []
        self.before: dict[
            str, Callable[[], None]
        ] = {}  # op_id -> run just before handling it (races)
        self.token_login = "github-actions[bot]"  # whom the token authenticates
        self.token = "t0ken"  # the only credential git over HTTP accepts
        self.git_requests: list[
            GitRequest
        ] = []  # every smart-HTTP git request, with its Authorization
        self._ids = 1000
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> FakeGitHub:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def _serve(self) -> None:
                fake._handle(self)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() the fake first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def repo_api(self) -> str:
        return f"{self.base_url}/repos/{self.full_name}"

    @property
    def repo_html(self) -> str:
        return f"{self.base_url}/html/{self.full_name}"

    # -- test helpers ----------------------------------------------------------
    def assert_no_violations(self) -> None:
        assert not self.violations, "spec violations:\n" + "\n".join(self.violations)

    def inject(
        self,
        status: int,
        match: str = ".*",
        times: int = 1,
        headers: dict[str, str] | None = None,
        message: str = "injected",
    ) -> None:
        """Answer the next `times` requests whose "METHOD /path" matches `match` with `status`."""
        with self._lock:
            self.injections.append(
                Injection(re.compile(match), status, headers or {}, message, times)
            )

    def set_permission(self, login: str, role: str) -> None:
        self.permissions[login] = role

    def writes(self) -> list[Call]:
        return [c for c in self.calls if c.method != "GET" and not c.injected]

    def calls_to(self, op_id: str) -> list[Call]:
        return [c for c in self.calls if c.op_id == op_id and not c.injected]

    def open_pull(
        self,
        head: str,
        base: str | None = None,
        user: str = "dev",
        title: str = "Add kernel",
        body: str = "",
        fork_owner: str | None = None,
        head_sha: str | None = None,
    ) -> int:
        """A PR from `head` (a branch of the bare repo; for a fork, `head_sha` becomes refs/pull/N/head)."""
        with self._lock:
            number = max(self.pulls, default=0) + 1
            pr = PullState(
                number,
                title,
                body,
                head,
                base or self.default_branch,
                user,
                fork_owner or self.owner,
            )
            self.pulls[number] = pr
        sha = head_sha or self.git("rev-parse", f"refs/heads/{head}")
        self.git("update-ref", f"refs/pull/{number}/head", sha)
        return number

    def add_review(
        self, pull: int, user: str, state: str, commit_id: str | None = None, body: str = ""
    ) -> ReviewState:
        with self._lock:
            rid = self._next_id()
            review = ReviewState(
                rid, pull, user, state.upper(), commit_id or self.head_sha(pull), body
            )
            self.reviews[rid] = review
            return review

    def add_check_run(
        self,
        sha: str,
        name: str,
        conclusion: str | None = "success",
        status: str = "completed",
        run_id: int | None = None,
    ) -> None:
        """A check run on `sha`; `run_id`: it belongs to that Actions workflow run (details_url names it)."""
        self.check_runs.setdefault(sha, []).append(
            {"name": name, "status": status, "conclusion": conclusion, "run_id": run_id}
        )

    def add_comment(self, issue: int, body: str, user: str) -> CommentState:
        with self._lock:
            comment = CommentState(self._next_id(), issue, body, user)
            self.comments[comment.id] = comment
            return comment

    def comments_on(self, issue: int) -> list[CommentState]:
        return [c for c in self.comments.values() if c.issue == issue]

    def head_sha(self, number: int) -> str:
        pr = self.pulls[number]
        if pr.head_owner == self.owner and not pr.merged:
            sha = self.git("rev-parse", f"refs/heads/{pr.head_ref}", check=False)
            if sha:
                self.git("update-ref", f"refs/pull/{number}/head", sha)
                return sha
        return self.git("rev-parse", f"refs/pull/{number}/head")

    def git(self, *args: str, check: bool = True) -> str:
        out = subprocess.run(["git", "-C", str(self.bare), *args], capture_output=True, text=True)
        if check and out.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)}: {out.stderr.strip()}")
        return out.stdout.strip() if out.returncode == 0 else ""

    def branches(self) -> dict[str, str]:
        out = self.git("for-each-ref", "--format=%(refname:strip=2) %(objectname)", "refs/heads/")
        return dict(line.split(" ", 1) for line in out.splitlines() if line)

    # -- webhook payloads (derived from @octokit/webhooks-examples, validated) --
    def comment_event(
        self, number: int, body: str, login: str, user_type: str | None = None
    ) -> dict:
        """Post `body` as `login` on PR `number` and return the `issue_comment` payload GitHub would send."""
        comment = self.add_comment(number, body, login)
        payload = self._retarget(spec.webhook_template("issue_comment.pr.created.json"))
        kind = user_type or ("Bot" if login.endswith("[bot]") else "User")
        issue = payload["issue"]
        issue.update(
            number=number,
            title=self.pulls[number].title,
            url=f"{self.repo_api}/issues/{number}",
            state="open",
        )
        issue["pull_request"].update(
            url=f"{self.repo_api}/pulls/{number}", html_url=f"{self.repo_html}/pull/{number}"
        )
        issue["user"] = self._webhook_user(
            payload["issue"]["user"], self.pulls[number].user, "User"
        )
        payload["comment"].update(
            id=comment.id,
            body=body,
            url=f"{self.repo_api}/issues/comments/{comment.id}",
            issue_url=f"{self.repo_api}/issues/{number}",
        )
        payload["comment"]["user"] = self._webhook_user(payload["comment"]["user"], login, kind)
        payload["sender"] = self._webhook_user(payload["sender"], login, kind)
        self._check_webhook("issue-comment-created", payload)
        return payload

    def review_event(
        self, number: int, login: str, state: str = "approved", commit_id: str | None = None
    ) -> dict:
        """Submit a review as `login` (REST state stored upper-case) and return the webhook payload (lower-case)."""
        review = self.add_review(number, login, state.upper(), commit_id)
        payload = self._retarget(spec.webhook_template("pull_request_review.approved.json"))
        pr = self.pulls[number]
        payload["review"].update(id=review.id, state=state.lower(), commit_id=review.commit_id)
        payload["review"]["user"] = self._webhook_user(payload["review"]["user"], login, "User")
        payload["sender"] = self._webhook_user(payload["sender"], login, "User")
        p = payload["pull_request"]
        p.update(
            number=number, url=f"{self.repo_api}/pulls/{number}", state=pr.state, title=pr.title
        )
        p["head"].update(
            ref=pr.head_ref, sha=self.head_sha(number), label=f"{pr.head_owner}:{pr.head_ref}"
        )
        p["head"]["repo"].update(
            full_name=f"{pr.head_owner}/{self.name}", fork=pr.head_owner != self.owner
        )
        p["base"].update(
            ref=pr.base_ref,
            sha=self.git("rev-parse", f"refs/heads/{pr.base_ref}"),
            label=f"{self.owner}:{pr.base_ref}",
        )
        self._check_webhook("pull-request-review-submitted", payload)
        return payload

    def _retarget(self, payload: dict) -> dict:
        repo = payload["repository"]
        old_full, old_html = repo["full_name"], repo["html_url"]
        old_api = repo["url"]
        out = _rewrite(
            payload,
            [
                (old_api, self.repo_api),
                (old_html, self.repo_html),
                ("https://api.github.com", self.base_url),
                (old_full, self.full_name),
            ],
        )
        out["repository"].update(
            name=self.name, full_name=self.full_name, default_branch=self.default_branch
        )
        out["repository"]["owner"]["login"] = self.owner
        return out  # type: ignore[return-value]

    @staticmethod
    def _webhook_user(template: dict, login: str, kind: str) -> dict:
        user = copy.deepcopy(template)
        user.update(login=login, type=kind, id=abs(hash(login)) % 10**7 + 1)
        return user

    def _check_webhook(self, name: str, payload: dict) -> None:
        self.violations += [
            f"webhook {name}: {e}" for e in spec.validate(spec.webhook_schema(name), payload)
        ]

    # -- HTTP ------------------------------------------------------------------
    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    @property
    def git_url(self) -> str:
        """The repository's git URL, as `GITHUB_SERVER_URL/GITHUB_REPOSITORY.git` names it."""
        return f"{self.repo_html}.git"

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(h.path)
        path = unquote(parts.path)
        if path.startswith(f"/html/{self.full_name}.git/"):
            return self._git_http(h, path.removeprefix(f"/html/{self.full_name}.git"), parts.query)
        query = parse_qs(parts.query, keep_blank_values=True)
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        body: object = None
        has_body = bool(raw.strip())
        with self._lock:
            if has_body:
                try:
                    body = json.loads(raw)
                except ValueError:
                    self.violations.append(f"{h.command} {path}: body is not JSON")
            found = spec.match(h.command, path)
            call = Call(h.command, path, found[0].op_id if found else None, query, body)
            self.calls.append(call)
            if found is None:
                self.violations.append(f"{h.command} {path}: no such operation in the spec")
                return self._send(h, call, 404, {"message": "Not Found"})
            op, params = found
            self.violations += spec.check_request(op, params, query, body, has_body)
            injected = self._injection(f"{h.command} {path}")
            if injected is not None:
                call.injected = True
                return self._send(
                    h,
                    call,
                    injected.status,
                    {
                        "message": injected.message,
                        "documentation_url": "https://docs.github.com/rest",
                    },
                    injected.headers,
                )
            hook = self.before.pop(op.op_id, None)
            if hook is not None:
                hook()
            try:
                status, answer = getattr(self, "op_" + re.sub(r"\W", "_", op.op_id))(
                    params, query, body
                )
            except Exception as exc:  # a bug in the fake: make it loud
                self.violations.append(f"fake crashed on {op.op_id}: {exc!r}")
                return self._send(h, call, 500, {"message": repr(exc)})
            self.violations += spec.check_response(op, status, answer)
            self._send(h, call, status, answer)

    def _git_http(self, h: BaseHTTPRequestHandler, rest: str, query: str) -> None:
        """Smart-HTTP git on the bare repository through `git http-backend` (a real git server)."""
        auth = h.headers.get("Authorization")
        raw = _read_body(h)
        self.git_requests.append(GitRequest(h.command, rest, query, auth))
        expected = "Basic " + base64.b64encode(f"x-access-token:{self.token}".encode()).decode()
        if auth is None or auth.lower() != expected.lower():
            h.send_response(401)
            h.send_header("WWW-Authenticate", 'Basic realm="GitHub"')
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.bare.parent),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REMOTE_USER": "x-access-token",
            "REQUEST_METHOD": h.command,
            "PATH_INFO": f"/{self.bare.name}{rest}",
            "QUERY_STRING": query,
            "CONTENT_TYPE": h.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(raw)),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
        }
        for header in ("Content-Encoding", "Git-Protocol"):
            if h.headers.get(header):
                env["HTTP_" + header.upper().replace("-", "_")] = h.headers[header]
        # No lock: git itself keeps concurrent pushes to different refs of one repository safe.
        out = subprocess.run(
            ["git", "http-backend"], input=raw, env=env, capture_output=True
        ).stdout
        head, _, body = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode("latin-1").split("\r\n"):
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.split()[0])
            elif key:
                headers.append((key, value.strip()))
        h.send_response(status)
        for key, value in headers:
            h.send_header(key, value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _injection(self, line: str) -> Injection | None:
        for inj in self.injections:
            if inj.times > 0 and inj.pattern.search(line):
                inj.times -= 1
                return inj
        return None

    def _send(
        self,
        h: BaseHTTPRequestHandler,
        call: Call,
        status: int,
        answer: object,
        headers: dict[str, str] | None = None,
    ) -> None:
        call.status = status
        data = b"" if answer is None else json.dumps(answer).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json; charset=utf-8")
        h.send_header("Content-Length", str(len(data)))
        merged = {
            "X-RateLimit-Limit": "5000",
            "X-RateLimit-Remaining": "4999",
            "X-RateLimit-Reset": str(int(time.time()) + 3600),
        }
        for key, value in (headers or {}).items():
            merged = {k: v for k, v in merged.items() if k.lower() != key.lower()}
            merged[key] = value
        for key, value in merged.items():
            h.send_header(key, value)
        h.end_headers()
        h.wfile.write(data)

    # -- resource builders ------------------------------------------------------
    def _from_example(self, op_id: str, status: int, number: int | None = None) -> dict:
        value = spec.example(op_id, status)
        if isinstance(value, list):
            value = value[0]
        repl = [
            (EXAMPLE_API_REPO, self.repo_api),
            (EXAMPLE_HTML_REPO, self.repo_html),
            ("https://api.github.com", self.base_url),
            ("https://github.com", self.base_url + "/html"),
        ]
        if number is not None:
            repl = [
                (f"/pulls/{1347}", f"/pulls/{number}"),
                (f"/pull/{1347}", f"/pull/{number}"),
                (f"/issues/{1347}", f"/issues/{number}"),
            ] + repl
        return _rewrite(value, repl)  # type: ignore[return-value]

    def _user(self, login: str) -> dict:
        user = self._from_example("pulls/get", 200)["user"]
        user.update(
            login=login,
            id=abs(hash(login)) % 10**7 + 1,
            type="Bot" if login.endswith("[bot]") else "User",
            url=f"{self.base_url}/users/{login}",
            html_url=f"{self.base_url}/html/{login}",
        )
        return user

    def _repo_obj(self, owner: str) -> dict:
        repo = self._from_example("pulls/get", 200)["base"]["repo"]
        full = f"{owner}/{self.name}"
        repo = _rewrite(repo, [(self.full_name, full)]) if owner != self.owner else repo
        repo.update(
            name=self.name,
            full_name=full,
            fork=owner != self.owner,
            default_branch=self.default_branch,
            url=f"{self.base_url}/repos/{full}",
        )
        repo["owner"] = self._user(owner)
        return repo

    def _pull_obj(self, pr: PullState) -> dict:
        out = self._from_example("pulls/get", 200, pr.number)
        head_sha = self.head_sha(pr.number)
        base_sha = self.git("rev-parse", f"refs/heads/{pr.base_ref}")
        out.update(
            id=pr.number * 7,
            number=pr.number,
            title=pr.title,
            body=pr.body,
            state=pr.state,
            locked=False,
            user=self._user(pr.user),
            draft=pr.draft,
            merged=pr.merged,
            merge_commit_sha=pr.merge_commit_sha,
            merged_at=NOW if pr.merged else None,
            closed_at=NOW if pr.state == "closed" else None,
            merged_by=self._user(pr.merged_by) if pr.merged_by else None,
            mergeable=self._mergeable(pr),
            mergeable_state="clean" if self._mergeable(pr) else "dirty",
            milestone=None,
            assignee=None,
            assignees=[],
            requested_reviewers=[self._user(u) for u in pr.requested_reviewers],
            requested_teams=[],
            auto_merge=None,
            labels=[self._label(name) for name in pr.labels],
            comments=len(self.comments_on(pr.number)),
        )
        out["head"].update(
            ref=pr.head_ref,
            sha=head_sha,
            label=f"{pr.head_owner}:{pr.head_ref}",
            user=self._user(pr.head_owner),
            repo=self._repo_obj(pr.head_owner),
        )
        out["base"].update(
            ref=pr.base_ref,
            sha=base_sha,
            label=f"{self.owner}:{pr.base_ref}",
            user=self._user(self.owner),
            repo=self._repo_obj(self.owner),
        )
        return out

    def _simple_pull(self, pr: PullState) -> dict:
        full = self._pull_obj(pr)
        keep = spec.resolve({"$ref": "#/components/schemas/pull-request-simple"})["properties"]
        return {k: v for k, v in full.items() if k in keep}

    def _label(self, name: str) -> dict:
        label = self._from_example("issues/add-labels", 200)
        label.update(
            name=name, url=f"{self.repo_api}/labels/{name}", id=abs(hash(name)) % 10**6 + 1
        )
        return label

    def _comment_obj(self, c: CommentState) -> dict:
        out = self._from_example("issues/get-comment", 200)
        out.update(
            id=c.id,
            body=c.body,
            user=self._user(c.user),
            url=f"{self.repo_api}/issues/comments/{c.id}",
            html_url=f"{self.repo_html}/pull/{c.issue}#issuecomment-{c.id}",
            issue_url=f"{self.repo_api}/issues/{c.issue}",
            created_at=c.created_at,
            updated_at=c.updated_at,
        )
        return out

    def _review_obj(self, r: ReviewState) -> dict:
        out = self._from_example("pulls/list-reviews", 200, r.pull)
        out.update(
            id=r.id,
            user=self._user(r.user),
            state=r.state,
            commit_id=r.commit_id,
            body=r.body,
            submitted_at=NOW,
            pull_request_url=f"{self.repo_api}/pulls/{r.pull}",
        )
        return out

    def _mergeable(self, pr: PullState) -> bool:
        if pr.mergeable is not None:
            return pr.mergeable
        if pr.merged:
            return False
        out = subprocess.run(
            [
                "git",
                "-C",
                str(self.bare),
                "merge-tree",
                "--write-tree",
                f"refs/heads/{pr.base_ref}",
                self.head_sha(pr.number),
            ],
            capture_output=True,
            text=True,
        )
        return out.returncode == 0

    def _error(self, status: int, message: str) -> tuple[int, dict]:
        return status, {"message": message, "documentation_url": "https://docs.github.com/rest"}

    def _pull(self, params: dict) -> PullState | None:
        return self.pulls.get(int(params.get("pull_number") or params.get("issue_number")))

    # -- operations (named after operationId) ----------------------------------
    def op_repos_get(self, params: dict, query: dict, body: object) -> tuple[int, object]:
        out = self._from_example("repos/get", 200)
        repo = self._repo_obj(self.owner)
        out.update({k: v for k, v in repo.items() if k in out})
        # The spec's example omits `language` (required) and nests an equally incomplete `source`.
        out.setdefault("language", None)
        for key in ("parent", "source", "template_repository"):
            out.pop(key, None)
        return 200, out

    def op_pulls_list(self, params: dict, query: dict, body: object) -> tuple[int, object]:
        state = query.get("state", ["open"])[0]
        head = query.get("head", [None])[0]
        base = query.get("base", [None])[0]
        found = []
        for pr in sorted(self.pulls.values(), key=lambda p: p.number):
            if state not in ("all", pr.state):
                continue
            if head and f"{pr.head_owner}:{pr.head_ref}" != head:
                continue
            if base and pr.base_ref != base:
                continue
            found.append(self._simple_pull(pr))
        return 200, found

    def op_pulls_create(self, params: dict, query: dict, body: dict) -> tuple[int, object]:
        head, base = body["head"], body["base"]
        owner, _, ref = head.rpartition(":")
        if not self.git("rev-parse", "--verify", f"refs/heads/{ref}", check=False):
            return self._error(422, f"head branch {ref} does not exist")
        if any(
            p.state == "open" and p.head_ref == ref and p.base_ref == base
            for p in self.pulls.values()
        ):
            return self._error(422, f"A pull request already exists for {self.owner}:{ref}.")
        number = self.open_pull(
            ref,
            base,
            user=self.token_login,
            title=body.get("title", ""),
            body=body.get("body") or "",
            fork_owner=owner or None,
        )
        self.pulls[number].draft = bool(body.get("draft"))
        return 201, self._pull_obj(self.pulls[number])

    def op_pulls_get(self, params: dict, query: dict, body: object) -> tuple[int, object]:
        pr = self._pull(params)
        return (200, self._pull_obj(pr)) if pr else self._error(404, "Not Found")

    def op_pulls_update(self, params: dict, query: dict, body: dict) -> tuple[int, object]:
        pr = self._pull(params)
        if pr is None:
            return self._error(422, "no such pull request")
        pr.title = body.get("title", pr.title)
        pr.body = body.get("body", pr.body)
        if body.get("state") in ("open", "closed"):
            pr.state = body["state"]
        return 200, self._pull_obj(pr)

    def op_pulls_merge(self, params: dict, query: dict, body: dict | None) -> tuple[int, object]:
        pr = self._pull(params)
        if pr is None:
            return self._error(404, "Not Found")
        body = body or {}
        head = self.head_sha(pr.number)
        if pr.merged or pr.state != "open":
            return self._error(405, "Pull Request is not mergeable")
        if body.get("sha") and body["sha"] != head:
            return self._error(409, "Head branch was modified. Review and try the merge again.")
        if not self._mergeable(pr):
            return self._error(405, "Pull Request is not mergeable")
        base_ref = f"refs/heads/{pr.base_ref}"
        tree = self.git("merge-tree", "--write-tree", base_ref, head).splitlines()[0]
        message = (
            body.get("commit_title")
            or f"Merge pull request #{pr.number} from {pr.head_owner}/{pr.head_ref}"
        )
        commit = self.git(
            "commit-tree", tree, "-p", self.git("rev-parse", base_ref), "-p", head, "-m", message
        )
        self.git("update-ref", base_ref, commit)
        pr.merged, pr.state, pr.merge_commit_sha, pr.merged_by = (
            True,
            "closed",
            commit,
            self.token_login,
        )
        return 200, {"sha": commit, "merged": True, "message": "Pull Request successfully merged"}

    def op_pulls_list_reviews(self, params: dict, query: dict, body: object) -> tuple[int, object]:
        number = int(params["pull_number"])
        return 200, [
            self._review_obj(r)
            for r in sorted(self.reviews.values(), key=lambda r: r.id)
            if r.pull == number
        ]

    def op_pulls_create_review(self, params: dict, query: dict, body: dict) -> tuple[int, object]:
        number = int(params["pull_number"])
        state = {
            "APPROVE": "APPROVED",
            "REQUEST_CHANGES": "CHANGES_REQUESTED",
            "COMMENT": "COMMENTED",
        }.get((body or {}).get("event", ""), "PENDING")
        review = self.add_review(
            number,
            self.token_login,
            state,
            (body or {}).get("commit_id"),
            (body or {}).get("body", ""),
        )
        return 200, self._review_obj(review)

    def op_pulls_request_reviewers(
        self, params: dict, query: dict, body: dict
    ) -> tuple[int, object]:
        pr = self._pull(params)
        for login in body.get("reviewers", []):
            if login == pr.user:
                return self._error(422, "Review cannot be requested from pull request author.")
            if login not in pr.requested_reviewers:
                pr.requested_reviewers.append(login)
        return 201, self._simple_pull(pr)

    def op_issues_list_comments(
        self, params: dict, query: dict, body: object
    ) -> tuple[int, object]:
        number = int(params["issue_number"])
        per_page = int(query.get("per_page", ["30"])[0])
        page = int(query.get("page", ["1"])[0])
        items = [self._comment_obj(c) for c in sorted(self.comments_on(number), key=lambda c: c.id)]
        return 200, items[(page - 1) * per_page : page * per_page]

    def op_issues_create_comment(self, params: dict, query: dict, body: dict) -> tuple[int, object]:
        number = int(params["issue_number"])
        if number not in self.pulls:
            return self._error(404, "Not Found")
        return 201, self._comment_obj(self.add_comment(number, body["body"], self.token_login))

    def op_issues_add_labels(self, params: dict, query: dict, body: object) -> tuple[int, object]:
        pr = self._pull(params)
        names = body if isinstance(body, list) else (body or {}).get("labels", [])
        for label in names:
            name = label if isinstance(label, str) else label["name"]
            if name not in pr.labels:
                pr.labels.append(name)
        return 200, [self._label(n) for n in pr.labels]

    def op_issues_get_comment(self, params: dict, query: dict, body: object) -> tuple[int, object]:
        c = self.comments.get(int(params["comment_id"]))
        return (200, self._comment_obj(c)) if c else self._error(404, "Not Found")

    def op_issues_update_comment(self, params: dict, query: dict, body: dict) -> tuple[int, object]:
        c = self.comments.get(int(params["comment_id"]))
        if c is None:
            return self._error(422, "no such comment")
        c.body, c.updated_at = body["body"], NOW
        return 200, self._comment_obj(c)

    def op_reactions_create_for_issue_comment(
        self, params: dict, query: dict, body: dict
    ) -> tuple[int, object]:
        cid = int(params["comment_id"])
        out = self._from_example("reactions/create-for-issue-comment", 201)
        out.update(id=self._next_id(), content=body["content"], user=self._user(self.token_login))
        existing = self.reactions.setdefault(cid, [])
        if (self.token_login, body["content"]) in existing:
            return 200, out
        existing.append((self.token_login, body["content"]))
        return 201, out

    def op_repos_get_collaborator_permission_level(
        self, params: dict, query: dict, body: object
    ) -> tuple[int, object]:
        login = params["username"]
        role = self.permissions.get(login, "none")
        legacy = {"maintain": "write", "triage": "read"}.get(role, role)
        out = self._from_example("repos/get-collaborator-permission-level", 200)
        out.update(permission=legacy, role_name=role)
        out["user"].update(login=login, role_name=role, url=f"{self.base_url}/users/{login}")
        out["user"]["permissions"] = {
            "admin": role == "admin",
            "maintain": role in ("admin", "maintain"),
            "push": role in ("admin", "maintain", "write"),
            "triage": role != "none",
            "pull": role != "none",
        }
        return 200, out

    def op_repos_create_commit_status(
        self, params: dict, query: dict, body: dict
    ) -> tuple[int, object]:
        sha = params["sha"]
        out = self._from_example("repos/create-commit-status", 201)
        entry = {
            "state": body["state"],
            "context": body.get("context", "default"),
            "description": body.get("description"),
            "target_url": body.get("target_url"),
        }
        self.statuses.setdefault(sha, []).append(entry)
        out.update(
            id=self._next_id(),
            url=f"{self.repo_api}/statuses/{sha}",
            **entry,
            creator=self._user(self.token_login),
        )
        return 201, out

    def _latest_statuses(self, sha: str) -> list[dict]:
        latest: dict[str, dict] = {}
        for entry in self.statuses.get(sha, []):
            latest[entry["context"]] = entry
        return list(latest.values())

    def op_repos_get_combined_status_for_ref(
        self, params: dict, query: dict, body: object
    ) -> tuple[int, object]:
        sha = self.git("rev-parse", params["ref"], check=False) or params["ref"]
        out = self._from_example("repos/get-combined-status-for-ref", 200)
        template = out["statuses"][0]
        items = []
        for entry in self._latest_statuses(sha):
            item = copy.deepcopy(template)
            item.update(id=self._next_id(), **entry)
            items.append(item)
        states = {e["state"] for e in items}
        combined = (
            "failure"
            if states & {"failure", "error"}
            else "pending"
            if ("pending" in states or not items)
            else "success"
        )
        out.update(
            state=combined,
            sha=sha,
            total_count=len(items),
            statuses=items,
            commit_url=f"{self.repo_api}/commits/{sha}",
            url=f"{self.repo_api}/commits/{sha}/status",
        )
        out["repository"] = {
            k: v for k, v in self._repo_obj(self.owner).items() if k in out["repository"]
        }
        return 200, out

    def op_checks_list_for_ref(self, params: dict, query: dict, body: object) -> tuple[int, object]:
        sha = self.git("rev-parse", params["ref"], check=False) or params["ref"]
        out = self._from_example("checks/list-for-ref", 200)
        template = out["check_runs"][0]
        runs = []
        for run in self.check_runs.get(sha, []):
            item = copy.deepcopy(template)
            item.update(
                id=self._next_id(),
                head_sha=sha,
                name=run["name"],
                status=run["status"],
                conclusion=run["conclusion"],
                completed_at=NOW if run["status"] == "completed" else None,
            )
            if run.get("run_id") is not None:  # Actions jobs link to their workflow run
                item["details_url"] = item["html_url"] = (
                    f"{self.repo_html}/actions/runs/{run['run_id']}/job/{item['id']}"
                )
            runs.append(item)
        per_page = int(query.get("per_page", ["30"])[0])
        page = int(query.get("page", ["1"])[0])
        out.update(total_count=len(runs), check_runs=runs[(page - 1) * per_page : page * per_page])
        return 200, out

    def op_git_list_matching_refs(
        self, params: dict, query: dict, body: object
    ) -> tuple[int, object]:
        prefix = "refs/" + params["ref"]
        template = self._from_example("git/list-matching-refs", 200)
        items = []
        out = self.git(
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            prefix if prefix.endswith("/") else prefix + "*",
        )
        for line in out.splitlines():
            name, sha = line.split(" ")
            if not name.startswith(prefix):
                continue
            item = copy.deepcopy(template)
            item.update(ref=name, url=f"{self.repo_api}/git/{name}")
            item["object"].update(sha=sha, type="commit", url=f"{self.repo_api}/git/commits/{sha}")
            items.append(item)
        return 200, items

    def op_git_delete_ref(self, params: dict, query: dict, body: object) -> tuple[int, object]:
        ref = "refs/" + params["ref"]
        if not self.git("rev-parse", "--verify", ref, check=False):
            return 422, None
        if ref == f"refs/heads/{self.default_branch}":
            return 422, None
        self.git("update-ref", "-d", ref)
        return 204, None
