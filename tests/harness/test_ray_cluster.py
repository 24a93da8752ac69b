"""Connecting a run to a real Ray cluster started with `ray start --head` on 127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import recipes

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def ray_cluster(tmp_path: Path):
    ray_bin = Path(sys.executable).parent / "ray"
    if not ray_bin.exists():
        ray_bin = Path(shutil.which("ray") or "ray")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    port = _free_port()
    temp_dir = Path("/tmp") / f"rlh-ray-{port}"  # Ray's socket paths must stay short
    subprocess.run(
        [
            str(ray_bin),
            "start",
            "--head",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            f"--temp-dir={temp_dir}",
            "--disable-usage-stats",
        ],
        env=env,
        check=True,
        capture_output=True,
        timeout=180,
    )
    try:
        yield f"127.0.0.1:{port}", env
    finally:
        subprocess.run([str(ray_bin), "stop", "--force"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_run_connects_to_existing_cluster(ray_cluster, tmp_path: Path):
    address, env = ray_cluster
    leaf = tmp_path / "leaf" / "experiment.py"
    leaf.parent.mkdir()
    leaf.write_text(
        recipes.PPO_TINY + "\nimport ray\n\n_inner = run\n\ndef run(context):\n"
        "    out = _inner(context)\n"
        "    out['gcs_address'] = ray.get_runtime_context().gcs_address\n"
        "    return out\n"
    )
    # RAY_ADDRESS is honoured as well as --ray-address; use the variable here.
    proc = subprocess.run(
        [sys.executable, "-m", "rl_harness.harness.cli", str(leaf)],
        env={**env, "RAY_ADDRESS": address},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = next((leaf.parent / "results").iterdir())
    manifest = json.loads((run_dir / "run_manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert manifest["options"]["ray_address"] == address
    result = json.loads((run_dir / "result.json").read_text())
    # The driver joined the cluster's GCS (Ray reports the node's own IP, same port).
    assert result["iterations"] == 1
    assert result["gcs_address"].rsplit(":", 1)[1] == address.rsplit(":", 1)[1]
