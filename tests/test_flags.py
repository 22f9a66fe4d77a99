"""Server flags checked against the engine's real flags (issue 19): shipped lists, --help parsing,
the ast extraction, and `matrixrun validate` end to end. No network, no engine installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from matrixrun.flags import check_file
from matrixrun.flags.check import check_spec
from matrixrun.flags.helptext import parse_help
from matrixrun.flags.model import FlagSet
from matrixrun.flags.recipes import sglang_flags, vllm_flags
from matrixrun.flags.shipped import shipped, shipped_versions
from matrixrun.spec import load_spec, parse_spec, read_spec

ROOT = Path(__file__).resolve().parent.parent
FAKE_SGLANG = ROOT / "tests" / "fake_sglang"


@pytest.fixture(autouse=True)
def _shipped_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests decide the flag source themselves; a developer's installed engine must not."""
    monkeypatch.setenv("MATRIXRUN_FLAGS", "shipped")


def mr(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "matrixrun", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "MATRIXRUN_FLAGS": "shipped", **(env or {})},
    )


def spec_text(engine: str, arms: str, extra: str = "") -> str:
    return (
        "experiment: t\ntitle: flags\nmodel: {path: /m}\n"
        "hardware: {gpu: NVIDIA H200, count: 1, args: {tp: 1}}\n"
        f"engine: {engine}\narms:\n{arms}{extra}"
    )


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- shipped lists


def test_shipped_lists_cover_current_releases() -> None:
    assert shipped_versions("sglang") and shipped_versions("vllm")
    sg = shipped("sglang")
    vl = shipped("vllm")
    assert sg is not None and vl is not None
    assert len(sg.flags) > 300 and len(vl.flags) > 200
    moe = sg.lookup("--moe-runner-backend")
    assert moe is not None and moe.choices is not None
    assert {"flashinfer_cutlass", "flashinfer_cutedsl"} <= set(moe.choices)
    tp = sg.lookup("--tensor-parallel-size")
    assert tp is not None and tp.name == "--tp-size" and tp.type == "int"
    attn = sg.lookup("--attention-backend")
    assert attn is not None and attn.choices and "triton" in attn.choices
    prefix = vl.lookup("--no-enable-prefix-caching")
    assert prefix is not None and prefix.negatable and vl.is_negative("--no-enable-prefix-caching")
    assert vl.lookup("--tensor-parallel-size") is not None


def test_flag_list_json_round_trips(tmp_path: Path) -> None:
    sg = shipped("sglang")
    assert sg is not None
    sg.dump(tmp_path / "x.json")
    assert FlagSet.load(tmp_path / "x.json").to_json() == sg.to_json()


# ------------------------------------------------------------------------ validate, SGLang


def test_typo_in_an_arm_flag_fails_with_line_and_did_you_mean(tmp_path: Path) -> None:
    text = (ROOT / "spec/glm5_cutedsl.yaml").read_text()
    bad = write(
        tmp_path,
        text.replace(
            "{moe_runner_backend: flashinfer_cutedsl}", "{moe_runner_backnd: flashinfer_cutedsl}"
        ),
    )
    res = mr("validate", str(bad))
    assert res.returncode == 2, res.stdout
    assert (
        f"{bad}:12: arms.flashinfer_cutedsl.moe_runner_backnd: 'moe_runner_backnd' renders "
        "--moe-runner-backnd, which sglang"
    ) in res.stderr
    assert "did you mean 'moe_runner_backend', --moe-runner-backend?" in res.stderr


def test_committed_spec_checks_clean_and_says_against_what() -> None:
    res = mr("validate", "spec/glm5_cutedsl.yaml")
    assert res.returncode == 0, res.stderr
    newest = shipped_versions("sglang")[-1]
    assert f"flags checked against sglang {newest}" in res.stdout


def test_values_choices_types_and_switches(tmp_path: Path) -> None:
    arms = (
        "  a: {moe_runner_backend: flashinfer_cutlas}\n"
        "  b: {chunked_prefill_size: big, enable_torch_compile: 1, mem_fraction_static: true}\n"
        "  c: {port: 31000, tp_siz: 2}\n"
    )
    path = write(tmp_path, spec_text("{kind: sglang, args: {tp: 8}}", arms))
    errors = {i.key: i for i in check_file(read_spec(path)).errors}
    assert errors["arms.a.moe_runner_backend"].line == 7
    assert "did you mean 'flashinfer_cutlass'?" in errors["arms.a.moe_runner_backend"].message
    assert "'big' is not an integer" in errors["arms.b.chunked_prefill_size"].message
    assert "switch that takes no value" in errors["arms.b.enable_torch_compile"].message
    assert "takes a value (float)" in errors["arms.b.mem_fraction_static"].message
    assert "set by matrixrun" in errors["arms.c.port"].message
    assert "did you mean 'tp', --tp-size?" in errors["arms.c.tp_siz"].message
    assert "engine.args.tp" not in errors and "hardware.args.tp" not in errors
    assert len(errors) == 6


