"""An OpenAI-compatible endpoint that is already running: nothing is launched or stopped.

Use it to measure a deployment someone else manages (a vLLM or SGLang service behind a load
balancer, a hosted API). The spec gives `engine.base_url` and, when the endpoint needs a key,
`engine.api_key_env`: the *name* of an environment variable, read when the run starts, so the
key itself is never in the spec, the run directory, argv, a log line or a repr (it is held as a
`SecretStr`). A base URL ending in `/v1` is accepted and trimmed, since the load client adds
`/v1/completions` itself.

The runner cannot launch, flush or restart such a server, so the engine says `launches = False`
and `flush_path = None`, and `serve()` returns a `RemoteServer`: the same surface as
`ServerProcess` (start, wait_healthy, alive, log_tail, stop, context manager) where start and
stop do nothing and the health wait polls GET `/v1/models` with the key. Arms of such a spec
differ by endpoint, not by flags, so its arms are normally one per `base_url` (run per arm).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import SecretStr

from matrixrun.core.errors import EngineError, StartupTimeout
from matrixrun.core.timescale import REAL, TimeScale
from matrixrun.engines.base import Api, Launch
from matrixrun.plan import ServerGroup

#: How long an existing endpoint may refuse connections before the run says so (a restart).
REFUSED_GRACE_S = 10.0


def normalise_base_url(url: str) -> str:
    """`https://host/v1/` -> `https://host`: the client appends the API paths itself."""
    url = url.rstrip("/")
    return url.removesuffix("/v1")


def read_api_key(env_name: str | None) -> SecretStr | None:
    """The key from the environment variable the spec names; None when no name is given."""
    if not env_name:
        return None
    value = os.environ.get(env_name)
    if not value:
        raise EngineError(
            f"engine.api_key_env names {env_name}, but {env_name} is not set in "
            f"this environment; export {env_name}=<key> before the run"
        )
    return SecretStr(value)


def auth_headers(key: SecretStr | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key.get_secret_value()}"} if key is not None else {}


@dataclass
class RemoteServer:
    """A stand-in for `ServerProcess` when the server is not ours to start or stop."""

    launch: Launch
    name: str = "endpoint"
    api_key: SecretStr | None = field(default=None, repr=False)
    proc: None = None
    startup_s: float | None = None

    def start(self) -> RemoteServer:
        return self

    def alive(self) -> bool:
        return True

    def exit_code(self) -> int | None:
        return None

    def log_tail(self, lines: int = 20) -> str:
        return ""

    def death_cause(self) -> str:
        return ""

    def wait_healthy(self, health_path: str, timeout_s: float, poll_s: float = 1.0) -> float:
        """Poll GET health_path (with the key) until 200; a 401/403 fails at once."""
        url = self.launch.base_url + health_path
        start = time.monotonic()
        with httpx.Client(
            timeout=httpx.Timeout(10.0, connect=5.0), headers=auth_headers(self.api_key)
        ) as client:
            refused_since: float | None = None
            while True:
                try:
                    code = client.get(url).status_code
                except httpx.ConnectError as exc:
                    # nothing listens: an endpoint that is "already running" is not coming
                    # up on its own; a short grace covers a restart, not the startup timeout
                    now = time.monotonic()
                    refused_since = refused_since if refused_since is not None else now
                    if now - refused_since > min(REFUSED_GRACE_S, timeout_s):
                        raise EngineError(
                            f"{self.name}: cannot connect to {url} for "
                            f"{now - refused_since:.0f}s ({exc}); nothing listens there: is "
                            "the endpoint running, and is engine.base_url right?"
                        ) from None
                except httpx.HTTPError:
                    refused_since = None
                else:
                    refused_since = None
                    if code == 200:
                        self.startup_s = time.monotonic() - start
                        return self.startup_s
                    if code in (401, 403):
                        raise EngineError(
                            f"{self.name} refused {url} with HTTP {code}; check "
                            "the key named by engine.api_key_env"
                        )
                if time.monotonic() - start > timeout_s:
                    raise StartupTimeout(
                        f"{self.name} did not answer 200 at {url} within "
                        f"{timeout_s:.0f}s; check engine.base_url"
                    )
                time.sleep(poll_s)

    def stop(self, grace_s: float = 20.0) -> int | None:
        return None

    def __enter__(self) -> RemoteServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class OpenAIEngine:
    name = "openai"
    api: Api = "openai"
    launches = False
    health_path = "/v1/models"
    info_paths: tuple[str, ...] = ("/v1/models",)
    flush_path: str | None = None
    flush_timeout_param: str | None = None
    death_grace_s: float = 1.0
    time_scale: TimeScale = REAL

    def __init__(self, base_url: str, api_key_env: str | None = None) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EngineError(
                f"engine.base_url must be a URL like https://host:8000, got {base_url!r}"
            )
        self.base_url = normalise_base_url(base_url)
        self.api_key_env = api_key_env

    def __repr__(self) -> str:
        return f"OpenAIEngine(base_url={self.base_url!r}, api_key_env={self.api_key_env!r})"

    def api_key(self) -> SecretStr | None:
        return read_api_key(self.api_key_env)

    def launch(self, group: ServerGroup, host: str, port: int) -> Launch:
        """Nothing to run: the 'launch' is the endpoint's address (host/port are ignored)."""
        parts = urlsplit(self.base_url)
        default = 443 if parts.scheme == "https" else 80
        return Launch(argv=[], env={}, base_url=self.base_url, port=parts.port or default)

    def serve(
        self,
        launch: Launch,
        name: str = "endpoint",
        log_path: Path | None = None,
        pid_path: Path | None = None,
    ) -> RemoteServer:
        """Not ours to start: no log, no pid file (both are ignored)."""
        return RemoteServer(launch, name=name, api_key=self.api_key())

    def version(self, info: dict[str, Any]) -> str | None:
        return None

    def effective_args(self, info: dict[str, Any]) -> dict[str, Any]:
        """The served model ids (all an OpenAI endpoint says about itself)."""
        data = info.get("data")
        if isinstance(data, list):
            return {"served_models": [m.get("id") for m in data if isinstance(m, dict)]}
        return {}

    def cell_extras(self, base_url: str, info: dict[str, Any]) -> dict[str, Any]:
        return {}
