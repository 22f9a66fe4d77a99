"""Engines: flag rendering, launch command lines (venv and container prefixes), and the real
launch → health → info → flush → teardown path against real subprocess servers (the simulator
for sglang, a small fake `vllm serve` for vllm and the openai endpoint)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from matrixrun.core.errors import EngineError
from matrixrun.engines import for_spec
from matrixrun.engines.base import ServerProcess, free_port, get_json, post_ok
from matrixrun.engines.openai import OpenAIEngine, RemoteServer
from matrixrun.engines.sglang import ALIASES, SGLangEngine, render_flags, with_container_env
from matrixrun.engines.vllm import VLLMEngine
from matrixrun.plan import ServerGroup
from matrixrun.spec import EngineSpec, HardwareSpec, ModelSpec

ROOT = Path(__file__).resolve().parent.parent
FAKE_VLLM = [sys.executable, str(ROOT / "tests" / "fake_vllm.py"), "serve"]

pytestmark = pytest.mark.timeout(120)


def group(
    flags: dict[str, Any] | None = None,
    launch: list[str] | None = None,
    env: dict[str, str] | None = None,
    tokenizer: str | None = None,
) -> ServerGroup:
    return ServerGroup(
        group_id="g1", arm="cand", slice="s",
        model=ModelSpec(path="/models/m", tokenizer=tokenizer),
        hardware=HardwareSpec(gpu="NVIDIA H200"), server_axes={}, flags=flags or {},
        launch=launch, env=env or {}, cells=[],
    )  # fmt: skip


# -- flag rendering ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "argv"),
    [
        ({"moe_runner_backend": "flashinfer_cutedsl"},
         ["--moe-runner-backend", "flashinfer_cutedsl"]),
        ({"enable_torch_compile": True}, ["--enable-torch-compile"]),
        ({"enable_torch_compile": False}, []),
        ({"chunked_prefill_size": None}, []),
        ({"mem_fraction_static": 0.85}, ["--mem-fraction-static", "0.85"]),
        ({"cuda_graph_bs": [1, 2, 4]}, ["--cuda-graph-bs", "1", "2", "4"]),
        ({"cuda_graph_bs": []}, []),
        ({"json_model_override_args": {"a": 1, "b": [2]}},
         ["--json-model-override-args", '{"a":1,"b":[2]}']),
        ({"lora_paths": [{"name": "x", "path": "/p"}]},
         ["--lora-paths", '{"name":"x","path":"/p"}']),
        ({"tp": 8, "dp": 2, "pp": 2, "ep": 8},
         ["--tp-size", "8", "--dp-size", "2", "--pp-size", "2", "--ep-size", "8"]),
        ({"tp_size": 4}, ["--tp-size", "4"]),
    ],
)  # fmt: skip
def test_render_flags(flags: dict[str, Any], argv: list[str]) -> None:
    assert render_flags(flags, ALIASES) == argv


def test_flags_keep_spec_order_and_a_list_is_one_flag() -> None:
    argv = render_flags({"b": 1, "a": [3, 4], "c": True})
    assert argv == ["--b", "1", "--a", "3", "4", "--c"]
    assert argv.count("--a") == 1  # nargs="+": a repeated flag would keep only its last value


# -- launch command lines ------------------------------------------------------------------


def test_sglang_launch_default_prefix() -> None:
    launch = SGLangEngine().launch(group({"tp": 2, "moe_runner_backend": "x"}), "127.0.0.1",
                                   30001)  # fmt: skip
    assert launch.argv == [
        sys.executable, "-m", "sglang.launch_server", "--model-path", "/models/m",
        "--host", "127.0.0.1", "--port", "30001", "--tp-size", "2", "--moe-runner-backend", "x",
    ]  # fmt: skip
    assert launch.base_url == "http://127.0.0.1:30001" and launch.port == 30001


def test_sglang_launch_with_a_venv_prefix_and_tokenizer() -> None:
    prefix = ["/opt/sgl-b/bin/python", "-m", "sglang.launch_server"]
    launch = SGLangEngine().launch(group(launch=prefix, env={"SGLANG_X": "1"}, tokenizer="/tok"),
                                   "0.0.0.0", 5)  # fmt: skip
    assert launch.argv[:3] == prefix
    assert launch.argv[3:] == ["--model-path", "/models/m", "--host", "0.0.0.0", "--port", "5",
                               "--tokenizer-path", "/tok"]  # fmt: skip
    assert launch.env == {"SGLANG_X": "1"}


def test_sglang_launch_in_a_container_passes_env_by_name() -> None:
    prefix = ["docker", "run", "--rm", "--gpus", "all", "--network", "host", "--ipc", "host",
              "lmsysorg/sglang:v0.5.2", "python3", "-m", "sglang.launch_server"]  # fmt: skip
    env = {"SGLANG_ENABLE_JIT_DEEPGEMM": "0", "HF_TOKEN": "hf_secret"}
    launch = SGLangEngine().launch(group({"tp": 8}, launch=prefix, env=env), "127.0.0.1", 30000)
    assert launch.argv == [
        "docker", "run", "-e", "SGLANG_ENABLE_JIT_DEEPGEMM", "-e", "HF_TOKEN", "--rm", "--gpus",
        "all", "--network", "host", "--ipc", "host", "lmsysorg/sglang:v0.5.2", "python3", "-m",
        "sglang.launch_server", "--model-path", "/models/m", "--host", "127.0.0.1", "--port",
        "30000", "--tp-size", "8",
    ]  # fmt: skip
    assert "hf_secret" not in " ".join(launch.argv)
    assert launch.env == env  # docker copies the values from its own environment


def test_container_env_only_for_container_clis() -> None:
    assert with_container_env(["/usr/bin/python", "-m", "x"], {"A": "1"}) == (
        ["/usr/bin/python", "-m", "x"], False)  # fmt: skip
    assert with_container_env(["/usr/bin/podman", "run", "img"], {"A": "1"}) == (
        ["/usr/bin/podman", "run", "-e", "A", "img"], True)  # fmt: skip
    assert with_container_env(["docker", "run", "img"], {}) == (["docker", "run", "img"], False)


def test_vllm_launch_argv() -> None:
    launch = VLLMEngine().launch(
        group({"tp": 4, "enable_expert_parallel": True, "no_enable_prefix_caching": True,
               "max_num_seqs": 256, "compilation_config": {"level": 3}}, tokenizer="/tok"),
        "127.0.0.1", 8001,
    )  # fmt: skip
    assert launch.argv == [
        "vllm", "serve", "/models/m", "--host", "127.0.0.1", "--port", "8001",
        "--tokenizer", "/tok", "--tensor-parallel-size", "4", "--enable-expert-parallel",
        "--no-enable-prefix-caching", "--max-num-seqs", "256",
        "--compilation-config", '{"level":3}',
    ]  # fmt: skip


def test_for_spec_picks_each_engine() -> None:
    assert isinstance(for_spec("sglang"), SGLangEngine)
    assert isinstance(for_spec(EngineSpec(kind="vllm")), VLLMEngine)
    eng = for_spec(EngineSpec(kind="openai", base_url="https://api.example.com/v1/"))
    assert isinstance(eng, OpenAIEngine) and eng.base_url == "https://api.example.com"
    assert eng.launches is False and eng.flush_path is None
    with pytest.raises(EngineError, match=r"needs engine\.base_url"):
        for_spec(EngineSpec(kind="openai"))


# -- the real path: launch, health, info, flush, teardown -----------------------------------


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.slow
def test_sglang_engine_on_the_simulator(tmp_path: Path) -> None:
    """The sglang engine's own launch path, with the command pointed at the simulator."""
    slow_start = 2.0
    profile = {"name": "t", "base": {"step_ms": [[1, 2]]},
               "effects": {"slow_start_s": slow_start}}  # fmt: skip
    engine = SGLangEngine([sys.executable, "-m", "matrixrun.sim"],
                          ["--profile-json", json.dumps(profile)])  # fmt: skip
    port = free_port()
    launch = engine.launch(group({"tp": 1, "moe_runner_backend": "cutedsl",
                                  "cuda_graph_bs": [1, 2]}), "127.0.0.1", port)  # fmt: skip
    server = ServerProcess(launch, tmp_path / "logs" / "s.log", tmp_path / "s.pid", name="sim")
    with server:
        assert server.proc is not None
        pgid = server.proc.pid
        # 503 while starting: the port answers but the server cannot generate yet
        codes = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and 200 not in codes:
            with contextlib.suppress(httpx.TransportError):
                url = launch.base_url + engine.health_path
                codes.append(httpx.get(url, timeout=2).status_code)
            time.sleep(0.1)
        assert codes[0] == 503 and codes[-1] == 200, codes
        startup = server.wait_healthy(engine.health_path, timeout_s=30)
        assert startup >= slow_start * 0.9
        info = get_json(launch.base_url, engine.info_paths)
        assert "sim" in (engine.version(info) or "")
        args = engine.effective_args(info)
        assert args["moe_runner_backend"] == "cutedsl" and args["tp_size"] == 1
        assert args["cuda_graph_bs"] == [1, 2]
        assert "version" not in args and "internal_states" not in args
        assert engine.flush_path is not None and post_ok(launch.base_url, engine.flush_path)
        assert (tmp_path / "s.pid").exists()
    assert server.proc.returncode is not None
    deadline = time.monotonic() + 10
    while not _group_gone(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _group_gone(pgid)
    assert not (tmp_path / "s.pid").exists()
    log = (tmp_path / "logs" / "s.log").read_text()
    assert log.startswith("$ ") and "--tp-size 1" in log.splitlines()[0]


@pytest.mark.slow
def test_vllm_engine_launch_health_version_flush(tmp_path: Path) -> None:
    engine = VLLMEngine(FAKE_VLLM)
    port = free_port()
    launch = engine.launch(group({"tp": 2}, env={"VLLM_SERVER_DEV_MODE": "1"}), "127.0.0.1",
                           port)  # fmt: skip
    with ServerProcess(launch, tmp_path / "v.log", name="vllm") as server:
        server.wait_healthy(engine.health_path, timeout_s=30)
        info = get_json(launch.base_url, engine.info_paths)
        assert engine.version(info) == "0.0.0-fake"
        assert engine.effective_args(info) == {}
        seen = httpx.get(launch.base_url + "/argv").json()["argv"]
        assert seen == ["serve", "/models/m", "--host", "127.0.0.1", "--port", str(port),
                        "--tensor-parallel-size", "2"]  # fmt: skip
        assert engine.flush_path is not None and post_ok(launch.base_url, engine.flush_path)


# -- openai: nothing launched, key from the environment, never shown ------------------------


@pytest.fixture
def keyed_endpoint(tmp_path: Path) -> Any:
    """A fake vLLM with --api-key, started directly (it plays someone else's deployment)."""
    port = free_port()
    launch = VLLMEngine(FAKE_VLLM).launch(group({"api_key": "sk-test-123"}), "127.0.0.1", port)
    with ServerProcess(launch, tmp_path / "endpoint.log", name="endpoint") as server:
        server.wait_healthy("/health", timeout_s=30)
        yield launch.base_url


@pytest.mark.slow
def test_openai_engine_uses_the_key_from_the_environment(
    keyed_endpoint: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-test-123"
    monkeypatch.setenv("MR_TEST_KEY", secret)
    engine = for_spec(EngineSpec(kind="openai", base_url=keyed_endpoint + "/v1",
                                 api_key_env="MR_TEST_KEY"))  # fmt: skip
    assert isinstance(engine, OpenAIEngine)
    launch = engine.launch(group(), "ignored", 1)
    assert launch.argv == [] and launch.base_url == keyed_endpoint
    server = engine.serve(launch, name="endpoint")
    assert isinstance(server, RemoteServer)
    with server:
        assert server.wait_healthy(engine.health_path, timeout_s=20, poll_s=0.1) >= 0
        assert server.alive() and server.log_tail() == ""
    assert server.stop() is None
    key = engine.api_key()
    assert key is not None and key.get_secret_value() == secret
    shown = " ".join([repr(engine), str(engine.__dict__), repr(server), str(key), repr(key),
                      repr(launch), caplog.text])  # fmt: skip
    assert secret not in shown and "MR_TEST_KEY" in repr(engine)


@pytest.mark.slow
def test_openai_engine_wrong_key_fails_at_once(
    keyed_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MR_TEST_KEY", "sk-wrong-999")
    engine = OpenAIEngine(keyed_endpoint, "MR_TEST_KEY")
    server = engine.serve(engine.launch(group(), "", 0))
    t0 = time.monotonic()
    with pytest.raises(EngineError, match="HTTP 401") as err:
        server.wait_healthy(engine.health_path, timeout_s=30, poll_s=0.1)
    assert time.monotonic() - t0 < 10
    assert "sk-wrong-999" not in str(err.value)


def test_openai_engine_missing_key_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MR_NOT_SET", raising=False)
    engine = OpenAIEngine("http://127.0.0.1:1", "MR_NOT_SET")
    with pytest.raises(EngineError, match="export MR_NOT_SET="):
        engine.api_key()
    assert OpenAIEngine("http://127.0.0.1:1").api_key() is None
    with pytest.raises(EngineError, match="must be a URL"):
        OpenAIEngine("localhost:8000")


def test_openai_engine_effective_args_lists_models() -> None:
    engine = OpenAIEngine("http://h:1")
    assert engine.effective_args({"data": [{"id": "m1"}, {"id": "m2"}]}) == {
        "served_models": ["m1", "m2"]}  # fmt: skip
    assert engine.version({}) is None
