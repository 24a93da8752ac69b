"""B2 settings from the environment: the switch, fallbacks, half-configuration, env files."""

from __future__ import annotations

import pytest

from rl_harness.harness.storage import (
    B2Config,
    StorageConfigError,
    load_b2_config,
    make_s3_client,
    resolve_upload_config,
)
from rl_harness.harness.storage.client import transfer_config

FULL = {
    "B2_BUCKET": "my-bucket",
    "B2_ENDPOINT": "https://s3.us-west-004.backblazeb2.com",
    "B2_APPLICATION_KEY_ID": "0041234567890ab0000000001",
    "B2_APPLICATION_KEY": "K004supersecretapplicationkey",
}


def test_not_configured_without_bucket():
    assert load_b2_config({}) is None
    # The b2 CLI reads the key variables too: they alone must not switch mirroring on.
    keys_only = {k: v for k, v in FULL.items() if k != "B2_BUCKET"}
    keys_only.pop("B2_ENDPOINT")
    assert load_b2_config(keys_only) is None
    assert (
        load_b2_config({"AWS_ACCESS_KEY_ID": "x" * 20, "AWS_SECRET_ACCESS_KEY": "y" * 20}) is None
    )


def test_full_b2_configuration():
    config = load_b2_config({**FULL, "B2_PREFIX": "/lab/rl/"})
    assert config == B2Config(
        bucket="my-bucket",
        endpoint="https://s3.us-west-004.backblazeb2.com",
        key_id=FULL["B2_APPLICATION_KEY_ID"],
        application_key=FULL["B2_APPLICATION_KEY"],
        prefix="lab/rl",
        region="us-west-004",  # taken from the B2 endpoint, so signing matches
    )


def test_endpoint_without_scheme_gets_https():
    config = load_b2_config({**FULL, "B2_ENDPOINT": "s3.eu-central-003.backblazeb2.com/"})
    assert config.endpoint == "https://s3.eu-central-003.backblazeb2.com"
    assert config.region == "eu-central-003"


def test_aws_names_are_fallbacks_and_b2_names_win():
    env = {
        "B2_BUCKET": "b",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_ACCESS_KEY_ID": "aws-key-id-123",
        "AWS_SECRET_ACCESS_KEY": "aws-secret-456",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "RL_HARNESS_B2_ALLOW_HTTP_LOOPBACK": "1",
    }
    config = load_b2_config(env)
    assert (config.endpoint, config.key_id, config.application_key, config.region) == (
        "http://127.0.0.1:9000",
        "aws-key-id-123",
        "aws-secret-456",
        "eu-west-1",
    )
    config = load_b2_config({**env, **FULL, "AWS_ENDPOINT_URL_S3": "http://other:1"})
    assert config.endpoint == FULL["B2_ENDPOINT"]
    assert config.key_id == FULL["B2_APPLICATION_KEY_ID"]
    assert config.application_key == FULL["B2_APPLICATION_KEY"]


def test_half_configured_names_what_is_missing_never_values():
    with pytest.raises(StorageConfigError, match="B2_ENDPOINT") as info:
        load_b2_config({"B2_BUCKET": "b", "B2_APPLICATION_KEY": FULL["B2_APPLICATION_KEY"]})
    message = str(info.value)
    assert "B2_APPLICATION_KEY_ID or AWS_ACCESS_KEY_ID" in message
    assert FULL["B2_APPLICATION_KEY"] not in message
    with pytest.raises(StorageConfigError, match="B2_ENDPOINT set but B2_BUCKET is not"):
        load_b2_config({"B2_ENDPOINT": FULL["B2_ENDPOINT"]})


def test_env_file_is_read_and_overrides_the_shell(tmp_path):
    env_file = tmp_path / "b2.env"
    env_file.write_text(
        "# B2 for the lab\n"
        "export B2_BUCKET=file-bucket\n"
        f"B2_ENDPOINT = '{FULL['B2_ENDPOINT']}'\n"
        f'B2_APPLICATION_KEY_ID="{FULL["B2_APPLICATION_KEY_ID"]}"\n'
        f"B2_APPLICATION_KEY={FULL['B2_APPLICATION_KEY']}\n"
        "\n"
    )
    config = load_b2_config({"RL_HARNESS_B2_ENV_FILE": str(env_file), "B2_BUCKET": "shell"})
    assert config.bucket == "file-bucket"
    assert config.endpoint == FULL["B2_ENDPOINT"]
    assert config.key_id == FULL["B2_APPLICATION_KEY_ID"]
    assert config.application_key == FULL["B2_APPLICATION_KEY"]


