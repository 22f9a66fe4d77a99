"""Post a document on a pull request as one comment, and update that same comment when it is
posted again (so a PR carries one current proposal and one current verdict per experiment, not
a pile of stale ones).

Two kinds of document, each found again by its own hidden marker at the start of the body:
the *proposal* (`matrixrun plan --markdown`: what a spec will run) and the *verdict* (the
report of a run directory). GitHub's REST API: list `GET /repos/{repo}/issues/{number}/comments`
(paginated), create `POST` there, update `PATCH /repos/{repo}/issues/comments/{id}`.

The API is found the way GitHub's own tools (gh, actions/github-script) find it: `--api-url`,
else `GITHUB_API_URL` (GitHub Actions sets it, and on GitHub Enterprise Server it points at that
server), else the public API. The token comes from an environment variable (`GITHUB_TOKEN`) and
is only ever placed in the Authorization header: no message, dry run or log contains it. Every
failure GitHub can answer with becomes one sentence saying what to fix (`MatrixError`), never a
traceback.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import httpx

from matrixrun.core.errors import InputError, MatrixError

PUBLIC_API_URL = "https://api.github.com"
#: Kept for callers of the old name.
API_URL = PUBLIC_API_URL
COMMENT_LIMIT = 65536

Kind = Literal["verdict", "proposal"]

#: Characters a comment key may hold (a spec's experiment slug always fits): it sits inside an
#: HTML comment, so no spaces and no `>` (without `>` nothing can end the comment early).
_KEY = re.compile(r"[A-Za-z0-9_.+][A-Za-z0-9_.+-]*")


def marker(experiment: str, kind: Kind = "verdict") -> str:
    """The hidden first line of a posted comment. The verdict's marker keeps the form older
    versions posted (`<!-- matrixrun:NAME -->`), so their comments are updated, not doubled."""
    prefix = "matrixrun" if kind == "verdict" else f"matrixrun-{kind}"
    return f"<!-- {prefix}:{experiment} -->"


def check_key(experiment: str) -> str:
    """The comment key as given, or an InputError saying which characters it may use."""
    if not _KEY.fullmatch(experiment):
        raise InputError(
            f"--experiment {experiment!r} cannot name a comment: use letters, digits and "
            "`_ . + -` (no spaces), starting with a letter or digit"
        )
    return experiment


def safe_key(text: str) -> str:
    """A comment key made from free text (arm names of an ingested run): every run of
    characters a key may not hold becomes `_`."""
    key = re.sub(r"[^A-Za-z0-9_.+-]+", "_", text)
    return key if _KEY.fullmatch(key) else "_" + key


def resolve_api_url(option: str | None, environ: Mapping[str, str] | None = None) -> str:
    """`--api-url`, else `GITHUB_API_URL`, else the public API (trailing `/` removed)."""
    env = os.environ if environ is None else environ
    url = (option or env.get("GITHUB_API_URL") or PUBLIC_API_URL).rstrip("/")
    if not re.match(r"https?://[^/\s]+", url):
        source = "--api-url" if option else "GITHUB_API_URL"
        raise InputError(
            f"{source} {url!r} is not an http(s) URL; give the API root, e.g. "
            f"{PUBLIC_API_URL} or https://HOST/api/v3 for GitHub Enterprise Server"
        )
    return url


@dataclass(frozen=True)
class Posted:
    url: str
    updated: bool


@dataclass(frozen=True)
class Target:
    """Where a comment goes: `repo` (owner/name), pull request `number`, the API root."""

    repo: str
    number: int
    api_url: str = PUBLIC_API_URL

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", self.repo):
            raise InputError(
                f"--repo {self.repo!r} is not owner/name (in GitHub Actions: $GITHUB_REPOSITORY)"
            )
        if self.number < 1:
            raise InputError(f"--pr {self.number} is not a pull request number (1 or more)")


def comment_text(body: str, experiment: str, kind: Kind) -> str:
    """The marker line plus the body, or an InputError when GitHub would refuse its size."""
    text = f"{marker(experiment, kind)}\n{body}"
    if len(text) > COMMENT_LIMIT:
        raise InputError(
            f"the {kind} is {len(text)} characters, over GitHub's {COMMENT_LIMIT} per comment; "
            "re-render it (the report renderer trims to fit) or post a shorter template"
        )
    return text


def headers(token: str | None) -> dict[str, str]:
    out = {
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": "matrixrun",
    }
    if token is not None:
        out["Authorization"] = f"Bearer {token}"
    return out


def dry_run(body: str, target: Target, *, experiment: str, kind: Kind, token_env: str) -> str:
    """The request `post_comment` would send to create the comment, as text, without sending
    anything (not even the read that finds an existing comment). The token is never shown."""
    text = comment_text(body, experiment, kind)
    shown = headers(None)
    shown["Authorization"] = (
        f"Bearer *** (from {token_env})"
        if os.environ.get(token_env)
        else f"(none: {token_env} is not set, so a real post would stop here)"
    )
    lines = [
        f"POST {target.api_url}/repos/{target.repo}/issues/{target.number}/comments",
        *(f"{k}: {v}" for k, v in shown.items()),
        "",
        json.dumps({"body": text}, ensure_ascii=False),
        "",
        f"(dry run: nothing was sent. If the pull request already has a comment starting with "
        f"{marker(experiment, kind)}, the real post sends this body as "
        f"PATCH {target.api_url}/repos/{target.repo}/issues/comments/ID instead.)",
    ]
    return "\n".join(lines)


def _token(token_env: str) -> str:
    token = os.environ.get(token_env)
    if not token:
        raise InputError(
            f"no GitHub token: export {token_env}=<token> (in GitHub Actions: "
            f"`env: {{{token_env}: ${{{{ secrets.GITHUB_TOKEN }}}}}}`), or pass --token-env"
        )
    return token


def _reset_time(response: httpx.Response) -> str:
    retry = response.headers.get("retry-after")
    if retry and retry.isdigit():
        return f"retry in {retry} s"
    reset = response.headers.get("x-ratelimit-reset")
    if reset and reset.isdigit():
        when = datetime.fromtimestamp(int(reset), UTC).strftime("%H:%M:%S UTC")
        return f"the limit resets at {when}"
    return "retry in a few minutes"


def _message(response: httpx.Response) -> str:
    """GitHub's own `message` (plus validation details) from an error body, when it has one."""
    try:
        data = response.json()
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    text = str(data.get("message") or "")
    details = [
        str(e.get("message") or e.get("code") or "")
        for e in data.get("errors") or []
        if isinstance(e, dict)
    ]
    details = [d for d in details if d]
    return f"{text} ({'; '.join(details)})" if details else text