def test_sweep_values_are_checked_one_by_one(tmp_path: Path) -> None:
    extra = "sweep: {server.chunked_prefill_size: [4096, lots], concurrency: [1]}\n"
    path = write(tmp_path, spec_text("{kind: sglang}", "  a: {}\n  b: {}\n", extra))
    (issue,) = check_file(read_spec(path)).errors
    assert issue.key == "sweep.server.chunked_prefill_size.1" and issue.line == 9
    assert "'lots' is not an integer" in issue.message


def test_deprecated_flag_is_a_warning_with_the_new_name(tmp_path: Path) -> None:
    path = write(
        tmp_path, spec_text("{kind: sglang}", "  a: {}\n  b: {disable_cuda_graph: true}\n")
    )
    result = check_file(read_spec(path))
    assert not result.errors
    (warning,) = result.warnings
    assert "deprecated" in warning.message and "--cuda-graph-backend" in warning.message
    res = mr("validate", str(path))
    assert res.returncode == 0 and "warning:" in res.stderr


# -------------------------------------------------------------------------- validate, vLLM


def test_vllm_aliases_and_negative_booleans(tmp_path: Path) -> None:
    arms = (
        "  a: {no_enable_prefix_caching: true, max_num_seqs: 8, compilation_config.mode: 3}\n"
        "  b: {enable_prefix_caching: false, no_enable_prefix_cachng: true}\n"
    )
    path = write(tmp_path, spec_text("{kind: vllm}", arms))
    result = check_file(read_spec(path))
    (error,) = result.errors
    assert error.key == "arms.b.no_enable_prefix_cachng"
    assert "did you mean 'no_enable_prefix_caching'" in error.message
    assert not result.warnings  # `false` on a --x/--no-x switch renders --no-x (issue 28)
    assert "vllm" in result.summary


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_false_on_a_negatable_switch_renders_its_no_form(tmp_path: Path, kind: str) -> None:
    """Issue 28: `false` on a BooleanOptionalAction switch was omitted, leaving a default-on
    feature on; the launch now carries `--no-x`, and a plain store_true `false` stays omitted."""
    from matrixrun.engines import for_spec
    from matrixrun.flags import negatable_for
    from matrixrun.plan import expand

    switch, plain = (
        ("enable_prefix_caching", "disable_log_stats")
        if kind == "vllm"
        else ("enable_fused_qk_norm_rope", "disable_cuda_graph_padding")
    )
    arms = f"  a: {{{switch}: false, {plain}: false}}\n  b: {{{switch}: true}}\n"
    path = write(tmp_path, spec_text(f"{{kind: {kind}}}", arms))
    spec = load_spec(path)
    engine = for_spec(spec.engine, negatable_for(spec.engine))
    argv = {g.arm: engine.launch(g, "127.0.0.1", 1).argv for g in expand(spec).groups}
    option = "--" + switch.replace("_", "-")
    assert "--no-" + option[2:] in argv["a"] and option not in argv["a"]
    assert "--" + plain.replace("_", "-") not in " ".join(argv["a"])
    assert option in argv["b"] and "--no-" + option[2:] not in argv["b"]
    # and the report's "flags as given" shows what ran
    from matrixrun.report.given import given_flags

    group_a = next(g for g in expand(spec).groups if g.arm == "a")
    assert given_flags(group_a, argv["a"])[switch] == "--no-" + option[2:]


# ------------------------------------------------------------------------- not checked


def test_pinned_version_not_shipped_says_not_checked(tmp_path: Path) -> None:
    path = write(
        tmp_path, spec_text("{kind: sglang, version: 0.0.1}", "  a: {bogus: 1}\n  b: {}\n")
    )
    res = mr("validate", str(path))
    assert res.returncode == 0, res.stderr
    assert "flags NOT checked: no flag list is shipped for sglang 0.0.1" in res.stdout


def test_openai_and_command_without_help_are_not_checked(tmp_path: Path) -> None:
    for engine in (
        "{kind: openai, base_url: 'http://x:1'}",
        "{kind: command, launch: [s, '{port}']}",
    ):
        spec = parse_spec(spec_text(engine, "  a: {bogus: 1}\n  b: {}\n"))
        report = check_spec(spec)
        assert report.issues == [] and report.checked == [] and report.unchecked


