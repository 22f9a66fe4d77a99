"""A local stand-in for the part of GitHub's REST API that `matrixrun post` uses: real HTTP on
127.0.0.1 (the real GitHub is not reachable from tests), comments kept in memory, every request
recorded, and any answer forced per method for the error paths."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN = "ghs_Sup3rS3cretT0ken"


@dataclass
class Request:
    method: str
    path: str
    auth: str
    body: dict[str, Any] | None


@dataclass
class Forced:
    status: int
    payload: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class State:
    repo: str = "o/r"
    pr: int = 7
    token: str = TOKEN
    comments: list[dict[str, Any]] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    #: method -> the answer to give every such request instead of the normal one
    forced: dict[str, Forced] = field(default_factory=dict)
    #: the API root's path, as on GitHub Enterprise Server (`/api/v3`); '' for api.github.com
    prefix: str = ""
    url: str = ""

    def ours(self, marker_prefix: str) -> list[dict[str, Any]]:
        return [c for c in self.comments if str(c["body"]).startswith(marker_prefix)]


def _handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _handle(self, method: str) -> None:
            length = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            auth = self.headers.get("Authorization", "")
            state.requests.append(Request(method, self.path, auth, body))
            if method in state.forced:
                f = state.forced[method]
                return self._send(f.status, f.payload, f.headers)
            if auth != f"Bearer {state.token}":
                return self._send(401, {"message": "Bad credentials"})
            path = urlsplit(self.path).path
            if not path.startswith(state.prefix + "/"):
                return self._send(404, {"message": "Not Found"})
            path = path[len(state.prefix) :]
            listing = f"/repos/{state.repo}/issues/{state.pr}/comments"
            if method == "GET" and path == listing:
                query = parse_qs(urlsplit(self.path).query)
                page = int(query.get("page", ["1"])[0])
                per = int(query.get("per_page", ["30"])[0])
                return self._send(200, state.comments[(page - 1) * per : page * per])
            if method == "POST" and path == listing:
                cid = 1000 + len(state.comments)
                c = {
                    "id": cid,
                    "body": (body or {})["body"],
                    "html_url": f"https://github.example/{state.repo}/pull/{state.pr}"
                    f"#issuecomment-{cid}",
                }
                state.comments.append(c)
                return self._send(201, c)
            if method == "PATCH":
                for c in state.comments:
                    if path == f"/repos/{state.repo}/issues/comments/{c['id']}":
                        c["body"] = (body or {})["body"]
                        return self._send(200, c)
            return self._send(404, {"message": "Not Found"})

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def fake_github(unrelated: int = 0, prefix: str = "") -> Iterator[State]:
    """A running stand-in on a free port of 127.0.0.1; `unrelated` other comments first; the
    API under `prefix` (`/api/v3` as on Enterprise Server)."""
    state = State(
        comments=[{"id": i, "body": f"unrelated {i}"} for i in range(unrelated)], prefix=prefix
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def closed_port_url() -> str:
    """An http URL on 127.0.0.1 where nothing listens (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
