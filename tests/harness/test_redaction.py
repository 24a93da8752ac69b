"""No credentials from remote URLs in anything a run writes or prints."""

from __future__ import annotations

import json

import pytest

from rl_harness.cli import main
from rl_harness.devops.vast.credentials import Redactor
from rl_harness.harness.redaction import REDACTED, redact_url, redact_urls

# Built at run time: a dirty checkout's saved patch holds this file's source, not the values.
TOKEN, QUERY_TOKEN = "ghp_" + "TOKENvalue123"[::-1], "QUERY" + "secret987"[::-1]
REMOTE = f"https://alice:{TOKEN}@git.example.com/lab/exp.git?access_token={QUERY_TOKEN}&v=2"
CLEAN_REMOTE = f"https://git.example.com/lab/exp.git?access_token={REDACTED}&v=2"

# A recipe whose result and whose failure both carry the remote URL (as a push or clone
# helper's would); the library writes both, so it must strip the credentials.
LEAKY = """
import subprocess

def run(context):
    url = subprocess.run(
        ["git", "-C", str(context.experiment_dir), "remote", "get-url", "origin"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    if context.smoke:
        raise RuntimeError(f"could not push results to {url}")
    return {"pushed_to": url}
"""


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"https://user:{TOKEN}@github.com/o/r.git", "https://github.com/o/r.git"),
        (f"https://{TOKEN}@github.com/o/r", "https://github.com/o/r"),
        ("ssh://git@host/r.git", "ssh://git@host/r.git"),
        ("ssh://git:pw123456@host/r", "ssh://host/r"),
        ("git@github.com:o/r.git", "git@github.com:o/r.git"),
        (
            "https://h/p?x=1&X-Amz-Signature=abc&token=t",
            f"https://h/p?x=1&X-Amz-Signature={REDACTED}&token={REDACTED}",
        ),
        ("s3://bucket/key/file.pt", "s3://bucket/key/file.pt"),
    ],
)
def test_redact_url(url: str, expected: str):
    assert redact_url(url) == expected


def test_urls_in_text_and_vast_logs_are_redacted():
    line = f"fetch {REMOTE} failed; see https://logs.example.com/x?sig=abcdef"
    expected = f"fetch {CLEAN_REMOTE} failed; see https://logs.example.com/x?sig={REDACTED}"
    assert redact_urls(line) == expected
    # devops/vast prints through its Redactor, which uses the same function.
    assert Redactor("vast-api-key-1234")(line + " vast-api-key-1234") == expected + f" {REDACTED}"


def test_token_bearing_remote_leaks_into_no_record_or_output(git_repo, capsys):
    repo, git = git_repo
    git("remote", "add", "origin", REMOTE)
    leaf = repo / "study" / "leaf" / "experiment.py"
    leaf.parent.mkdir(parents=True)
    leaf.write_text(LEAKY)
    git("add", "-A")
    git("commit", "-qm", "leaky recipe")

    assert main([str(leaf)]) == 0
    assert main([str(leaf), "--smoke"]) == 1  # the failing run: error.txt, error message
    printed = capsys.readouterr()

    written = [p for p in (leaf.parent).rglob("*") if p.is_file() and p != leaf]
    assert {p.name for p in written} >= {"run_manifest.json", "result.json", "error.txt"}
    for path in written:
        text = path.read_text(errors="replace")
        assert TOKEN not in text and QUERY_TOKEN not in text, path
    assert "could not push results to https://git.example.com/lab/exp.git" in printed.err
    for stream in (printed.out, printed.err):
        assert TOKEN not in stream and QUERY_TOKEN not in stream

    manifests = [json.loads(p.read_text()) for p in written if p.name == "run_manifest.json"]
    assert [m["experiment_repo"]["remote_url"] for m in manifests] == [CLEAN_REMOTE] * 2
    results = [json.loads(p.read_text()) for p in written if p.name == "result.json"]
    assert results == [{"pushed_to": CLEAN_REMOTE}]