def test_pinned_shipped_version_is_used(tmp_path: Path) -> None:
    version = shipped_versions("vllm")[0]
    spec = parse_spec(spec_text(f"{{kind: vllm, version: '{version}'}}", "  a: {}\n  b: {}\n"))
    report = check_spec(spec)
    assert report.checked == [f"vllm {version} (shipped list, engine.version)"]


# ------------------------------------------------------------------------- --help sources


FAKE_HELP = [sys.executable, str(FAKE_SGLANG / "sglang" / "launch_server.py"), "--help"]


def test_parse_help_of_a_real_argparse_parser() -> None:
    text = subprocess.run(FAKE_HELP, capture_output=True, text=True, check=True).stdout
    fs = parse_help(text, "sglang", None, "test")
    tp = fs.lookup("--tensor-parallel-size")
    assert tp is not None and tp.names == ("--tp-size", "--tensor-parallel-size")
    assert tp.takes == "one"
    moe = fs.lookup("--moe-runner-backend")
    assert moe is not None and moe.choices == ("auto", "triton", "flashinfer_cutlass")
    local = fs.lookup("--enable-local-only")
    assert local is not None and local.takes == "none"
    tf32 = fs.lookup("--no-enable-tf32-matmul")
    assert tf32 is not None and tf32.negatable and tf32.name == "--enable-tf32-matmul"
    lora = fs.lookup("--lora-paths")
    assert lora is not None and lora.takes == "many"
    kv = fs.lookup("--kv-offload")
    assert kv is not None and kv.takes == "optional"
    old = fs.lookup("--disable-old-thing")
    assert old is not None and old.deprecated == "use --new-thing-backend=disabled instead"
    new = fs.lookup("--new-thing-backend")  # mentions a deprecated flag, is not one
    assert new is not None and new.deprecated is None and new.choices == ("auto", "disabled")
    assert fs.lookup("--help") is None


def test_help_command_is_the_source_for_kind_command(tmp_path: Path) -> None:
    engine = (
        "{kind: command, launch: [srv, '{port}'], help_command: ["
        + ", ".join(f"'{a}'" for a in FAKE_HELP)
        + "]}"
    )
    arms = "  a: {enable_local_only: true}\n  b: {moe_runner_backend: flashinfer_cutedsl}\n"
    path = write(tmp_path, spec_text(engine, arms))
    result = check_file(read_spec(path))
    # The command engine renders without aliases, so `tp` is `--tp`, which this server lacks.
    assert {e.key for e in result.errors} == {"arms.b.moe_runner_backend", "hardware.args.tp"}
    assert "--help (engine.help_command" in result.summary


def test_installed_sglang_is_found_without_importing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unpinned, the target is the newest shipped release (the same on a laptop, a GPU node
    and CI): an installed sglang of another (here unknown) version is named, not used, so a
    flag only that build has is reported."""
    monkeypatch.delenv("MATRIXRUN_FLAGS")
    monkeypatch.setenv("PYTHONPATH", str(FAKE_SGLANG))
    engine = f"{{kind: sglang, launch: ['{sys.executable}', -m, sglang.launch_server]}}"
    spec = parse_spec(spec_text(engine, "  a: {enable_local_only: true}\n  b: {bogus: 1}\n"))
    report = check_spec(spec)
    assert [i.loc[-1] for i in report.issues] == ["enable_local_only", "bogus"]
    assert "newest shipped list" in report.checked[0]
    assert "the installed one is of unknown version" in report.checked[0]


def test_installed_sglang_of_the_pinned_version_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pinned version with no shipped list is checked against an installed engine of exactly
    that version (its distribution metadata says so), and against nothing otherwise."""
    site = tmp_path / "site"
    (site / "sglang-0.0.7.dist-info").mkdir(parents=True)
    (site / "sglang-0.0.7.dist-info" / "METADATA").write_text("Name: sglang\nVersion: 0.0.7\n")
    monkeypatch.delenv("MATRIXRUN_FLAGS")
    monkeypatch.setenv("PYTHONPATH", f"{FAKE_SGLANG}{os.pathsep}{site}")
    launch = f"launch: ['{sys.executable}', -m, sglang.launch_server]"
    arms = "  a: {enable_local_only: true}\n  b: {bogus: 1}\n"
    report = check_spec(parse_spec(spec_text(f"{{kind: sglang, version: 0.0.7, {launch}}}", arms)))
    assert [i.loc for i in report.issues] == [("arms", "b", "flags", "bogus")]
    assert report.checked[0].startswith("sglang 0.0.7 --help")
    other = check_spec(parse_spec(spec_text(f"{{kind: sglang, version: 0.0.8, {launch}}}", arms)))
    assert other.issues == [] and "no sglang 0.0.8 is installed" in other.unchecked[0]


