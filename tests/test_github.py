"""`matrixrun post` through the real CLI against a local stand-in for GitHub's REST API (real
HTTP on 127.0.0.1: the real GitHub is not reachable from tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakegithub import TOKEN, Forced, State, closed_port_url, fake_github

from matrixrun.publish.github import marker

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "bench_serving"
TINY = ROOT / "tests" / "specs" / "tiny.yaml"


@pytest.fixture
def gh() -> Iterator[State]:
    with fake_github(unrelated=150) as state:
        yield state


def mr(*args: str, token: str | None = TOKEN, **env: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a clean environment: only PATH, the token (GITHUB_TOKEN) and `env`."""
    base = {"PATH": "/usr/bin:/bin"}
    if token is not None:
        base["GITHUB_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "matrixrun", *args],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env={**base, **env}, check=False,
    )  # fmt: skip


def post(
    target: str | Path, api: str | None, *extra: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """`post TARGET --repo o/r --pr 7 [--api-url API] EXTRA` ('' for no TARGET)."""
    args = ["post", *([str(target)] if target else []), "--repo", "o/r", "--pr", "7", *extra]
    if api is not None:
        args += ["--api-url", api]
    return mr(*args, **env)


def one_sentence(res: subprocess.CompletedProcess[str]) -> str:
    """The error, asserted to be one line with no traceback and no token."""
    assert "Traceback" not in res.stderr
    assert TOKEN not in res.stderr + res.stdout
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, res.stderr
    return lines[0]


def ingested(out: Path) -> Path:
    res = mr("ingest", str(GOLDEN / "fast_prefill.jsonl"), str(GOLDEN / "fast_decode.jsonl"),
             "--baseline", "fast_prefill", "--out", str(out))  # fmt: skip
    assert res.returncode == 0, res.stderr
    return out


def test_post_creates_then_updates_one_comment_past_the_first_page(
    tmp_path: Path, gh: State
) -> None:
    (tmp_path / "plan.json").write_text(json.dumps({"experiment": "glm5-cutedsl"}))
    (tmp_path / "report.md").write_text("# verdict one\n")
    first = post(tmp_path, gh.url)
    assert first.returncode == 0, first.stderr
    assert "posted the verdict comment https://github.example/o/r/pull/7#issuecomment-" in (
        first.stdout
    )
    (tmp_path / "report.md").write_text("# verdict two\n")
    second = post(tmp_path, gh.url)
    assert second.returncode == 0, second.stderr
    assert second.stdout.startswith("updated the verdict comment ")
    ours = gh.ours(marker("glm5-cutedsl"))
    assert len(ours) == 1 and "# verdict two" in ours[0]["body"]
    assert len(gh.comments) == 151  # found on the second page, not posted twice
    assert [r.method for r in gh.requests].count("PATCH") == 1


def test_proposal_and_verdict_are_two_comments_each_updated_in_place(
    tmp_path: Path, gh: State
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "plan.json").write_text(json.dumps({"experiment": "tiny"}))
    (run / "report.md").write_text("# the verdict\n")
    for _ in range(2):
        proposal = post("", gh.url, "--plan", str(TINY))
        assert proposal.returncode == 0, proposal.stderr
        verdict = post(run, gh.url)
        assert verdict.returncode == 0, verdict.stderr
    assert "updated the proposal comment" in proposal.stdout
    props = gh.ours(marker("tiny", "proposal"))
    verdicts = gh.ours(marker("tiny"))
    assert len(props) == 1 and len(verdicts) == 1 and len(gh.comments) == 152
    assert "Proposal: tiny" in props[0]["body"] and "moe_runner_backend" in props[0]["body"]
    assert "# the verdict" in verdicts[0]["body"] and "Proposal" not in verdicts[0]["body"]


def test_a_quoted_marker_in_someone_elses_comment_is_not_ours(tmp_path: Path, gh: State) -> None:
    gh.comments.append({"id": 5000, "body": f"> {marker('exp')}\n> quoting the bot"})
    (tmp_path / "plan.json").write_text(json.dumps({"experiment": "exp"}))
    (tmp_path / "report.md").write_text("# v\n")
    res = post(tmp_path, gh.url)
    assert res.returncode == 0 and res.stdout.startswith("posted ")
    assert gh.comments[-2]["body"].startswith("> ")  # left alone


def test_api_url_from_option_else_github_api_url(tmp_path: Path, gh: State) -> None:
    (tmp_path / "plan.json").write_text(json.dumps({"experiment": "e"}))
    (tmp_path / "report.md").write_text("# v\n")
    via_env = post(tmp_path, None, GITHUB_API_URL=gh.url + "/")
    assert via_env.returncode == 0, via_env.stderr
    assert len(gh.requests) >= 2
    # the option wins over the environment (which here points where nothing listens)
    via_option = post(tmp_path, gh.url, GITHUB_API_URL=closed_port_url())
    assert via_option.returncode == 0 and via_option.stdout.startswith("updated ")
    bad = post(tmp_path, "ftp://example")
    assert bad.returncode == 2 and "is not an http(s) URL" in one_sentence(bad)


def test_an_enterprise_server_api_root_with_a_path(tmp_path: Path) -> None:
    (tmp_path / "plan.json").write_text(json.dumps({"experiment": "e"}))
    (tmp_path / "report.md").write_text("# v\n")
    with fake_github(prefix="/api/v3") as ghes:
        for _ in range(2):
            res = post(tmp_path, None, GITHUB_API_URL=ghes.url + "/api/v3")
            assert res.returncode == 0, res.stderr
        assert len(ghes.ours(marker("e"))) == 1
        assert {r.path.split("?")[0] for r in ghes.requests} == {
            "/api/v3/repos/o/r/issues/7/comments",
            "/api/v3/repos/o/r/issues/comments/1000",
        }
        wrong = post(tmp_path, None, GITHUB_API_URL=ghes.url)  # the root without /api/v3
        assert wrong.returncode == 2 and "HTTP 404" in one_sentence(wrong)


def test_unreachable_api_is_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "plan.json").write_text(json.dumps({"experiment": "e"}))
    (tmp_path / "report.md").write_text("# v\n")
    url = closed_port_url()
    res = post(tmp_path, url)
    assert res.returncode == 1
    line = one_sentence(res)
    assert f"could not reach the GitHub API at {url}" in line and "GITHUB_API_URL" in line


