"""Redaction by variable name: secret-named env values never reach a run's records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl_harness.cli import main
from rl_harness.harness.redaction import REDACTED, redact_env, secret_values

# One value per word of the secret-name pattern, plus a name that is no secret.
SECRETS = {
    "GH_TOKEN": "ghp_tokenvalue123456",
    "WANDB_API_KEY": "wandb-key-abcdef",
    "DB_PASSWORD": "hunter2hunter2",
    "FTP_PASSWD": "passwd-value-99",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-value-77",
    "GOOGLE_CREDENTIALS": "cred-value-4242",
    "lower_case_token": "lower-token-value",
}
PLAIN = {"EXPERIMENT_NOTE": "visible-note-value"}

LEAKY = """
import os

def run(context):
    names = {names!r}
    raise RuntimeError("login failed: " + " ".join(os.environ[n] for n in names))
"""


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_each_secret_name_is_redacted(name: str):
    environ = {name: SECRETS[name], **PLAIN}
    assert secret_values(environ) == [SECRETS[name]]
    text = f"error: {SECRETS[name]} / {PLAIN['EXPERIMENT_NOTE']}"
    assert redact_env(text, environ) == f"error: {REDACTED} / {PLAIN['EXPERIMENT_NOTE']}"


def test_short_values_are_left_alone():
    # A five-character value would redact ordinary words.
    assert secret_values({"GH_TOKEN": "abcde", "API_KEY": "abcdef"}) == ["abcdef"]


def test_failing_run_keeps_secret_named_values_out_of_manifest_and_logs(
    tmp_path: Path, monkeypatch, capsys
):
    for name, value in {**SECRETS, **PLAIN}.items():
        monkeypatch.setenv(name, value)
    leaf = tmp_path / "study" / "leaky" / "experiment.py"
    leaf.parent.mkdir(parents=True)
    leaf.write_text(LEAKY.format(names=[*SECRETS, *PLAIN]))

    assert main([str(leaf)]) == 1

    (run_dir,) = (leaf.parent / "results").iterdir()
    manifest = json.loads((run_dir / "run_manifest.json").read_text())
    expected = "login failed: " + " ".join([REDACTED] * len(SECRETS) + [PLAIN["EXPERIMENT_NOTE"]])
    assert manifest["status"] == "failed"
    assert manifest["error"]["message"] == expected
    traceback_text = (run_dir / manifest["error"]["traceback_file"]).read_text()
    assert expected in traceback_text
    err = capsys.readouterr().err
    assert expected in err
    for record in (json.dumps(manifest), traceback_text, err):
        for value in SECRETS.values():
            assert value not in record