def test_env_file_errors_are_clear_and_do_not_echo_lines(tmp_path):
    with pytest.raises(StorageConfigError, match="not a file"):
        load_b2_config({"RL_HARNESS_B2_ENV_FILE": str(tmp_path / "missing.env")})
    bad = tmp_path / "bad.env"
    bad.write_text("B2_BUCKET=b\nK004supersecretapplicationkey\n")
    with pytest.raises(StorageConfigError, match=r"bad.env:2: expected NAME=VALUE") as info:
        load_b2_config({"RL_HARNESS_B2_ENV_FILE": str(bad)})
    assert "K004supersecret" not in str(info.value)


def test_repr_and_str_hide_secrets():
    config = load_b2_config(FULL)
    for text in (repr(config), str(config), f"{config}", str(config.public_dict())):
        assert FULL["B2_APPLICATION_KEY"] not in text
        assert FULL["B2_APPLICATION_KEY_ID"] not in text
        assert "my-bucket" in text


def test_resolve_upload_config_follows_the_cli_flags():
    half = {"B2_BUCKET": "b"}
    assert resolve_upload_config(False, half) is None  # --no-upload-artifacts: not even parsed
    with pytest.raises(StorageConfigError):
        resolve_upload_config(None, half)
    assert resolve_upload_config(None, {}) is None
    with pytest.raises(StorageConfigError, match="--upload-artifacts needs B2 configured"):
        resolve_upload_config(True, {})
    assert resolve_upload_config(True, FULL).bucket == "my-bucket"


def test_client_sends_checksums_only_when_required():
    config = load_b2_config(FULL)
    client = make_s3_client(config)
    assert client.meta.config.request_checksum_calculation == "when_required"
    assert client.meta.config.response_checksum_validation == "when_required"
    assert client.meta.config.retries["mode"] == "standard"
    assert client.meta.endpoint_url == FULL["B2_ENDPOINT"]
    assert client.meta.region_name == "us-west-004"
    transfer = transfer_config(config)
    assert transfer.multipart_threshold == config.multipart_threshold
    assert transfer.multipart_chunksize == config.multipart_chunksize


def test_bad_values_are_rejected():
    with pytest.raises(StorageConfigError, match="http"):
        B2Config(bucket="b", endpoint="ftp://x", key_id="k" * 10, application_key="s" * 10)
    with pytest.raises(StorageConfigError, match="max_workers"):
        B2Config(
            bucket="b",
            endpoint="https://x",
            key_id="k" * 10,
            application_key="s" * 10,
            max_workers=0,
        )


def test_plain_http_only_to_loopback_and_only_when_switched_on():
    env = {**FULL, "B2_ENDPOINT": "http://127.0.0.1:9000"}
    with pytest.raises(StorageConfigError, match="must use https://.*RL_HARNESS_B2_ALLOW_HTTP"):
        load_b2_config(env)
    switched = {**env, "RL_HARNESS_B2_ALLOW_HTTP_LOOPBACK": "1"}
    assert load_b2_config(switched).endpoint == "http://127.0.0.1:9000"
    for host in ("localhost:9000", "[::1]:9000", "127.0.0.2"):
        assert load_b2_config({**switched, "B2_ENDPOINT": f"http://{host}"}).allow_http_loopback
    for host in ("10.0.0.5:9000", "s3.us-west-004.backblazeb2.com", "localhost.evil.com"):
        with pytest.raises(StorageConfigError, match="only to a loopback address"):
            load_b2_config({**switched, "B2_ENDPOINT": f"http://{host}"})
    # The switch changes nothing for https endpoints, and no scheme still means https.
    assert (
        load_b2_config({**FULL, "RL_HARNESS_B2_ALLOW_HTTP_LOOPBACK": "1"}).endpoint
        == (FULL["B2_ENDPOINT"])
    )