def test_installed_vllm_on_path_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`vllm serve --help=all` of a `vllm` console script on PATH (here: argparse in a script)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "vllm"
    exe.write_text(
        f"#!{sys.executable}\n"
        "import argparse, sys\n"
        "assert sys.argv[1:] == ['serve', '--help=all'], sys.argv\n"
        "p = argparse.ArgumentParser(prog='vllm serve')\n"
        "p.add_argument('--tensor-parallel-size', '-tp', type=int)\n"
        "p.add_argument('--enable-prefix-caching', action=argparse.BooleanOptionalAction)\n"
        "p.print_help()\n"
    )
    exe.chmod(0o755)
    site = tmp_path / "site"  # the installed vllm is the newest shipped release: its --help wins
    newest = shipped("vllm")
    assert newest is not None
    (site / f"vllm-{newest.version}.dist-info").mkdir(parents=True)
    (site / "vllm").mkdir()  # findable as a package (never imported: only its metadata is read)
    (site / "vllm" / "__init__.py").write_text("")
    (site / f"vllm-{newest.version}.dist-info" / "METADATA").write_text(
        f"Name: vllm\nVersion: {newest.version}\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.delenv("MATRIXRUN_FLAGS")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    arms = "  a: {no_enable_prefix_caching: true}\n  b: {max_num_seqs: 8}\n"
    report = check_spec(parse_spec(spec_text("{kind: vllm}", arms)))
    assert [i.loc for i in report.issues] == [("arms", "b", "flags", "max_num_seqs")]
    assert f"the vllm at {exe}" in report.checked[0]


def test_container_launch_is_never_started_for_help() -> None:
    engine = "{kind: sglang, launch: [docker, run, img, python3, -m, sglang.launch_server]}"
    report = check_spec(parse_spec(spec_text(engine, "  a: {}\n  b: {}\n")))
    assert "newest shipped list" in report.checked[0]


# --------------------------------------------------------------------------- extraction


SGLANG_FIELDS = """
from sglang.srt.arg_groups.choices import BACKENDS
class Exec(msgspec.Struct):
    tp_size: A[int, Arg(help="tp", aliases=["--tensor-parallel-size"])] = 1
    moe_runner_backend: A[str, Arg(help="moe", choices=BACKENDS)] = "auto"
    mode: A[Literal["a", "b"], "literal"] = "a"
    paths: A[Optional[List[str]], "list"] = None
    fast: A[bool, "switch"] = False
    size: A[Optional[int], Arg(help="h", type_parser=human_readable_int)] = None
    hidden: A[int, Arg(help="x", no_cli=True)] = 0
    tf32: A[Optional[bool], Arg(help="t", action=argparse.BooleanOptionalAction)] = None
    plain: int = 0
"""
SGLANG_CHOICES = 'BACKENDS = ["auto", "triton"]\nOTHER = BACKENDS + ["x"]\n'
SGLANG_SERVER_ARGS = """
class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--sampling-backend", type=str, choices=OTHER)
        parser.add_argument("--reasoning-parser", choices=["auto"] + dynamic())
        parser.add_argument("--old", action=DeprecatedStoreTrueAction, new_flag="--new")
        parser.add_argument("--gone", action=DeprecatedAction, error_message="use --other")
"""


def test_sglang_extraction_follows_the_declaration_shapes() -> None:
    fs = sglang_flags(
        {
            "sglang/srt/arg_groups/fields/exec_.py": SGLANG_FIELDS,
            "sglang/srt/arg_groups/choices.py": SGLANG_CHOICES,
            "sglang/srt/server_args.py": SGLANG_SERVER_ARGS,
        },
        "9.9",
        "test",
    )
    got = {f.name: f for f in fs.flags}
    assert got["--tp-size"].names == ("--tp-size", "--tensor-parallel-size")
    assert got["--tp-size"].type == "int"
    assert got["--moe-runner-backend"].choices == ("auto", "triton")
    assert got["--mode"].choices == ("a", "b")
    assert got["--paths"].takes == "many" and got["--paths"].type == "str"
    assert got["--fast"].takes == "none"
    assert got["--size"].type is None  # a custom parser (1K, 2M): not checked as int
    assert "--hidden" not in got and "--plain" not in got
    assert got["--tf32"].negatable
    assert got["--sampling-backend"].choices == ("auto", "triton", "x")
    assert got["--reasoning-parser"].choices is None  # partly dynamic: unchecked, not wrong
    assert got["--old"].deprecated == "use --new instead" and not got["--old"].fatal
    assert got["--gone"].fatal


VLLM_CONFIG = """
Mode = Literal["x", "y"]
@config
class SubConfig:
    a: int = 1
@config
class ModelConfig:
    max_model_len: int = 0
    seed: int | None = None
    mode: Mode = "x"
    enforce_eager: bool = False
    names: list[str] | None = None
    sub: SubConfig = None
    ratio: float = 0.9
"""
VLLM_ARG_UTILS = """
def _compute_kwargs(cls):
    human_readable_int_args = {"seed"}
    if name == "max_model_len":
        pass
class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        model_kwargs = get_kwargs(ModelConfig)
        g = parser.add_argument_group("m")
        g.add_argument("--max-model-len", **model_kwargs["max_model_len"])
        g.add_argument("--seed", **model_kwargs["seed"])
        g.add_argument("--mode", **model_kwargs["mode"])
        g.add_argument("--enforce-eager", **{**model_kwargs["enforce_eager"], "default": None})
        g.add_argument("--names", **model_kwargs["names"])
        g.add_argument("--sub-config", "-sc", **model_kwargs["sub"])
        g.add_argument("--gpu-ratio", **model_kwargs["ratio"])
        parser.add_argument("--enable-log-requests", action=argparse.BooleanOptionalAction)
"""


def test_vllm_extraction_follows_get_kwargs() -> None:
    fs = vllm_flags(
        {"vllm/config/model.py": VLLM_CONFIG, "vllm/engine/arg_utils.py": VLLM_ARG_UTILS},
        "9.9",
        "test",
    )
    got = {f.name: f for f in fs.flags}
    # vLLM's own parsers: max_model_len takes "auto" (unchecked), a human_readable_int "8k"
    assert got["--max-model-len"].type is None and got["--seed"].type == "human_int"
    assert got["--mode"].choices == ("x", "y")
    assert got["--enforce-eager"].negatable and got["--enforce-eager"].takes == "none"
    assert got["--names"].takes == "many"
    assert got["--sub-config"].names == ("--sub-config", "-sc")
    assert got["--sub-config"].type == "json"
    assert got["--gpu-ratio"].type == "float"
    assert got["--enable-log-requests"].negatable


def test_generator_script_reads_a_wheel_without_installing_it(tmp_path: Path) -> None:
    """scripts/flag_lists.py on a wheel-shaped zip (what `pip download` gives): only the
    declaring files are read, the version comes from the file name."""
    import zipfile

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import flag_lists
    finally:
        sys.path.pop(0)
    wheel = tmp_path / "vllm-9.9.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("vllm/config/model.py", VLLM_CONFIG)
        zf.writestr("vllm/engine/arg_utils.py", VLLM_ARG_UTILS)
        zf.writestr("vllm/entrypoints/llm.py", "this is not python that would parse (")
    fs = flag_lists.flag_set("vllm", wheel)
    assert fs.version == "9.9.0" and fs.engine == "vllm"
    assert "(2 files)" in fs.origin
    assert fs.lookup("--mode") is not None


def test_a_help_command_that_fails_means_not_checked(tmp_path: Path) -> None:
    engine = f"{{kind: sglang, help_command: ['{sys.executable}', -c, 'raise SystemExit(3)']}}"
    report = check_spec(parse_spec(spec_text(engine, "  a: {bogus: 1}\n  b: {}\n")))
    assert report.issues == [] and report.checked == []
    assert "could not be run: exited 3" in report.unchecked[0]


def test_a_flag_an_older_shipped_release_had_says_so() -> None:
    """sglang 0.5.22 has --speculative-skip-dp-mlp-sync, 0.5.23 dropped it."""
    old, new = shipped("sglang", "0.5.22"), shipped("sglang", "0.5.23")
    assert old is not None and new is not None
    assert old.lookup("--speculative-skip-dp-mlp-sync") is not None
    assert new.lookup("--speculative-skip-dp-mlp-sync") is None
    engine = "{kind: sglang, version: 0.5.23}"
    spec = parse_spec(spec_text(engine, "  a: {speculative_skip_dp_mlp_sync: true}\n  b: {}\n"))
    (issue,) = check_spec(spec).issues
    assert "sglang 0.5.22 had it (removed or renamed since)" in issue.message
    pinned_old = parse_spec(
        spec_text(
            "{kind: sglang, version: 0.5.22}",
            "  a: {speculative_skip_dp_mlp_sync: true}\n  b: {}\n",
        )
    )
    assert check_spec(pinned_old).issues == []
