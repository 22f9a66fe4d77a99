"""Secrets out of everything matrixrun writes: one set of rules for files, logs and comments.

A run directory is meant to be shared (attached to a PR, posted as a comment), but a spec may
give a server an API key as a flag (`engine.args: {api_key: ...}`), servers echo their
arguments back (`/server_info`), log lines and error messages quote command lines, and URLs
can carry a password. Anything whose *name* says secret (`api_key`, `--api-key`, `HF_TOKEN`,
`*_SECRET`, `*_PASSWORD`) has its value replaced by `***`, and so does any *value* that looks
like a credential on its own (a URL's password, `Bearer …`, `sk-…`, `ghp_…`, `hf_…`).

The name rule is anchored at the end of the name on purpose: `max_total_tokens`,
`tokenizer_path` and `ssl_keyfile` are not secrets and must stay readable (the old rule,
"contains key or token", hid `--max-total-tokens 4096`).

`redact_argv`, `redact_text` and `redact_json` are the whole interface; the report renders
user and server strings through `redact_text` (see docs/reliability.md for where).
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

MASK = "***"

#: A name whose value is a secret: its last word is one of these.
_SECRET_NAME = re.compile(
    r"(?:^|[^a-z0-9])(?:api[_-]?key|key|token|secret|password|passwd|pwd|credentials?|auth)$"
)

#: Values that are credentials wherever they appear.
_VALUE_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # scheme://user:password@host -> scheme://user:***@host
    (re.compile(r"(?P<pre>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/:@]*:)[^\s/@]+(?=@)"), r"\g<pre>***"),
    (re.compile(r"(?i)(?P<pre>\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\g<pre>***"),
    (re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}"), MASK),
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{16,}"), MASK),
    (re.compile(r"\bhf_[A-Za-z0-9]{16,}"), MASK),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), MASK),
]

#: `name=value`, `name: value`, `"name": "value"`, `--name value` with a secret-looking name
#: (the space-separated form only for a flag: in prose "password is required" is no secret).
#: A name starts a word: the `-token` of "512-token blocks" is no flag (prose was masked
#: there, depending on which word the previous match had taken). A value ends at a backtick:
#: a report's `HF_TOKEN=***` (masked when it was rendered) keeps its closing backtick when
#: the whole report is redacted again (it lost it, and the code span ran on).
_NAMED = re.compile(
    r"""(?P<pre>(?<![\w.-])(?P<q>["']?)(?P<name>-{0,2}[A-Za-z][A-Za-z0-9_.-]*)(?P=q)"""
    r"""(?P<sep>\s*[=:]\s*|\s+(?=["']?[^\s"'-])))(?P<vq>["']?)(?P<value>[^\s"'`,;}\]]+)"""
)


#: Names that end like a secret but name a token *count* or a special token of a tokenizer
#: (`prefill_ms_per_token`, `max_token`, `eos_token`, `time_to_first_token`), or a cache key.
_NOT_SECRET = re.compile(
    r"(?:per|max|min|num|first|last|next|eos|bos|pad|unk|sep|cls|mask|stop|special|output|"
    r"input|prompt|sort|cache|hash|group|primary|partition)[_-](?:token|key)$"
)


def is_secret_name(name: str) -> bool:
    """Whether a flag, key or variable name says its value is a secret."""
    lowered = name.lower().lstrip("-")
    return bool(_SECRET_NAME.search(lowered)) and not _NOT_SECRET.search(lowered)


def redact_argv(argv: list[str]) -> list[str]:
    """An argv with the values of secret-named flags (`--api-key X`, `--token=X`) and any
    credential-looking argument replaced by `***`; the flags themselves stay."""
    out: list[str] = []
    hide = False
    for arg in argv:
        if hide:
            out.append(MASK)
            hide = False
            continue
        if arg.startswith("-"):
            name, eq, _ = arg.partition("=")
            if is_secret_name(name):
                if eq:
                    out.append(f"{name}={MASK}")
                else:
                    out.append(arg)
                    hide = True
                continue
        out.append(_values(arg))
    return out


def _values(text: str) -> str:
    for pattern, repl in _VALUE_PATTERNS:
        text = pattern.sub(repl, text)
    return text


def redact_text(text: str | None) -> str:
    """Free text (a log tail, an error message, a command line, a report) with every secret
    it can recognise replaced: named values and credential-looking values."""
    if not text:
        return text or ""

    def named(match: re.Match[str]) -> str:
        name, sep = match.group("name"), match.group("sep")
        if not is_secret_name(name) or match.group("value") == MASK:
            return match.group(0)
        if not sep.strip() and not name.startswith("-"):
            return match.group(0)  # "password is required": prose, not `--password X`
        return f"{match.group('pre')}{match.group('vq')}{MASK}"

    return _values(_NAMED.sub(named, text))


def redact_json(obj: Any) -> Any:
    """A JSON-like value with the values of secret-named keys masked (strings and numbers;
    booleans and nulls say nothing) and every string redacted as text. Returns a copy."""
    if isinstance(obj, dict):
        out: dict[Any, Any] = {}
        for key, value in obj.items():
            secret = isinstance(key, str) and is_secret_name(key)
            if secret and isinstance(value, str | int | float) and not isinstance(value, bool):
                out[key] = MASK
            elif secret and isinstance(value, list):
                out[key] = [MASK for _ in value]
            else:
                out[key] = redact_json(value)
        return out
    if isinstance(obj, list):
        return [redact_json(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(redact_json(v) for v in obj)
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


def redact_file(path: Path) -> Path:
    """Rewrite a text file with its secrets redacted, in place and atomically; returns
    `path`. For documents rendered elsewhere (report.md: a field the renderer did not redact
    still never reaches the file `post` sends) and for server logs, whose bodies the servers
    wrote (SGLang prints its whole `ServerArgs`, api_key included). Bytes that are not UTF-8
    are kept as they were."""
    tmp = path.with_name(path.name + ".tmp")
    changed = False
    # line by line: a long run's server log can be far larger than memory should hold
    with (
        path.open(encoding="utf-8", errors="surrogateescape", newline="") as src,
        tmp.open("w", encoding="utf-8", errors="surrogateescape", newline="") as out,
    ):
        for line in src:
            clean = redact_text(line)
            changed = changed or clean != line
            out.write(clean)
    if changed:
        tmp.replace(path)
    else:
        tmp.unlink()
    return path


def redact_logs(logs_dir: Path) -> None:
    """Redact every server log in `logs_dir` (a run directory's logs/): for servers that an
    interrupted run left behind, whose own stop never redacted them."""
    if logs_dir.is_dir():
        for path in sorted(logs_dir.glob("*.log")):
            with contextlib.suppress(OSError):
                redact_file(path)
