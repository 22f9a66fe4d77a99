"""`matrixrun post` against a local stand-in for GitHub's REST API (real HTTP on loopback: the
real GitHub is not reachable from tests)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent


class FakeGitHub(BaseHTTPRequestHandler):
    comments: ClassVar[list[dict[str, Any]]] = []
    seen_auth: ClassVar[list[str]] = []

    def _send(self, code: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length", 0))
        return dict(json.loads(self.rfile.read(length)))

    def do_GET(self) -> None:
        self.seen_auth.append(self.headers.get("Authorization", ""))
        if self.headers.get("Authorization") != "Bearer s3cret":
            return self._send(401, {"message": "Bad credentials"})
        if self.path.startswith("/repos/o/r/issues/7/comments"):
            query = parse_qs(urlsplit(self.path).query)
            page = int(query.get("page", ["1"])[0])
            return self._send(200, self.comments[(page - 1) * 100 : page * 100])
        return self._send(404, {"message": "Not Found"})

    def do_POST(self) -> None:
        if self.path == "/repos/o/r/issues/7/comments":
            c = {"id": 1000 + len(self.comments), "body": self._body()["body"]}
            c["html_url"] = f"https://github.example/o/r/pull/7#issuecomment-{c['id']}"
            self.comments.append(c)
            return self._send(201, c)
        return self._send(404, {"message": "Not Found"})

    def do_PATCH(self) -> None:
        for c in self.comments:
            if self.path == f"/repos/o/r/issues/comments/{c['id']}":
                c["body"] = self._body()["body"]
                return self._send(200, c)
        return self._send(404, {"message": "Not Found"})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def github() -> Iterator[str]:
    FakeGitHub.comments = [{"id": i, "body": f"unrelated {i}"} for i in range(150)]
    FakeGitHub.seen_auth = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGitHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def post(run_dir: Path, api: str, token: str | None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin"}
    if token is not None:
        env["GH_TEST_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "matrixrun", "post", str(run_dir), "--repo", "o/r", "--pr", "7",
         "--token-env", "GH_TEST_TOKEN", "--api-url", api],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env=env, check=False,
    )  # fmt: skip


def test_post_creates_then_updates_one_comment(tmp_path: Path, github: str) -> None:
    (tmp_path / "plan.json").write_text(json.dumps({"experiment": "glm5-cutedsl"}))
    (tmp_path / "report.md").write_text("# verdict one\n")
    first = post(tmp_path, github, "s3cret")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("posted https://github.example/o/r/pull/7#issuecomment-")
    (tmp_path / "report.md").write_text("# verdict two\n")
    second = post(tmp_path, github, "s3cret")
    assert second.returncode == 0, second.stderr
    assert second.stdout.startswith("updated ")
    ours = [c for c in FakeGitHub.comments if "matrixrun:glm5-cutedsl" in c["body"]]
    assert len(ours) == 1 and "# verdict two" in ours[0]["body"]
    assert len(FakeGitHub.comments) == 151  # found past the first page, not posted twice


def test_bad_token_and_missing_token_are_one_sentence(tmp_path: Path, github: str) -> None:
    (tmp_path / "report.md").write_text("# v\n")
    bad = post(tmp_path, github, "wrong")
    assert bad.returncode == 1 and "refused" in bad.stderr and "wrong" not in bad.stderr
    missing = post(tmp_path, github, None)
    assert missing.returncode == 2 and "export GH_TEST_TOKEN" in missing.stderr