def _rate_limited(response: httpx.Response) -> bool:
    if response.status_code == 429:
        return True
    return response.status_code == 403 and (
        response.headers.get("x-ratelimit-remaining") == "0"
        or "retry-after" in response.headers
        or "rate limit" in _message(response).lower()
    )


def check_response(response: httpx.Response, what: str, target: Target, token_env: str) -> None:
    """Nothing for a 2xx; otherwise one sentence per cause, saying what to fix."""
    code = response.status_code
    if code < 400:
        return
    where = f"pull request {target.number} of {target.repo}"
    if _rate_limited(response):
        raise MatrixError(
            f"GitHub rate-limited the request to {what} on {where} (HTTP {code}); "
            f"{_reset_time(response)}, or post with a token that has its own quota"
        )
    if code == 401:
        raise MatrixError(
            f"GitHub rejected the token in {token_env} (HTTP 401) while trying to {what}: it is "
            "wrong, expired or revoked; make a new one (in GitHub Actions use "
            "secrets.GITHUB_TOKEN)"
        )
    if code == 403:
        raise MatrixError(
            f"GitHub refused to {what} on {where} (HTTP 403): the token in {token_env} may not "
            "write comments there; grant `pull-requests: write` (workflow `permissions:`, or "
            "the fine-grained token's Pull requests: read and write); a workflow run for a pull "
            "request from a fork only gets a read-only token"
        )
    if code == 404:
        raise InputError(
            f"GitHub found no {where} (HTTP 404) while trying to {what}; check --repo and "
            f"--pr, and that the token in {token_env} can see the repository (a private one "
            "answers 404 to tokens that cannot)"
        )
    if code == 422:
        detail = _message(response) or "no detail given"
        raise InputError(
            f"GitHub refused to {what} on {where} as invalid (HTTP 422: {detail}); fix the "
            "document (too long? not UTF-8?) and post again"
        )
    if code >= 500:
        raise MatrixError(
            f"GitHub failed to {what} on {where} (HTTP {code}, a server-side error); try again "
            "later"
        )
    raise MatrixError(f"GitHub answered HTTP {code} while trying to {what} on {where}")


class _Api:
    """Requests to one API root, with transport failures turned into one sentence."""

    def __init__(self, target: Target, token: str, token_env: str) -> None:
        self.target = target
        self.token_env = token_env
        self.client = httpx.Client(base_url=target.api_url, timeout=30.0, headers=headers(token))

    def request(self, method: str, path: str, what: str, **kwargs: Any) -> Any:
        try:
            response = self.client.request(method, path, **kwargs)
        except httpx.TimeoutException as exc:
            raise MatrixError(
                f"the GitHub API at {self.target.api_url} did not answer within 30 s while "
                f"trying to {what}; try again, or check --api-url / GITHUB_API_URL"
            ) from exc
        except httpx.HTTPError as exc:
            raise MatrixError(
                f"could not reach the GitHub API at {self.target.api_url} to {what} "
                f"({type(exc).__name__}); check --api-url / GITHUB_API_URL and the network"
            ) from exc
        check_response(response, what, self.target, self.token_env)
        try:
            return response.json()
        except ValueError as exc:
            raise MatrixError(
                f"the GitHub API at {self.target.api_url} answered {what} with something that "
                "is not JSON; is --api-url / GITHUB_API_URL the API root (…/api/v3 on "
                "Enterprise Server)?"
            ) from exc

    def close(self) -> None:
        self.client.close()


def find_comment(api: _Api, tag: str) -> dict[str, Any] | None:
    """The first comment whose body starts with `tag`, over every page of the PR's comments
    (a quoted marker inside someone else's comment does not start its body)."""
    t = api.target
    page = 1
    while True:
        comments = api.request(
            "GET",
            f"/repos/{t.repo}/issues/{t.number}/comments",
            "list the pull request's comments",
            params={"per_page": 100, "page": page},
        )
        if not isinstance(comments, list):
            raise MatrixError(
                f"the GitHub API at {t.api_url} did not answer the comment list with a list; "
                "check --api-url / GITHUB_API_URL"
            )
        for c in comments:
            if isinstance(c, dict) and str(c.get("body") or "").startswith(tag):
                return c
        if len(comments) < 100:
            return None
        page += 1


def post_comment(
    body: str,
    *,
    repo: str,
    number: int,
    experiment: str,
    kind: Kind = "verdict",
    token_env: str = "GITHUB_TOKEN",
    api_url: str | None = PUBLIC_API_URL,
) -> Posted:
    """Create or update the experiment's `kind` comment on PR `number` of `repo` (owner/name).
    `api_url` None resolves it from the environment (`resolve_api_url`)."""
    target = Target(repo, number, resolve_api_url(api_url))
    text = comment_text(body, check_key(experiment), kind)
    token = _token(token_env)
    api = _Api(target, token, token_env)
    try:
        existing = find_comment(api, marker(experiment, kind))
        if existing is not None:
            data = api.request(
                "PATCH",
                f"/repos/{repo}/issues/comments/{int(existing['id'])}",
                f"update the {kind} comment",
                json={"body": text},
            )
            updated = True
        else:
            data = api.request(
                "POST",
                f"/repos/{repo}/issues/{number}/comments",
                f"create the {kind} comment",
                json={"body": text},
            )
            updated = False
    finally:
        api.close()
    url = data.get("html_url", "") if isinstance(data, dict) else ""
    return Posted(str(url), updated=updated)
