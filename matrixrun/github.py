"""Post a verdict document on a pull request as one comment, and update that same comment when
the experiment runs again (so a PR carries one current verdict, not a pile of stale ones).

The comment is found by a hidden marker naming the experiment. GitHub's REST API: list
`GET /repos/{repo}/issues/{number}/comments` (paginated), create `POST` there, update
`PATCH /repos/{repo}/issues/comments/{id}`. The token comes from an environment variable and
never reaches a message or a log.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import httpx

from matrixrun.errors import InputError, MatrixError

API_URL = "https://api.github.com"
COMMENT_LIMIT = 65536


def marker(experiment: str) -> str:
    return f"<!-- matrixrun:{experiment} -->"


@dataclass(frozen=True)
class Posted:
    url: str
    updated: bool


def _client(api_url: str, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=api_url.rstrip("/"),
        timeout=30.0,
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "matrixrun",
        },
    )


def _check(response: httpx.Response, what: str) -> None:
    if response.status_code in (401, 403):
        raise MatrixError(
            f"GitHub refused to {what} (HTTP {response.status_code}); check that the token "
            "can write pull-request comments on this repository"
        )
    if response.status_code == 404:
        raise InputError(f"GitHub found no such repository or pull request while trying to {what}")
    if response.status_code >= 400:
        raise MatrixError(f"GitHub answered HTTP {response.status_code} while trying to {what}")


def post_comment(
    body: str,
    *,
    repo: str,
    number: int,
    experiment: str,
    token_env: str = "GITHUB_TOKEN",
    api_url: str = API_URL,
) -> Posted:
    """Create or update the experiment's comment on PR `number` of `repo` (owner/name)."""
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise InputError(f"--repo {repo!r} is not owner/name")
    token = os.environ.get(token_env)
    if not token:
        raise InputError(f"no GitHub token: export {token_env}=<token> (or pass --token-env)")
    tag = marker(experiment)
    text = f"{tag}\n{body}"
    if len(text) > COMMENT_LIMIT:
        raise InputError(
            f"the report is {len(text)} characters, over GitHub's {COMMENT_LIMIT}; re-render it "
            "(the renderer trims to fit) or post a shorter template"
        )
    with _client(api_url, token) as client:
        existing = None
        page = 1
        while existing is None:
            response = client.get(
                f"/repos/{repo}/issues/{number}/comments",
                params={"per_page": 100, "page": page},
            )
            _check(response, "list the pull request's comments")
            comments = response.json()
            existing = next((c for c in comments if tag in (c.get("body") or "")), None)
            if len(comments) < 100:
                break
            page += 1
        if existing is not None:
            response = client.patch(
                f"/repos/{repo}/issues/comments/{existing['id']}", json={"body": text}
            )
            _check(response, "update the verdict comment")
            return Posted(str(response.json().get("html_url", "")), updated=True)
        response = client.post(f"/repos/{repo}/issues/{number}/comments", json={"body": text})
        _check(response, "create the verdict comment")
        return Posted(str(response.json().get("html_url", "")), updated=False)
