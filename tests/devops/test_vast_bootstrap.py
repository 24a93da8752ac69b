"""The generated bootstrap script, run for real with bash against local git remotes.

Only `uv` is a stand-in (sync/run); git, tmux, curl and the self-destruct call are real,
the latter against the fake vast server with the box's scoped key.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from fake_vast import FakeVast
from vast_support import API_KEY, git

from rl_harness.devops.vast.bootstrap import (
    ONSTART,
    BootstrapParams,
    pack_env,
    render_bootstrap,
    unpack_env,
)

MODULE = "experiments.demo.leaf.experiment"


def _params(fake: FakeVast, repos, label: str, seed: int, **kw) -> BootstrapParams:
    values = dict(
        label=label,
        vast_url=fake.url,
        library_url=str(repos.lib_remote),
        library_commit=repos.lib_commit,
        library_dir="rl-harness",
        experiment_url=str(repos.exp_remote),
        experiment_commit=repos.exp_commit,
        experiment_dir="my-experiments",
        same_repo=False,
        argv=("rl-harness", MODULE, "--seed", str(seed)),
        seed=seed,
        results_branch="results",
        deadline_s=120,
        grace_s=5,
        push_attempts=6,
        retry_sleep_s=0,
        poll_s=0.2,
    )
    values.update(kw)
    return BootstrapParams(**values)


def _register_instance(fake: FakeVast, label: str) -> tuple[int, str]:
    """Rent one instance on the fake server (as `up` would) and return (id, scoped key)."""
    taken = {i["offer_id"] for i in fake.instances.values()}
    offer = next(o for o in fake.offers if o["id"] not in taken)
    status, payload, _ = fake._create(offer["id"], {"label": label, "env": {}})
    assert status == 200
    iid = payload["new_contract"]
    return iid, fake.instances[iid]["scoped_key"]


def _run_box(tmp_path: Path, script: str, env: dict, timeout: float = 60.0):
    path = tmp_path / f"bootstrap-{env['CONTAINER_ID']}.sh"
    path.write_text(script)
    return subprocess.run(
        ["bash", str(path)], env=env, capture_output=True, text=True, timeout=timeout
    )


def _branch_files(remote: Path, branch: str) -> list[str]:
    return git(remote, "ls-tree", "-r", "--name-only", branch).splitlines()


def test_box_clones_siblings_runs_in_tmux_pushes_and_self_destructs(
    tmp_path, fake_vast, repos, box_env
):
    iid, scoped = _register_instance(fake_vast, "rlh-t-0")
    env = box_env("b0", iid, scoped)
    script = render_bootstrap(_params(fake_vast, repos, "rlh-t-0", seed=3))
    assert API_KEY not in script and scoped not in script

    result = _run_box(tmp_path, script, env)
    assert result.returncode == 0, result.stdout + result.stderr

    work = Path(env["RLH_WORK"])
    # Both repos cloned side by side at the recorded commits.
    assert git(work / "rl-harness", "rev-parse", "HEAD") == repos.lib_commit
    calls = [line.split("\t") for line in (work / "stand-in.log").read_text().splitlines()]
    sync, run = calls
    assert run[4] == repos.exp_commit, "the run did not happen at the recorded commit"
    assert sync[0] == str(work / "my-experiments") and sync[3] == "sync --frozen"
    assert run[3] == f"run rl-harness {MODULE} --seed 3"
    assert run[1] == "tmux", "the command did not run inside tmux"
    assert run[2] == "", "the per-instance key leaked into the run's environment"

    # Compact results pushed to the results branch, on top of the recorded commit.
    files = _branch_files(repos.exp_remote, "results")
    manifests = [f for f in files if f.endswith("run_manifest.json")]
    assert len(manifests) == 1 and manifests[0].startswith("experiments/demo/leaf/results/")
    assert not any("artifacts" in f for f in files), "large artifacts must not be pushed"
    assert "vast-logs/rlh-t-0.txt" in files
    summary = git(repos.exp_remote, "show", "results:vast-logs/rlh-t-0.txt")
    assert "status: completed" in summary and "exit_code: 0" in summary
    assert git(repos.exp_remote, "rev-parse", "results~1") == repos.exp_commit

    # Destroyed itself with its own scoped key, not the main key.
    assert fake_vast.deleted == [(iid, "scoped")]
    deletes = fake_vast.calls("DELETE", f"/api/v0/instances/{iid}/")
    assert deletes[0].headers["Authorization"] == f"Bearer {scoped}"
    assert iid not in fake_vast.instances


def test_failed_run_still_pushes_and_self_destructs(tmp_path, fake_vast, repos, box_env):
    iid, scoped = _register_instance(fake_vast, "rlh-t-1")
    secret = "b2-app-key-forwarded-123456"
    env = box_env(
        "b1",
        iid,
        scoped,
        RLH_STANDIN_EXIT="3",
        B2_APPLICATION_KEY=secret,
        RLH_STANDIN_ECHO=f"oops printing {secret}",
    )
    params = _params(
        fake_vast, repos, "rlh-t-1", 1, upload_b2=True, secret_names=("B2_APPLICATION_KEY",)
    )
    result = _run_box(tmp_path, render_bootstrap(params), env)
    assert result.returncode == 1
    # With B2 forwarded, the box finishes mirroring each run it wrote, even a failed one.
    calls = (Path(env["RLH_WORK"]) / "stand-in.log").read_text().splitlines()
    upload = calls[-1].split("\t")[3]
    assert upload.startswith("run rl-harness upload experiments/demo/leaf/results/run-seed1-")
    summary = git(repos.exp_remote, "show", "results:vast-logs/rlh-t-1.txt")
    assert "status: failed" in summary and "exit_code: 3" in summary
    # The published log tail is scrubbed of forwarded secrets.
    assert "oops printing ***REDACTED***" in summary and secret not in summary
    manifest = next(
        f for f in _branch_files(repos.exp_remote, "results") if f.endswith("manifest.json")
    )
    assert json.loads(git(repos.exp_remote, "show", f"results:{manifest}"))["status"] == "failed"
    assert fake_vast.deleted == [(iid, "scoped")]


def test_clone_failure_self_destructs(tmp_path, fake_vast, repos, box_env):
    iid, scoped = _register_instance(fake_vast, "rlh-t-2")
    env = box_env("b2", iid, scoped)
    params = _params(fake_vast, repos, "rlh-t-2", 0, library_commit="f" * 40)
    result = _run_box(tmp_path, render_bootstrap(params), env)
    assert result.returncode == 1
    assert "phase=clone" in result.stdout
    assert fake_vast.deleted == [(iid, "scoped")]


def test_concurrent_pushes_keep_everyones_commits(tmp_path, fake_vast, repos, box_env):
    # Someone else's results are already on the branch; they must stay (no rebase of theirs).
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(repos.exp_remote), str(other))
    (other / "experiments/demo/leaf/results/theirs").mkdir(parents=True)
    (other / "experiments/demo/leaf/results/theirs/run_manifest.json").write_text("{}\n")
    git(other, "add", "-A")
    git(other, "commit", "-q", "-m", "their results")
    git(other, "push", "-q", "origin", "HEAD:refs/heads/results")
    theirs = git(other, "rev-parse", "HEAD")

    boxes = []
    for i in range(3):
        label = f"rlh-c-{i}"
        iid, scoped = _register_instance(fake_vast, label)
        script = render_bootstrap(_params(fake_vast, repos, label, seed=10 + i))
        boxes.append((script, box_env(f"c{i}", iid, scoped)))
    results: list = [None] * len(boxes)

    def go(i: int) -> None:
        results[i] = _run_box(tmp_path, *boxes[i])

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(boxes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    for r in results:
        assert r is not None and r.returncode == 0, r and (r.stdout + r.stderr)

    files = _branch_files(repos.exp_remote, "results")
    seeds = sorted(
        json.loads(git(repos.exp_remote, "show", f"results:{f}")).get("seed", -1)
        for f in files
        if f.endswith("run_manifest.json")
    )
    assert seeds == [-1, 10, 11, 12]  # theirs ({}) plus our three
    assert sum(f.startswith("vast-logs/rlh-c-") for f in files) == 3
    # Their commit is still an ancestor: it was built upon, never rewritten.
    merge_base = subprocess.run(
        ["git", "-C", str(repos.exp_remote), "merge-base", "--is-ancestor", theirs, "results"]
    )
    assert merge_base.returncode == 0
    assert len(git(repos.exp_remote, "rev-list", f"{theirs}..results").splitlines()) == 3
    assert sorted(d[1] for d in fake_vast.deleted) == ["scoped"] * 3


def test_without_tmux_runs_in_foreground(tmp_path, fake_vast, repos, box_env):
    # A PATH holding every tool of /usr/bin and /bin except tmux.
    no_tmux = tmp_path / "no-tmux-bin"
    no_tmux.mkdir()
    for d in ("/usr/local/bin", "/usr/bin", "/bin"):
        for tool in Path(d).iterdir() if Path(d).is_dir() else []:
            link = no_tmux / tool.name
            if tool.name != "tmux" and not link.exists():
                link.symlink_to(tool)
    iid, scoped = _register_instance(fake_vast, "rlh-t-3")
    env = box_env("b3", iid, scoped)
    env["PATH"] = env["PATH"].split(":", 1)[0] + ":" + str(no_tmux)
    result = _run_box(tmp_path, render_bootstrap(_params(fake_vast, repos, "rlh-t-3", 5)), env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "tmux not found" in result.stdout
    run = (Path(env["RLH_WORK"]) / "stand-in.log").read_text().splitlines()[-1].split("\t")
    assert run[1] == "" and run[3].endswith("--seed 5")
    assert fake_vast.deleted == [(iid, "scoped")]


def test_deadline_stops_the_run_and_destroys(tmp_path, fake_vast, repos, box_env):
    iid, scoped = _register_instance(fake_vast, "rlh-t-4")
    env = box_env("b4", iid, scoped, RLH_STANDIN_SLEEP="60")
    params = _params(fake_vast, repos, "rlh-t-4", 0, deadline_s=2, grace_s=20)
    start = time.monotonic()
    result = _run_box(tmp_path, render_bootstrap(params), env, timeout=50)
    elapsed = time.monotonic() - start
    assert elapsed < 20, "the run was not stopped at the deadline"
    assert "deadline (--max-hours) reached" in result.stdout
    summary = git(repos.exp_remote, "show", "results:vast-logs/rlh-t-4.txt")
    assert "status: deadline" in summary
    assert fake_vast.deleted == [(iid, "scoped")]


def test_onstart_reassembles_the_script_from_env_chunks(tmp_path, fake_vast, repos):
    script = render_bootstrap(_params(fake_vast, repos, "rlh-t-5", 0))
    env = pack_env(script)
    assert len(env) > 1 and all(len(v) <= 200 for v in env.values())
    assert unpack_env(env) == script
    work = tmp_path / "w"
    unpack_only = ONSTART.split(" && (nohup")[0]
    subprocess.run(["sh", "-c", unpack_only], env={**os.environ, **env, "RLH_WORK": str(work)})
    assert (work / "bootstrap.sh").read_text() == script


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"library_dir": "../x"}, "bad folder name for a clone: '../x'"),
        ({"results_branch": "a..b"}, r"bad results branch name: 'a\.\.b'"),
    ],
)
def test_params_reject_unsafe_values(fake_vast, repos, bad, match):
    with pytest.raises(ValueError, match=match):
        _params(fake_vast, repos, "rlh-x", 0, **bad)


def test_same_repo_is_cloned_once(tmp_path, fake_vast, repos, box_env):
    # The bundled example: the experiments live inside the library repo itself.
    iid, scoped = _register_instance(fake_vast, "rlh-t-6")
    env = box_env("b6", iid, scoped)
    params = _params(
        fake_vast,
        repos,
        "rlh-t-6",
        2,
        same_repo=True,
        library_url=str(repos.exp_remote),
        library_commit=repos.exp_commit,
        library_dir="my-experiments",
    )
    result = _run_box(tmp_path, render_bootstrap(params), env)
    assert result.returncode == 0, result.stdout + result.stderr
    work = Path(env["RLH_WORK"])
    assert not (work / "rl-harness").exists()
    run = (work / "stand-in.log").read_text().splitlines()[-1].split("\t")
    assert run[0] == str(work / "my-experiments") and run[4] == repos.exp_commit
    assert fake_vast.deleted == [(iid, "scoped")]


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_rendered_script_passes_shellcheck(tmp_path, fake_vast, repos):
    path = tmp_path / "boot.sh"
    path.write_text(render_bootstrap(_params(fake_vast, repos, "rlh-t-7", 0)))
    out = subprocess.run(["shellcheck", "-S", "warning", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout
