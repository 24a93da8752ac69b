"""Connecting a run to a real Ray cluster started with `ray start --head` on 127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.harness import recipes

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def stop_process_group(pgid: int, grace_s: float = 30.0) -> None:
    """SIGTERM every process of the group, then SIGKILL what is left after `grace_s`.

    Never `ray stop`: it kills every Ray process on the machine, a researcher's running
    experiment included.
    """
    for signum in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, signum)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_s
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)


@contextmanager
def head_cluster():
    """A head node whose processes (GCS, raylet, workers) all sit in one new process group."""
    ray_bin = Path(sys.executable).parent / "ray"
    if not ray_bin.exists():
        ray_bin = Path(shutil.which("ray") or "ray")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    port = _free_port()
    temp_dir = Path("/tmp") / f"rlh-ray-{port}"  # Ray's socket paths must stay short
    # `ray start` exits once the head is up; its processes stay in the session it led.
    starter = subprocess.Popen(
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
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    pgid = starter.pid
    try:
        out, err = starter.communicate(timeout=180)
        assert starter.returncode == 0, out[-2000:] + err[-2000:]
        yield f"127.0.0.1:{port}", env
    finally:
        stop_process_group(pgid)
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture
def ray_cluster():
    with head_cluster() as cluster:
        yield cluster


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
        [sys.executable, "-m", "rl_harness.cli", str(leaf)],
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


def _head_alive(address: str) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", int(address.rsplit(":", 1)[1]))) == 0


def test_fixture_stops_only_its_own_cluster():
    """Two clusters: stopping the first (as the fixture does) leaves the second running."""
    with head_cluster() as (second, _):
        with head_cluster() as (first, _):
            assert _head_alive(first) and _head_alive(second)
        assert not _head_alive(first)
        assert _head_alive(second)
    assert not _head_alive(second)
