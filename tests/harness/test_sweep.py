"""`rl-harness sweep`: arms x seeds as child runs with full records; a failed arm does not
stop the others; a rerun does only what is missing; `--then` runs after all completed."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from rl_harness import read_results
from rl_harness.cli import main
from tests.tools.helpers import manifest, run_dirs, write_leaf

GOOD = """
def run(context):
    (context.artifacts_dir / "blob.bin").write_bytes(b"x")
    return {"seed": context.seed, "smoke": context.smoke}
"""
BAD = """
def run(context):
    raise RuntimeError("this arm is broken")
"""
SYNTHESIS = """
from pathlib import Path

def run(context):
    arms = Path(context.experiment_dir).parent / "good" / "results"
    return {"runs_seen": len(list(arms.iterdir()))}
"""


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rl-harness sweep: error: "), err
    return err[0]


def _by_seed(leaf: Path) -> dict[int, list[dict]]:
    found: dict[int, list[dict]] = {}
    for run in run_dirs(leaf):
        record = manifest(run)
        found.setdefault(record["seed"], []).append(record)
    return found


def test_sweep_runs_the_grid_and_a_rerun_does_only_what_is_missing(git_repo, capsys):
    repo, _ = git_repo
    good, bad = write_leaf(repo, GOOD, "good"), write_leaf(repo, BAD, "bad")
    argv = ["sweep", str(good), str(bad), "--seeds", "0", "1", "--smoke"]
    assert main([*argv, "--no-upload-artifacts"]) == 1  # one arm failed
    out = capsys.readouterr().out
    runs = _by_seed(good)
    assert sorted(runs) == [0, 1] and all(len(r) == 1 for r in runs.values())
    for seed, (record,) in runs.items():
        # each run is a CLI run of its own: its records, its argv, the passed-through option
        assert record["status"] == "completed" and record["options"]["smoke"] is True
        assert record["command"]["argv"][1:4] == [str(good), "--seed", str(seed)]
        folder = good.parent / "results" / record["run_id"]
        assert json.loads((folder / "result.json").read_text()) == {"seed": seed, "smoke": True}
        console = good.parent / "artifacts" / record["run_id"] / "console.log"
        assert "completed in" in console.read_text()
        assert f"{record['run_id']}" in out  # the progress table names it
    failed = _by_seed(bad)
    assert sorted(failed) == [0, 1]
    assert {r[0]["status"] for r in failed.values()} == {"failed"}
    assert "this arm is broken" in failed[0][0]["error"]["message"]

    # The same command again: the completed runs are found by their manifests and kept;
    # only the failed arm runs again.
    assert main([*argv, "--no-upload-artifacts"]) == 1
    out = capsys.readouterr().out
    assert out.count("done before") >= 2
    assert {seed: len(r) for seed, r in _by_seed(good).items()} == {0: 1, 1: 1}
    assert {seed: len(r) for seed, r in _by_seed(bad).items()} == {0: 2, 1: 2}

    # Watching-only options do not make another run; other options do: without --smoke
    # seed 0 runs again.
    assert main(["sweep", str(good), "--seeds", "0", "--smoke", "--verbose"]) == 0
    assert {seed: len(r) for seed, r in _by_seed(good).items()} == {0: 1, 1: 1}
    assert main(["sweep", str(good), "--seeds", "0", "--no-upload-artifacts"]) == 0
    assert {seed: len(r) for seed, r in _by_seed(good).items()} == {0: 2, 1: 1}


def test_then_runs_the_synthesis_leaf_after_all_completed(git_repo, capsys):
    repo, _ = git_repo
    good, synthesis = write_leaf(repo, GOOD, "good"), write_leaf(repo, SYNTHESIS, "synthesis")
    code = main(["sweep", str(good), "--seeds", "3", "4", "--then", str(synthesis), "--smoke"])
    assert code == 0
    (run,) = run_dirs(synthesis)
    assert manifest(run)["status"] == "completed" and manifest(run)["options"]["smoke"]
    assert json.loads((run / "result.json").read_text()) == {"runs_seen": 2}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--seed", "3"], "--seed is not a sweep option"),
        (["--no-such-flag"], "unrecognized option --no-such-flag"),
        (["--hardware-profile", "nope"], "unknown hardware profile 'nope'"),
        (["--cpus-per-run", "0"], "--cpus-per-run must be > 0"),
    ],
)
def test_bad_sweep_input_is_one_line(git_repo, capsys, extra, expected):
    repo, _ = git_repo
    good = write_leaf(repo, GOOD, "good")
    assert main(["sweep", str(good), "--seeds", "0", *extra]) == 2
    assert expected in error_line(capsys)
    assert run_dirs(good) == []


def test_a_missing_target_is_one_line(capsys):
    assert main(["sweep", "experiments.no_such.experiment", "--seeds", "0"]) == 2
    assert "cannot find experiment module" in error_line(capsys)


# --- real Ray: the CartPole smoke recipe, 2 seeds, plus a broken arm ------------------------

SMOKE = "experiments.example_study.smoke.experiment"


@pytest.mark.slow
def test_sweep_of_the_cartpole_smoke_recipe_on_local_ray(git_repo, tmp_path, capsys):
    repo, _ = git_repo
    bad = write_leaf(repo, BAD, "bad")
    results, artifacts = tmp_path / "results", tmp_path / "artifacts"
    # Each run starts its own Ray (GCS, raylet, a worker): 2 CPUs each, so on the 2-core test
    # machine they go one at a time (two Ray starts at once timed out under load there).
    argv = ["sweep", SMOKE, str(bad), "--seeds", "0", "1", "--smoke", "--cpus-per-run", "2"]
    argv += ["--results-dir", str(results), "--artifacts-dir", str(artifacts)]
    argv += ["--no-upload-artifacts"]
    assert main(argv) == 1
    records = [manifest(p) for p in results.iterdir()]
    smoke = {r["seed"]: r for r in records if r["experiment"]["module"] == SMOKE}
    assert sorted(smoke) == [0, 1]
    for record in smoke.values():
        folder = results / record["run_id"]
        assert record["status"] == "completed", record.get("error")
        for name in ("config.json", "metrics.jsonl", "summary.json", "result.json"):
            assert (folder / name).is_file(), name
        assert read_results(folder).value("iterations") == 2  # named metrics
        assert (artifacts / record["run_id"] / "ray_logs").is_dir()  # its own Ray
    assert sorted(r["status"] for r in records if r["seed"] in (0, 1)) == [
        "completed",
        "completed",
        "failed",
        "failed",
    ]
    before = len(records)
    assert main(argv) == 1  # the broken arm again, the smoke runs kept
    assert len(list(results.iterdir())) == before + 2


# --- an existing 2-node cluster (`ray start` head + worker on 127.0.0.1) ---------------------


@contextmanager
def two_node_cluster():
    """test_ray_cluster's head node, plus a worker node joined to it (own process group)."""
    from tests.harness.test_ray_cluster import head_cluster, stop_process_group

    ray_bin = Path(sys.executable).parent / "ray"
    with head_cluster() as (address, env):
        worker = subprocess.Popen(
            [
                str(ray_bin),
                "start",
                f"--address={address}",
                "--node-ip-address=127.0.0.1",
                "--num-cpus=1",
                "--disable-usage-stats",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = worker.communicate(timeout=180)
            assert worker.returncode == 0, out[-2000:] + err[-2000:]
            yield address, env
        finally:
            stop_process_group(worker.pid)


@pytest.mark.slow
def test_sweep_on_an_existing_two_node_cluster(git_repo, monkeypatch, capsys):
    repo, _ = git_repo
    good = write_leaf(repo, GOOD, "good")
    with two_node_cluster() as (address, env):
        monkeypatch.setenv("RAY_AUTH_MODE", env["RAY_AUTH_MODE"])
        nodes = subprocess.run(
            [sys.executable, "-c", NODES, address], env=env, capture_output=True, text=True
        )
        assert nodes.stdout.strip() == "2", nodes.stderr[-2000:]
        argv = ["sweep", str(good), "--seeds", "0", "1", "2", "--ray-address", address]
        assert main([*argv, "--smoke", "--no-upload-artifacts"]) == 0
    assert f"on Ray cluster {address}" in capsys.readouterr().out
    runs = _by_seed(good)
    assert sorted(runs) == [0, 1, 2]
    assert all(r[0]["status"] == "completed" and r[0]["options"]["smoke"] for r in runs.values())
    # each child ran with its own local Ray, not as a client of the cluster
    assert all(r[0]["options"]["ray_address"] is None for r in runs.values())


NODES = """
import sys, ray
ray.init(address=sys.argv[1], log_to_driver=False)
print(sum(1 for node in ray.nodes() if node["Alive"]))
"""
