"""A stand-in for `vllm serve MODEL --host H --port P [--api-key K] ...`, for engine tests.

Serves what the harness reads from vLLM: GET /health, GET /version ({"version": ...}), GET
/v1/models, and POST /reset_prefix_cache only when VLLM_SERVER_DEV_MODE=1 (404 otherwise, as
vLLM does). With --api-key, /v1/* requires `Authorization: Bearer <key>` (vLLM's rule).
Unknown flags are recorded and echoed by GET /argv so tests can see the rendered command line.
"""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSION = "0.0.0-fake"


def main(argv: list[str]) -> None:
    assert argv[0] == "serve", argv
    model, rest = argv[1], argv[2:]
    host, port, key = "127.0.0.1", 8000, None
    i = 0
    while i < len(rest):
        if rest[i] == "--host":
            host = rest[i + 1]
        elif rest[i] == "--port":
            port = int(rest[i + 1])
        elif rest[i] == "--api-key":
            key = rest[i + 1]
        i += 1
    dev = os.environ.get("VLLM_SERVER_DEV_MODE") == "1"

    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, body: object = None) -> None:
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            authorised = self.headers.get("Authorization") == f"Bearer {key}"
            if self.path.startswith("/v1/") and key is not None and not authorised:
                return self._send(401, {"error": "Unauthorized"})
            if self.path == "/health":
                return self._send(200)
            if self.path == "/version":
                return self._send(200, {"version": VERSION})
            if self.path == "/argv":
                return self._send(200, {"argv": argv})
            if self.path == "/v1/models":
                return self._send(200, {"object": "list", "data": [{"id": model}]})
            return self._send(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            if self.path == "/reset_prefix_cache" and dev:
                return self._send(200)
            return self._send(404, {"detail": "Not Found"})

        def log_message(self, *args: object) -> None:
            pass

    ThreadingHTTPServer((host, port), Handler).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
