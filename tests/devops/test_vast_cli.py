"""The real `rl-harness vast` CLI against the fake vast server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from vast_support import API_KEY, B2_APP_KEY, B2_KEY_ID, git, up_args

from rl_harness.cli.vast import main
from rl_harness.devops.vast.bootstrap import ONSTART, unpack_env
from rl_harness.devops.vast.state import StateFile

_up_args = up_args
_state = StateFile


def test_offers_ranked_and_quarantine_excluded(vast_env, fake_vast, capsys):
    fake_vast.apply_filters = False  # the server ignores our filters: local checks must hold
    assert main(["quarantine", "add", "70", "--reason", "failed twice"]) == 0
    capsys.readouterr()
    assert main(["offers", "--json", "--exclude-machine", "71"]) == 0
    offers = json.loads(capsys.readouterr().out)
    machines = [o["machine_id"] for o in offers]
    assert 70 not in machines and 71 not in machines
    assert machines == [72, 73, 74, 75]  # same dlperf, rising price: best score first
    scores = [o["score"] for o in offers]
    assert scores == sorted(scores, reverse=True)
    assert offers[0]["score"] == pytest.approx(0.98 * 60.0 / 0.40, rel=1e-3)
    query = fake_vast.calls("POST", "/api/v0/bundles/")[-1].body
    assert sorted(query["machine_id"]["notin"]) == [70, 71]
    assert query["reliability"] == {"gte": 0.95} and query["type"] == "on-demand"


def test_offers_filters_reach_the_query(vast_env, fake_vast, capsys):
    args = ["offers", "--gpu-name", "RTX 4090", "--min-gpu-ram", "24", "--max-dph", "0.5"]
    assert main([*args, "--min-cuda", "12.1", "--interruptible", "--disk", "60"]) == 0
    query = fake_vast.calls("POST", "/api/v0/bundles/")[-1].body
    assert query["gpu_name"] == {"eq": "RTX 4090"}
    assert query["gpu_ram"] == {"gte": 24000.0}
    assert query["cuda_max_good"] == {"gte": 12.1}
    assert query["type"] == "bid" and query["disk_space"] == {"gte": 60.0}
    out = capsys.readouterr().out
    assert "0.250" in out  # interruptible boxes are priced at our bid: 1.25 x min_bid


def test_dry_run_prints_the_plan_and_rents_nothing(vast_env, fake_vast, repos, capsys):
    code = main(_up_args(repos, "--seeds", "0-2", "--dry-run"))
    out = capsys.readouterr().out
    assert code == 0, out
    assert fake_vast.creates() == []
    assert "dry run: nothing rented" in out
    assert "$1.050/h for all boxes" in out  # 0.30 + 0.35 + 0.40
    assert "at most $2.10 for --max-hours 2" in out
    for seed in (0, 1, 2):
        assert f"--smoke --seed {seed}" in out
    assert not _state(vast_env).records()


def test_cost_guard_refuses_before_renting(vast_env, fake_vast, repos, capsys):
    code = main(_up_args(repos, "-n", "3", "--max-total-dollars", "2.0"))
    out = capsys.readouterr().out
    assert code == 1
    assert "REFUSED: worst case $2.10" in out
    assert fake_vast.creates() == []


def test_up_status_destroy_cycle(vast_env, fake_vast, repos, capsys):
    assert main(_up_args(repos, "--seeds", "4,9")) == 0
    out = capsys.readouterr().out
    assert out.count("rented instance") == 2
    creates = fake_vast.creates()
    assert [c.path for c in creates] == ["/api/v0/asks/900/", "/api/v0/asks/901/"]
    body = creates[0].body
    assert body["image"] and body["disk"] == 40.0 and body["runtype"] == "ssh"
    assert body["onstart"] == ONSTART and body["label"].startswith("rlh-")
    script = unpack_env(body["env"])
    assert repos.exp_commit in script and repos.lib_commit in script
    assert f"RLH_VAST_URL={fake_vast.url}" in script

    records = _state(vast_env).active()
    assert [r.seed for r in records] == [4, 9]
    assert {r.instance_id for r in records} == set(fake_vast.instances)
    assert all(r.command.endswith(f"--seed {r.seed}") for r in records)
    assert records[0].deadline_at - records[0].created_at == pytest.approx(7200)

    assert main(["status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert [s["vast_status"] for s in status] == ["running", "running"]
    assert all(s["status"] == "active" and not s["overdue"] for s in status)

    # One box destroys itself (gone from vast); status notices.
    gone = records[0].instance_id
    del fake_vast.instances[gone]
    assert main(["status", "--json"]) == 0
    assert [s["instance_id"] for s in json.loads(capsys.readouterr().out)] == [
        records[1].instance_id
    ]
    assert _state(vast_env).records(lambda r: r.instance_id == gone)[0].status == "gone"

    assert main(["destroy", "--all"]) == 0
    assert fake_vast.instances == {}
    assert (records[1].instance_id, "main") in fake_vast.deleted
    assert _state(vast_env).active() == []
    assert main(["status"]) == 0
    assert "no active instances" in capsys.readouterr().out


def test_failed_create_leaves_no_instances(vast_env, fake_vast, repos, capsys):
    fake_vast.fail_creates = {2}
    code = main(_up_args(repos, "-n", "3"))
    printed = capsys.readouterr()
    err = printed.err
    assert code == 1
    assert printed.out.count("rented instance") == 1  # reported as it happened
    assert "launch failed at box 1 of 3" in err and "destroyed the 1 already created" in err
    assert len(fake_vast.creates()) == 2  # stopped at the failure: the third never tried
    assert fake_vast.instances == {}
    assert [d[1] for d in fake_vast.deleted] == ["main"]
    records = _state(vast_env).records()
    assert len(records) == 1 and records[0].status == "destroyed"
    assert "rolled back" in records[0].note


def test_taken_offer_falls_back_to_a_spare(vast_env, fake_vast, repos, capsys):
    fake_vast.gone_offers = {901}
    assert main(_up_args(repos, "-n", "2")) == 0
    assert [c.path for c in fake_vast.creates()] == [
        "/api/v0/asks/900/",
        "/api/v0/asks/901/",
        "/api/v0/asks/902/",
    ]
    assert sorted(r.offer_id for r in _state(vast_env).active()) == [900, 902]


def test_refuses_unpushed_or_dirty_repos(vast_env, fake_vast, repos, capsys):
    (repos.exp / "experiments/demo/leaf/experiment.py").write_text("changed = True\n")
    assert main(_up_args(repos)) == 1
    assert "uncommitted changes" in capsys.readouterr().out
    git(repos.exp, "commit", "-qam", "local only")
    assert main(_up_args(repos)) == 1
    assert "on no remote branch; push it first" in capsys.readouterr().out
    assert fake_vast.creates() == []


def test_secrets_never_leak(vast_env, fake_vast, repos, capsys, monkeypatch):
    monkeypatch.setenv("B2_BUCKET", "my-runs")
    monkeypatch.setenv("B2_ENDPOINT", "https://s3.us-west-004.backblazeb2.com")
    monkeypatch.setenv("B2_APPLICATION_KEY_ID", B2_KEY_ID)
    monkeypatch.setenv("B2_APPLICATION_KEY", B2_APP_KEY)
    assert main(_up_args(repos, "-n", "2", "--forward-b2", "--show-script")) == 0
    assert main(["status"]) == 0
    assert main(["status", "--json"]) == 0
    iid = next(iter(fake_vast.instances))
    fake_vast.logs[iid] = f"box says B2 key is {B2_APP_KEY}\n"
    assert main(["logs", str(iid)]) == 0
    fake_vast.echo_auth_in_errors = True
    monkeypatch.setenv("VAST_API_KEY", API_KEY + "-wrong")
    assert main(["status"]) == 1  # 401 whose message echoes the (wrong) key back
    printed = capsys.readouterr()
    text = printed.out + printed.err
    assert "Invalid user key" in text and "REDACTED" in text

    for secret in (API_KEY, B2_APP_KEY, B2_KEY_ID):
        assert secret not in text, "a secret was printed"
        assert secret not in (vast_env / "instances.json").read_text()
    for create in fake_vast.creates():
        assert API_KEY not in create.raw_body, "the main key was sent to a box"
        script = unpack_env(create.body["env"])
        assert B2_APP_KEY not in script and API_KEY not in script
        # Forwarded only because --forward-b2 was given, and only as env.
        assert create.body["env"]["B2_APPLICATION_KEY"] == B2_APP_KEY
        assert "RLH_UPLOAD_B2=1" in script
    # The key travels only as a header, never in a query string.
    assert all(API_KEY not in json.dumps(r.query) for r in fake_vast.requests)


def test_no_credentials_forwarded_unless_asked(vast_env, fake_vast, repos, monkeypatch):
    monkeypatch.setenv("B2_APPLICATION_KEY", B2_APP_KEY)
    monkeypatch.setenv("GH_TOKEN", "ghp_tokentokentoken123")
    assert main(_up_args(repos)) == 0
    env = fake_vast.creates()[0].body["env"]
    assert set(env) == {"RLH_LABEL"} | {k for k in env if k.startswith("RLH_BOOT_")}


def test_ssh_logs_and_destroy_by_id(vast_env, fake_vast, repos, capsys, tmp_path):
    assert main(_up_args(repos)) == 0
    iid = next(iter(fake_vast.instances))
    key = tmp_path / "id_ed25519.pub"
    key.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBlahBlah me@laptop\n")
    capsys.readouterr()
    assert main(["ssh", str(iid), "--attach-key", str(key), "--print"]) == 0
    out = capsys.readouterr().out
    port = fake_vast.instances[iid]["ssh_port"]
    assert f"ssh -p {port} root@ssh5.vast.example -t" in out and "tmux -L rlh attach" in out
    assert fake_vast.ssh_keys[iid] == [key.read_text().strip()]
    assert main(["logs", str(iid), "--tail", "50"]) == 0
    assert f"log of {iid}" in capsys.readouterr().out
    assert fake_vast.calls("PUT", "/api/v0/instances/request_logs/")[-1].body == {"tail": "50"}
    assert main(["destroy", str(iid)]) == 0
    assert main(["destroy", str(iid)]) == 0  # already gone: fine, recorded as gone
    assert "already gone" in capsys.readouterr().out


def test_overdue_runs_from_vasts_start_time_not_our_clock(vast_env, fake_vast, repos, capsys):
    """--max-hours 2 boxes: the deadline is vast's start_date + 2 h, OVERDUE 15 min later."""
    assert main(_up_args(repos, "-n", "3")) == 0
    late, slow_pull, unbooted = _state(vast_env).active()
    now = time.time()
    fake_vast.start(late.instance_id, now - (2 * 3600 + 16 * 60))  # past deadline + grace
    # Created 3 h ago by our clock, but vast started it (image pulled) only 1 h ago: healthy.
    _state(vast_env).update(slow_pull.instance_id, created_at=now - 3 * 3600)
    fake_vast.start(slow_pull.instance_id, now - 3600)
    fake_vast.instances[unbooted.instance_id]["start_date"] = None  # still loading
    fake_vast.instances[unbooted.instance_id]["actual_status"] = "loading"
    capsys.readouterr()
    assert main(["status", "--json"]) == 0
    status = {s["instance_id"]: s for s in json.loads(capsys.readouterr().out)}
    assert [status[r.instance_id]["overdue"] for r in (late, slow_pull, unbooted)] == [
        True,
        False,
        False,
    ]
    assert status[slow_pull.instance_id]["deadline_in_h"] == pytest.approx(1.0, abs=0.01)
    assert status[unbooted.instance_id]["deadline_in_h"] is None
    assert _state(vast_env).records(lambda r: r.instance_id == late.instance_id)[
        0
    ].started_at == pytest.approx(now - (2 * 3600 + 16 * 60))
    assert main(["status"]) == 0
    assert capsys.readouterr().out.count("OVERDUE") == 1
    assert main(["destroy", "--overdue"]) == 0
    assert set(fake_vast.instances) == {slow_pull.instance_id, unbooted.instance_id}


