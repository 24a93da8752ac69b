"""The occupancy-control study end to end through the real CLI in smoke mode: each training
leaf, then `synthesis` over their runs. Each run starts Ray, trains one tiny PPO iteration,
evaluates and probes the agent: minutes on 2 cores, so these are `slow`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.image
import pytest
from experiments.mess3_belief_geometry import analysis

from rl_harness import Metric, Results, read_results
from rl_harness.harness.results import is_named
from tests.study.test_belief_geometry_configs import STUDY, TRAINING_LEAVES

CLI = Path(sys.executable).with_name("rl-harness")
REFERENCE_LABELS = {
    "oracle": "oracle (state known)",
    "belief_mdp": "belief-MDP ceiling",
    "stack_3": "best stack-3 found",
    "stack_2": "best stack-2",
    "memoryless": "best memoryless",
}


def smoke(target: str, root: Path, leaf: str, env: dict | None = None) -> Path:
    started = time.perf_counter()
    completed = subprocess.run(
        [
            str(CLI),
            target,
            "--smoke",
            "--run-id",
            "smoke",
            "--results-dir",
            str(root / leaf / "results"),
            "--artifacts-dir",
            str(root / leaf / "artifacts"),
            "--no-upload-artifacts",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=None if env is None else os.environ | env,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    print(f"{leaf} smoke: {time.perf_counter() - started:.1f} s wall")
    return root / leaf / "results" / "smoke"


@pytest.fixture(scope="module")
def study_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    return root, {leaf: smoke(target, root, leaf) for leaf, target in TRAINING_LEAVES.items()}


def _group(result: Results, prefix: str) -> dict[str, float | None]:
    """The values of the metrics named `prefix/...`, by the rest of their name."""
    return {
        name.removeprefix(f"{prefix}/"): metric.value
        for name, metric in result.items()
        if name.startswith(f"{prefix}/")
    }


@pytest.mark.slow
@pytest.mark.parametrize("leaf", sorted(TRAINING_LEAVES))
def test_training_leaf_smoke_writes_its_records(study_runs, leaf):
    _, runs = study_runs
    run_dir = runs[leaf]
    manifest = json.loads((run_dir / "run_manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["options"]["smoke"] is True
    metrics = json.loads((run_dir / "probe_metrics.json").read_text())
    result = read_results(run_dir)  # the named metrics (rl_harness.Results)
    assert is_named(json.loads((run_dir / "result.json").read_text()))
    solvers = json.loads((run_dir / "solver_values.json").read_text())
    assert metrics["recipe"] == leaf and metrics["env_steps"] == 512
    # summary(iterations=) is given the last metrics row's iteration: what run_algorithm
    # returned (algo.iteration, summary.json), which the old summary(RunResult) read.
    rows = (run_dir / "metrics.jsonl").read_text().splitlines()
    last = json.loads(rows[-1])["training_iteration"]
    returned = json.loads((run_dir / "summary.json").read_text())["iterations"]
    assert metrics["training_iterations"] == last == returned == result.value("iterations")
    assert metrics["task"]["observation_delay"] == 1 and metrics["task"]["beta"] == 4.0
    assert metrics["task"]["decision_belief_in_observation"] is (leaf == "belief_observation")
    # The memory yardstick (issue 37): yardstick.json, its agent the analysis' agent probe.
    yardstick = json.loads((run_dir / "yardstick.json").read_text())
    assert yardstick["agent"]["r2_within_branch"] == pytest.approx(
        metrics["probe"]["within_branch"]["r2_pooled"]["value"]
    )
    assert metrics["yardstick"]["file"] == "yardstick.json"
    for report in (
        metrics["probe"],
        metrics["controls"]["untrained_module_probe"],
        metrics["controls"]["observation_probe"],
    ):
        assert report["n_train_episodes"] + report["n_test_episodes"] == 8
        assert report["within_branch"]["k"] == 2
        assert set(report["r2"]) == {f"decision_belief_{i}" for i in range(3)}
    assert metrics["probe"]["permutation"]["n_permutations"] == 10
    # Both nulls state their floor; the within-branch one is the conditional null.
    floor = 1 / 11
    within_null = metrics["probe"]["within_branch"]["permutation"]
    assert metrics["probe"]["permutation"]["p_value_floor"] == pytest.approx(floor)
    assert within_null["p_value_floor"] == pytest.approx(floor)
    assert within_null["statistic"].startswith("within_branch")
    assert floor - 1e-12 <= within_null["p_value"] <= 1.0
    assert result.value("p_value_floor") == pytest.approx(floor)
    # Controls on the agent's own data: same held-out episodes, same resamples.
    assert metrics["schema_version"] == 2
    untrained = metrics["controls"]["untrained_module_probe"]
    assert untrained["n_test_episodes"] == metrics["probe"]["n_test_episodes"]
    assert set(metrics["scores"]) == {"agent", "untrained_module", "observation"}
    agent_scores = metrics["scores"]["agent"]
    assert agent_scores["r2_pooled"]["value"] == pytest.approx(
        metrics["probe"]["r2_pooled"]["value"]
    )
    assert agent_scores["within_branch"]["tokens_2"]["value"] == pytest.approx(
        metrics["probe"]["within_branch"]["r2_pooled"]["value"]
    )
    assert untrained["r2_pooled"]["value"] == pytest.approx(
        metrics["scores"]["untrained_module"]["r2_pooled"]["value"]
    )
    differences = metrics["differences"]
    assert differences["agent_minus_untrained_module"]["r2_pooled"]["value"] == pytest.approx(
        agent_scores["r2_pooled"]["value"] - untrained["r2_pooled"]["value"]
    )
    # Window baselines k = 1..2 beside the agent, and the best one's paired difference.
    windows = metrics["windows"]
    assert windows["ks"] == [1, 2] and len(windows["windows"]) == 2
    assert set(windows["history_worth"]) == {"global", "tokens_2", "tokens_actions_2"}
    best = windows["windows"][differences["best_window_k"] - 1]
    assert differences["agent_minus_best_window"] == best["agent_minus_window"]
    assert set(_group(result, "window_r2_within_branch")) == {"k1", "k2"}
    # The probe's named metric keeps its interval.
    within = metrics["probe"]["within_branch"]["r2_pooled"]
    assert result["probe_r2_within_branch"] == Metric(**within)
    # Memory beyond a window (issue 52 item 1): (a) is the window baseline of the same k.
    incremental = metrics["incremental_r2"]["table"]
    assert incremental["ks"] == [1, 2]
    assert {name.split("/")[0] for name in _group(result, "incremental_r2")} == {"k1", "k2"}
    for row, window in zip(incremental["rows"], windows["windows"], strict=True):
        assert row["window"] == window["window"]
    # Controls on data the agent did not choose (issue 37): the same blocks on its greedy
    # rollouts and on belief-MDP- and random-driven ones, each on its own held-out steps.
    by_data = metrics["controls_by_data"]
    assert set(by_data["data"]) == {"agent_greedy", "belief_mdp", "random"}
    for name in by_data["data"]:
        block = by_data[name]
        assert block["agent_probe"]["n_test_episodes"] == 2
        assert [row["k"] for row in block["tokens_only_windows"]["windows"]] == [1, 2]
        assert "branches_added_by_actions" in block["action_branching"]
    assert by_data["agent_greedy"]["agent_probe"]["r2_pooled"] == metrics["probe"]["r2_pooled"]
    assert {name.split("/")[0] for name in _group(result, "controls_by_data")} == set(
        by_data["data"]
    )
    assert (
        result.value("action_branches_added")
        == (metrics["action_branching"]["branches_added_by_actions"])
    )
    # Every residual; the last is the probed representation, replayed 64 steps per call:
    # the same computation as the agent's own stepping, equal to float rounding (measured
    # 2026-12-07, reward_only smoke: features at most 1.1e-6 apart at std 1.0; the fast
    # tests/analysis/test_replay_steps_per_call.py pins that on greedy play). The smoke probe
    # amplifies it: a 1-iteration agent's 96 final-norm features span ~22 directions (74 of
    # the 384 train steps' singular values < 1e-3 of the largest, condition 1.2e7), and ridge
    # 1e-6 leaves weights of norm ~1e3, so held-out predictions move by up to 2.9e-3 and R²
    # by 0.41% there (0.2095 stepped, 0.2086 replayed); 0-2 ulp of random noise on the
    # stepped features alone moves it by up to 0.55%, and the last session saw 1.6%. Hence
    # 5% here (a wrong layer or wrong steps are far off); trained CPU-budget agents replayed
    # so agree to <= 2.5e-7 (docs/probes.md, "Replayed and stepped representations").
    names = [row["name"] for row in metrics["layers"]]
    assert names == ["embed", "block_1", "block_2", "block_3", "final_norm"]
    assert metrics["layers"][-1]["r2_pooled"] == pytest.approx(
        metrics["probe"]["r2_pooled"], rel=5e-2
    )
    # R² over training: step 0 and the trained agent, the same rollouts replayed through
    # each; with every episode replayed, the final point is the layers' final_norm probe
    # (the same weights, episodes, chunks and split: the same bits) and, as it, the agent's
    # own probe to the rounding above.
    training = metrics["training"]
    assert [c["env_steps"] for c in training["checkpoints"]] == [0, 512]
    assert training["checkpoints"][-1]["r2_pooled"] == metrics["layers"][-1]["r2_pooled"]
    assert training["checkpoints"][-1]["r2_pooled"] == pytest.approx(
        metrics["probe"]["r2_pooled"], rel=5e-2
    )
    # The analysis in timed stages, each announced (issue 53 item 2, issue 50 item 6).
    stages = [x for x in analysis.STAGES if x != "interventions" or "interventions" in metrics]
    assert set(metrics["timings"]["stages_s"]) == set(stages)  # write_json sorts the keys
    assert _group(result, "analysis_timings") == metrics["timings"]["stages_s"]
    assert training["n_episodes"] == 8
    # The solver values: the true ordering of the ceilings, in every record that cites them.
    values = [solvers[key] for key in REFERENCE_LABELS]
    assert values == sorted(values, reverse=True) and solvers["source"].startswith("rl_harness")
    assert {k: result.value(f"solver_values/{k}") for k in REFERENCE_LABELS} == {
        k: solvers[k] for k in REFERENCE_LABELS
    }
    # The plot's reference lines, read back from the drawn figure, are those values.
    assert metrics["learning_curve_references"] == {
        label: solvers[key] for key, label in REFERENCE_LABELS.items()
    }
    returns = _group(result, "return_per_step")
    assert -5.0 < returns["greedy"] <= 1.0 and -5.0 < returns["sampled"] <= 1.0
    assert result.value("fraction_of_belief_mdp/greedy") == pytest.approx(
        returns["greedy"] / solvers["belief_mdp"]
    )
    for name in ("belief_simplex.png", "learning_curve.png", "r2_over_training.png"):
        assert matplotlib.image.imread(run_dir / name).shape[0] > 100
    # Causal belief interventions (issue 30): reward_only and next_token_aux only.
    record_path = run_dir / "interventions.json"
    if leaf == "belief_observation":
        assert not record_path.exists() and not _group(result, "interventions")
    else:
        record = json.loads(record_path.read_text())
        report = record["report"]
        assert record["recipe"] == leaf and report["layers"] == ["block_2", "final_norm"]
        assert set(report["modules"]) == {"agent", "control"} and report["n_test_episodes"] == 2
        assert _group(result, "interventions") == {
            f"{layer}/{edit}/{quantity}": value
            for layer, edits in metrics["interventions"].items()
            if layer != "file"
            for edit, quantities in edits.items()
            for quantity, value in quantities.items()
        }
        corners = report["modules"]["agent"]["final_norm"]["edits"]["corners"]
        headline = _group(result, "interventions/final_norm/corners")
        assert headline["agent"] == corners["belief"]["fraction"]["value"]
        assert matplotlib.image.imread(run_dir / "interventions.png").shape[0] > 100


# What `rl-harness analyze` rewrites of a run (the `analysis` and `result` stages).
ANALYSED = (
    "probe_metrics.json",
    "interventions.json",
    "yardstick.json",
    "solver_values.json",
    "result.json",
)


def without_wall_times(record):
    """A record less what two computations of it may differ in: wall times and timings."""
    if isinstance(record, dict):
        return {
            key: without_wall_times(value)
            for key, value in record.items()
            if key not in ("timings", "analysis_timings")
            and not key.startswith("analysis_timings/")  # result.json's named timings
            and not key.endswith("wall_time_s")
        }
    if isinstance(record, list):
        return [without_wall_times(value) for value in record]
    return record


@pytest.mark.slow
def test_analyze_reruns_the_in_run_analysis_to_the_same_values(study_runs):
    """`rl-harness analyze` on a finished smoke run: the in-run stages recorded their
    provenance, so a second call skips both; --force recomputes every record to the same
    values (bit for bit, wall times aside); a changed input makes only its reader stale."""
    _, runs = study_runs
    run = runs["reward_only"]
    target = f"{STUDY}.reward_only.experiment"

    def analyze(*args: str) -> str:
        completed = subprocess.run(
            [str(CLI), "analyze", target, str(run), *args],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert completed.returncode == 0, completed.stderr[-4000:]
        return completed.stdout

    def records() -> dict:
        return {name: json.loads((run / name).read_text()) for name in ANALYSED}

    in_run = records()
    stages = json.loads((run / "analysis_provenance.json").read_text())["stages"]
    assert list(stages) == ["analysis", "result"]
    assert {"metrics.jsonl", "checkpoint/0", "checkpoint/1"} <= set(stages["analysis"]["inputs"])
    assert list(stages["result"]["inputs"]) == ["probe_metrics.json"]
    assert stages["analysis"]["budget"] == "smoke" and stages["analysis"]["library"]["commit"]

    out = analyze()
    assert "stage analysis: current, skipped" in out and "stage result: current, skipped" in out

    out = analyze("--force")
    assert "stage analysis: running (forced)" in out and "stage result: running (forced)" in out
    again = records()
    for name in ANALYSED:
        assert without_wall_times(again[name]) == without_wall_times(in_run[name]), name
    assert again["probe_metrics.json"]["timings"] != in_run["probe_metrics.json"]["timings"]

    # probe_metrics.json is the result stage's input: edited, only that stage runs again.
    path = run / "probe_metrics.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"analysis_wall_time_s": 0.5}))
    out = analyze()
    assert "stage analysis: current, skipped" in out
    assert "stage result: running (stale: inputs changed: probe_metrics.json)" in out
    assert read_results(run).value("analysis_wall_time_s") == 0.5
    out = analyze("--stage", "result", "--force")
    assert "stage result: running (forced)" in out and "stage analysis" not in out


@pytest.mark.slow
def test_synthesis_smoke_compares_the_arms(study_runs):
    root, runs = study_runs
    run_dir = smoke(
        f"{STUDY}.synthesis.experiment",
        root,
        "synthesis",
        {"MESS3_BELIEF_GEOMETRY_RUNS": str(root)},
    )
    result = read_results(run_dir)
    assert result.value("runs") == len(TRAINING_LEAVES)
    arms = _group(result, "arms")
    assert sorted(arm.rsplit("/", 1)[-1] for arm in arms) == sorted(TRAINING_LEAVES)
    greedy = {
        leaf: read_results(runs[leaf]).value("return_per_step/greedy") for leaf in TRAINING_LEAVES
    }
    by_arm = _group(result, "greedy_return_per_step")
    assert {arm.rsplit("/", 1)[-1]: v for arm, v in by_arm.items()} == (pytest.approx(greedy))
    table = (run_dir / "study_table.md").read_text()
    assert "belief-MDP ceiling" in table and "return_per_step/greedy" in table
    for key in (
        "agent_minus_best_window_within_branch",
        "within_branch_permutation_p_value",
        "window_r2_within_branch/k2",
        "layer_r2_within_branch/final_norm",
        # controls on data the agent did not choose, per data set (issue 37)
        "controls_by_data/belief_mdp/agent_r2_within_branch",
        "controls_by_data/random/agent_minus_best_tokens_window_within_branch",
        "controls_by_data/agent_greedy/action_branches_added",
    ):
        assert key in table
    assert matplotlib.image.imread(run_dir / "comparison.png").shape[0] > 100
