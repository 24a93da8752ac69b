"""A real S3 server (moto, over HTTP on 127.0.0.1) and a fault-injecting proxy in front of it."""

from __future__ import annotations

import threading
import uuid
from http.server import ThreadingHTTPServer

import boto3
import pytest
from botocore.config import Config
from moto.server import ThreadedMotoServer

from rl_harness.harness.storage import B2Config
from tests.storage.s3_fakes import APP_KEY, KEY_ID, FaultProxy, proxy_handler


@pytest.fixture(scope="session")
def moto_endpoint():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def proxy(moto_endpoint):
    host, port = moto_endpoint.removeprefix("http://").split(":")
    state = FaultProxy(upstream=(host, int(port)))
    server = ThreadingHTTPServer(("127.0.0.1", 0), proxy_handler(state))
    server.daemon_threads = True
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def raw_s3(moto_endpoint):
    """A plain client straight to moto, for arranging and inspecting the bucket."""
    return boto3.client(
        "s3",
        endpoint_url=moto_endpoint,
        aws_access_key_id="arrange",
        aws_secret_access_key="arrange",
        region_name="us-east-1",
        config=Config(request_checksum_calculation="when_required"),
    )


@pytest.fixture
def bucket(raw_s3) -> str:
    name = f"rl-{uuid.uuid4().hex[:12]}"
    raw_s3.create_bucket(Bucket=name)
    return name


@pytest.fixture
def config(proxy, bucket) -> B2Config:
    return B2Config(
        bucket=bucket,
        endpoint=f"http://127.0.0.1:{proxy.port}",
        key_id=KEY_ID,
        application_key=APP_KEY,
        prefix="lab/rl",
        max_workers=4,
        multipart_threshold=8 * 1024 * 1024,
        multipart_chunksize=5 * 1024 * 1024,  # S3's smallest part size
        max_attempts=3,
        allow_http_loopback=True,  # moto and the proxy speak plain HTTP on 127.0.0.1
    )


@pytest.fixture
def b2_env(config, monkeypatch) -> dict[str, str]:
    """The process environment configured for `config`, as a researcher would set it."""
    env = {
        "B2_BUCKET": config.bucket,
        "B2_ENDPOINT": config.endpoint,
        "B2_APPLICATION_KEY_ID": KEY_ID,
        "B2_APPLICATION_KEY": APP_KEY,
        "B2_PREFIX": config.prefix,
        "RL_HARNESS_B2_ALLOW_HTTP_LOOPBACK": "1",
    }
    for name in ("RL_HARNESS_B2_ENV_FILE", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env