def test_full_cycle_box_runs_the_onstart_it_was_given(
    vast_env, fake_vast, repos, box_env, tmp_path
):
    """up -> run the exact onstart + env vast received, on this machine -> the box pushes
    results and destroys itself with its scoped key -> status shows nothing left."""
    assert main(_up_args(repos, "--seeds", "7", "--max-hours", "0.05")) == 0
    create = fake_vast.creates()[0]
    (iid,) = fake_vast.instances
    scoped = fake_vast.instances[iid]["scoped_key"]
    env = {**box_env("full", iid, scoped), **create.body["env"]}
    subprocess.run(["sh", "-c", create.body["onstart"]], env=env, check=True, timeout=30)
    deadline = time.monotonic() + 60
    while not fake_vast.deleted and time.monotonic() < deadline:
        time.sleep(0.2)
    assert fake_vast.deleted == [(iid, "scoped")], Path(
        env["RLH_WORK"], "bootstrap.log"
    ).read_text()
    files = git(repos.exp_remote, "ls-tree", "-r", "--name-only", "results").splitlines()
    assert any(f.endswith("run_manifest.json") for f in files)
    assert main(["status", "--json"]) == 0
    assert _state(vast_env).records()[0].status == "gone"


def test_python_m_entry_point(vast_env, fake_vast):
    # `python -m rl_harness.cli vast ...` (the CLI package runs as a module, every command)
    out = subprocess.run(
        [sys.executable, "-m", "rl_harness.cli", "vast", "offers", "--top", "2"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "score = reliability * dlperf / ($/h)" in out.stdout
    assert len(out.stdout.strip().splitlines()) == 4  # header, 2 offers, footer


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["offers", "--bogus"], "unrecognized arguments: --bogus"),
        ([], "the following arguments are required: command"),
        (["logs", "not-a-number"], "invalid int value"),
        (["quarantine", "add"], "quarantine add needs a machine id"),
    ],
)
def test_bad_input_is_one_error_line(vast_env, argv, expected, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err  # no usage dump
    assert err[0].startswith("rl-harness vast") and ": error: " in err[0], err
    assert expected in err[0]
