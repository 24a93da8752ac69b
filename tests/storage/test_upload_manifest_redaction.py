"""`rl-harness upload` rewrites the run manifest redacted, with the B2 keys among the secrets
even when they come from the env file (RL_HARNESS_B2_ENV_FILE), not the environment: a key
anywhere in the manifest never reaches the rewritten file. Real upload to the local S3."""

from __future__ import annotations

import json

from rl_harness.cli import main
from rl_harness.harness.redaction import REDACTED
from tests.storage.s3_fakes import APP_KEY, KEY_ID
from tests.storage.test_storage_cli import fake_run


def test_upload_rewrites_the_manifest_without_keys_from_the_env_file(
    b2_env, tmp_path, monkeypatch, capsys
):
    env_file = tmp_path / "b2.env"
    env_file.write_text("".join(f"{name}={value}\n" for name, value in b2_env.items()))
    for name in b2_env:
        monkeypatch.delenv(name)
    monkeypatch.setenv("RL_HARNESS_B2_ENV_FILE", str(env_file))
    results = fake_run(tmp_path)
    path = results / "run_manifest.json"
    manifest = json.loads(path.read_text())
    manifest["notes"] = f"keys {KEY_ID} {APP_KEY}"  # a leak from before, or by hand
    path.write_text(json.dumps(manifest))
    assert main(["upload", str(results)]) == 0
    text = path.read_text()
    assert json.loads(text)["artifacts"]["remote"]["status"] == "completed"
    assert KEY_ID not in text and APP_KEY not in text
    assert json.loads(text)["notes"] == f"keys {REDACTED} {REDACTED}"