RATE = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1893456000"}


@pytest.mark.parametrize(
    ("method", "forced", "code", "says"),
    [
        ("GET", Forced(401, {"message": "Bad credentials"}), 1, "rejected the token in"),
        ("POST", Forced(403, {"message": "Resource not accessible by integration"}), 1,
         "pull-requests: write"),
        ("GET", Forced(404, {"message": "Not Found"}), 2, "check --repo and --pr"),
        ("POST", Forced(422, {"message": "Validation Failed",
                              "errors": [{"message": "body is too long"}]}), 2,
         "body is too long"),
        ("GET", Forced(403, {"message": "API rate limit exceeded"}, RATE), 1,
         "the limit resets at"),
        ("POST", Forced(429, {"message": "slow down"}, {"retry-after": "30"}), 1,
         "retry in 30 s"),
        ("GET", Forced(502, {"message": "bad gateway"}), 1, "try again later"),
    ],
)  # fmt: skip
def test_each_github_refusal_is_one_sentence_saying_what_to_fix(
    tmp_path: Path, gh: State, method: str, forced: Forced, code: int, says: str
) -> None:
    (tmp_path / "plan.json").write_text(json.dumps({"experiment": "e"}))
    (tmp_path / "report.md").write_text("# v\n")
    gh.forced[method] = forced
    res = post(tmp_path, gh.url)
    assert res.returncode == code
    line = one_sentence(res)
    assert says in line and "HTTP" in line
    assert not gh.ours(marker("e"))


def test_wrong_and_missing_token(tmp_path: Path, gh: State) -> None:
    (tmp_path / "plan.json").write_text(json.dumps({"experiment": "e"}))
    (tmp_path / "report.md").write_text("# v\n")
    bad = mr("post", str(tmp_path), "--repo", "o/r", "--pr", "7", "--api-url", gh.url,
             token="wr0ng-t0ken")  # fmt: skip
    assert bad.returncode == 1 and "HTTP 401" in bad.stderr
    assert "wr0ng-t0ken" not in bad.stderr + bad.stdout
    assert gh.requests[-1].auth == "Bearer wr0ng-t0ken"  # it was sent, only in the header
    missing = mr("post", str(tmp_path), "--repo", "o/r", "--pr", "7", "--api-url", gh.url,
                 token=None)  # fmt: skip
    assert missing.returncode == 2 and "export GITHUB_TOKEN" in one_sentence(missing)


