"""URL credentials whose password holds '@': the last '@' ends the userinfo, so no piece of
the password may reach a record, a log line or the vast tooling's output."""

from __future__ import annotations

import json

import pytest

from rl_harness.cli import main
from rl_harness.devops.vast.credentials import Redactor, url_has_credentials
from rl_harness.harness.redaction import redact_url, redact_urls

# Built at run time: the library's saved patch (a dirty checkout) holds this source, not these.
PIECES = ["Pa55" + "enOdrow"[::-1], "s3cr" + "owTtee"[::-1], "x9Q" + "eerhTzz"[::-1]]
PASSWORD = "@".join(PIECES)
HOST_PATH = "git.example.com/lab/exp.git"
CLEAN = f"https://{HOST_PATH}"
REMOTES = {
    "user_and_password": f"https://alice:{PASSWORD}@{HOST_PATH}",
    "token_only": f"https://{PASSWORD}@{HOST_PATH}",
}

# A recipe whose result and failure carry the remote URL (as a push helper's would).
LEAKY = """
import subprocess

def run(context):
    url = subprocess.run(
        ["git", "-C", str(context.experiment_dir), "remote", "get-url", "origin"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    print(f"pushing to {url}", flush=True)
    if context.smoke:
        raise RuntimeError(f"could not push results to {url}")
    return {"pushed_to": url}
"""


def assert_no_piece(text: str, where: object) -> None:
    for piece in PIECES:
        assert piece not in text, (piece, where)


@pytest.mark.parametrize("name", sorted(REMOTES))
def test_redact_url_drops_the_whole_userinfo(name):
    url = REMOTES[name]
    assert redact_url(url) == CLEAN
    assert (
        redact_urls(f"fetch {url} failed; retry {url}?x=1")
        == f"fetch {CLEAN} failed; retry {CLEAN}?x=1"
    )
    # The vast tooling prints through the same redaction and refuses such URLs.
    assert Redactor()(f"cloning {url}") == f"cloning {CLEAN}"
    assert url_has_credentials(url)


@pytest.mark.parametrize("name", sorted(REMOTES))
def test_no_piece_of_the_password_reaches_a_record_or_the_output(name, git_repo, capsys):
    repo, git = git_repo
    git("remote", "add", "origin", REMOTES[name])
    leaf = repo / "study" / "leaf" / "experiment.py"
    leaf.parent.mkdir(parents=True)
    leaf.write_text(LEAKY)
    git("add", "-A")
    git("commit", "-qm", "leaky recipe")

    assert main([str(leaf)]) == 0
    assert main([str(leaf), "--smoke"]) == 1  # the failing run: error.txt, error message
    printed = capsys.readouterr()

    written = [p for p in leaf.parent.rglob("*") if p.is_file() and p != leaf]
    assert {p.name for p in written} >= {"run_manifest.json", "result.json", "error.txt"}
    for path in written:
        assert_no_piece(path.read_text(errors="replace"), path)
    # The library's own lines (stdout holds the recipe's print, which is the recipe's to
    # print); the failure's message and traceback go to stderr through the redaction.
    assert_no_piece("\n".join(x for x in printed.out.splitlines() if x.startswith("[")), "stdout")
    assert_no_piece(printed.err, "stderr")
    assert f"could not push results to {CLEAN}" in printed.err

    manifests = [json.loads(p.read_text()) for p in written if p.name == "run_manifest.json"]
    assert [m["experiment_repo"]["remote_url"] for m in manifests] == [CLEAN] * 2
    results = [json.loads(p.read_text()) for p in written if p.name == "result.json"]
    assert results == [{"pushed_to": CLEAN}]