def test_dry_run_prints_the_request_and_sends_nothing(tmp_path: Path, gh: State) -> None:
    (tmp_path / "plan.json").write_text(json.dumps({"experiment": "e"}))
    (tmp_path / "report.md").write_text("# the body\n")
    res = post(tmp_path, gh.url, "--dry-run")
    assert res.returncode == 0, res.stderr
    assert gh.requests == []
    assert TOKEN not in res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == f"POST {gh.url}/repos/o/r/issues/7/comments"
    assert "Authorization: Bearer *** (from GITHUB_TOKEN)" in lines
    body = json.loads(next(x for x in lines if x.startswith("{")))
    assert body == {"body": f"{marker('e')}\n# the body\n"}
    unset = mr("post", str(tmp_path), "--repo", "o/r", "--pr", "7", "--dry-run", token=None)
    assert unset.returncode == 0 and "GITHUB_TOKEN is not set" in unset.stdout
    assert "POST https://api.github.com/repos/o/r/issues/7/comments" in unset.stdout


@pytest.mark.slow
def test_ingested_run_keeps_its_comment_across_directories_and_renders_its_report(
    tmp_path: Path, gh: State
) -> None:
    first = ingested(tmp_path / "first")
    (first / "report.md").unlink()  # ingest renders one; post must render it when it is gone
    res = post(first, gh.url)
    assert res.returncode == 0, res.stderr
    assert (first / "report.md").exists() and (first / "verdict.json").exists()
    again = ingested(tmp_path / "elsewhere" / "second")
    res2 = post(again, gh.url)
    assert res2.returncode == 0 and res2.stdout.startswith("updated "), res2.stdout
    key = "ingest.fast_prefill-vs-fast_decode"
    ours = gh.ours(marker(key))
    assert len(ours) == 1 and "fast_decode" in ours[0]["body"]
    assert ours[0]["body"].split("\n", 1)[1] == (again / "report.md").read_text()
    override = post(again, gh.url, "--experiment", "my-exp")
    assert override.returncode == 0 and len(gh.ours(marker("my-exp"))) == 1
    bad = post(again, gh.url, "--experiment", "a b --> c")
    assert bad.returncode == 2 and "cannot name a comment" in one_sentence(bad)
    for f in [*first.rglob("*"), *again.rglob("*")]:
        if f.is_file():
            assert TOKEN not in f.read_text(errors="replace"), f


def test_bad_arguments_are_one_sentence(tmp_path: Path, gh: State) -> None:
    neither = post("", gh.url)
    assert neither.returncode == 2 and "exactly one of them" in one_sentence(neither)
    missing = post(tmp_path / "nope", gh.url)
    assert missing.returncode == 2 and "is not a directory" in one_sentence(missing)
    empty = post(tmp_path, gh.url)
    assert empty.returncode == 2 and "experiment is unknown" in one_sentence(empty)
    (tmp_path / "plan.json").write_text(json.dumps({"experiment": "e"}))
    noresults = post(tmp_path, gh.url)
    assert noresults.returncode == 2 and "no results.jsonl" in one_sentence(noresults)
    badfail = post(tmp_path, gh.url, "--fail-on", "worst")
    assert badfail.returncode == 2 and "worst is not a verdict" in one_sentence(badfail)
    repo = mr("post", str(tmp_path), "--repo", "nope", "--pr", "7", "--api-url", gh.url)
    assert repo.returncode == 2 and "is not owner/name" in one_sentence(repo)
    assert gh.requests == []


def test_fail_on_judges_after_posting(tmp_path: Path, gh: State) -> None:
    (tmp_path / "plan.json").write_text(json.dumps({"experiment": "e"}))
    (tmp_path / "report.md").write_text("# v\n")
    overall = {"b": {"verdict": "worse"}, "c": {"verdict": "mixed"}, "d": {"verdict": "better"}}
    (tmp_path / "verdict.json").write_text(json.dumps({"overall": overall}))
    worse = post(tmp_path, gh.url, "--fail-on", "worse")
    assert worse.returncode == 1 and len(gh.ours(marker("e"))) == 1
    assert "b is worse" in one_sentence(worse) and "c is" not in worse.stderr
    both = post(tmp_path, gh.url, "--fail-on", "worse,mixed")
    assert both.returncode == 1 and "b is worse, c is mixed" in both.stderr
    assert post(tmp_path, gh.url, "--fail-on", "inconclusive").returncode == 0
    assert post(tmp_path, gh.url).returncode == 0
