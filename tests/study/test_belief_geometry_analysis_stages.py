"""The flagship's in-run analysis in timed stages (issue 53 item 2, issue 50 item 6): one
console line when each stage starts and one when it ends, the seconds of each in
probe_metrics.json and result.json, and every rollout and replay done once and read by every
stage after it, giving exactly the numbers each stage gives when it collects its own. On a
saved untrained agent as a finished smoke run leaves it (no training)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from experiments.mess3_belief_geometry import (
    analysis,
    controls,
    incremental,
    probing,
    report,
    window_capacity,
)
from experiments.mess3_belief_geometry.reward_only import experiment as reward_only

from rl_harness import Results, RunContext
from rl_harness.analysis import load_module, replay_rollouts
from rl_harness.seeding import stream_seed
from tests.study.reward_only_runs import STAGE_RECORDS, untrained_agent, write_finished_run

SEED = 5
PLAN = reward_only.SMOKE


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    root = tmp_path_factory.mktemp("analysed")
    agent, make_env = untrained_agent()
    results, checkpoint = write_finished_run(root, agent, SEED, STAGE_RECORDS)
    context = RunContext(
        experiment_module=reward_only.__name__,
        experiment_dir=Path(reward_only.__file__).parent,
        results_dir=results,
        artifacts_dir=root / "artifacts",
        run_id="run-1",
        seed=SEED,
        smoke=True,
        budget="smoke",
        settings=PLAN,
    )
    return context, checkpoint, make_env


def test_each_stage_says_when_it_starts_and_ends_and_records_its_seconds(analysed, capsys):
    context, _, _ = analysed
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # the run's threads: the fits and chunked replays use them
    try:
        record = analysis.analyze(
            context,
            label="reward_only",
            module_spec=reward_only.module_spec(),
            plan=PLAN,
            interventions=True,
        )
        threads_after = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    lines = capsys.readouterr().out.splitlines()
    timings = record["timings"]
    assert list(timings["stages_s"]) == list(analysis.STAGES)  # every stage, in order
    assert all(seconds >= 0 for seconds in timings["stages_s"].values())
    assert sum(timings["stages_s"].values()) <= timings["total_s"]
    assert record["analysis_wall_time_s"] == timings["total_s"]
    assert timings["torch_threads"] == {
        "stepping": probing.ANALYSIS_TORCH_THREADS,
        "other": 2,  # the run's own threads (set below), restored after
        "stepping_stages": list(analysis.STEPPING),
    }
    assert threads_after == 2
    assert set(timings["stages"]) == set(analysis.STAGES)
    for stage, seconds in timings["stages_s"].items():
        starts = [i for i, x in enumerate(lines) if re.search(rf"\] stage {stage} \(", x)]
        ends = [i for i, x in enumerate(lines) if f"] stage {stage} done in {seconds:.1f} s" in x]
        assert len(starts) == 1 and len(ends) == 1 and starts[0] < ends[0], stage
    on_disk = json.loads((context.results_dir / "probe_metrics.json").read_text())
    assert on_disk["timings"]["stages_s"] == timings["stages_s"]
    summary = analysis.summary(1, record)
    assert {
        name.removeprefix("analysis_timings/"): metric.value
        for name, metric in summary.items()
        if name.startswith("analysis_timings/")
    } == timings["stages_s"]


def test_shared_rollouts_replays_and_windows_give_what_each_stage_computes_alone(analysed):
    context, checkpoint, make_env = analysed
    record = json.loads((context.results_dir / "probe_metrics.json").read_text())
    by_data = record[controls.KEY]
    # The whole block equals the controls replaying and fitting alone (and, for the
    # belief-MDP and random data, collecting alone).
    module = load_module(checkpoint)
    control = probing.untrained_module(
        reward_only.module_spec(), make_env, stream_seed(SEED, "study", "untrained")
    )
    before = torch.get_num_threads()
    try:
        # Threads as analyze had them: acting on one, the replays and fits on the run's (2).
        torch.set_num_threads(probing.ANALYSIS_TORCH_THREADS)
        env = make_env(1)
        settings = probing.rollout_settings(PLAN, SEED, make_env, env.single_action_space)
        env.close()
        greedy = controls.data_set("agent_greedy", module, settings, PLAN)
        torch.set_num_threads(2)
        # The incremental test alone, without the analysis' FitMemo (issue 53 item 2: its
        # windows alone (a) were read from the controls' fits there, not trained again).
        layout = make_env(1).layout
        probe = incremental.agent_probe(greedy, layout, PLAN, SEED)
        branching = controls.action_branching(
            greedy.observations[..., layout.tokens],
            greedy.observations[..., layout.actions],
            probe.train_episodes,
            probe.test_episodes,
        )
        incremental_alone = incremental.measure(
            greedy,
            replay_rollouts(control, greedy, steps_per_call=probing.REPLAY_STEPS),
            agent=probe,
            branchings=branching.labels,
            layout=layout,
            plan=PLAN,
            say=lambda message: None,
        )
        alone = controls.controls_by_data(
            module,
            control,
            make_env=make_env,
            plan=PLAN,
            seed=SEED,
            greedy=greedy,
            say=lambda message: None,
        )
    finally:
        torch.set_num_threads(before)
    # The agent's controls were scored once, reading the analysis' agent probe (with its
    # permutation nulls): the block's agent probe is the record's; its nulls aside, it is the
    # probe the controls fit alone, and every other number is theirs.
    assert by_data["agent_greedy"]["agent_probe"] == record["probe"]
    assert record["probe"]["permutation"] is not None
    shared = json.loads(json.dumps(by_data))
    probe = shared["agent_greedy"]["agent_probe"]
    probe["permutation"] = None
    probe["within_branch"]["permutation"] = None
    assert json.loads(json.dumps(alone)) == shared
    # The top-level blocks are views of the same result.
    for key in ("scores", "windows", "action_branching"):
        assert by_data["agent_greedy"][key] == record[key], key
    assert by_data["agent_greedy"]["best_window_k"] == record["differences"]["best_window_k"]
    # The incremental record with its windows alone read from the controls' fits is the
    # test computed alone, every number bit for bit.
    dumped = json.dumps(record[incremental.KEY], sort_keys=True)
    assert dumped == json.dumps(incremental_alone, sort_keys=True)
    # The agent's residuals from one replay: the last is the probed representation; the
    # yardstick reads the same agent probe.
    # Replayed 64 steps per call: equal to rounding, which this tiny probe (384 train steps
    # for 96 features, held-out R² far below 0) amplifies about 1e4 times.
    layer = record["layers"][-1]["r2_pooled"]
    assert layer == pytest.approx(record["probe"]["r2_pooled"], rel=1e-3)
    yardstick = json.loads((context.results_dir / "yardstick.json").read_text())
    assert yardstick["agent"]["r2"] == record["probe"]["r2_pooled"]["value"]


def test_window_capacity_repeats_the_sampled_test_then_fits_larger_windows(
    analysed, capsys, tmp_path
):
    """The on-request check (window_capacity.py): the sampled rollouts collected again, the
    recorded MLP's rows equal the run's own incremental_r2_sampled record at the same k, and
    each larger MLP is the regressor its table says, fitted (its numbers are not the
    recorded one's)."""
    context, _, _ = analysed
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # the threads the analysis above ran its fits with
    try:
        if incremental.KEY_SAMPLED not in json.loads(
            (context.results_dir / "probe_metrics.json").read_text()
        ):
            analysis.analyze(
                context, label="reward_only", module_spec=reward_only.module_spec(), plan=PLAN
            )
        in_run = json.loads((context.results_dir / "probe_metrics.json").read_text())
        # The sampled test alone on the finished run (`--stage incremental_r2_sampled`, the
        # same collection of the rollouts as the check below): the in-run record, bit for bit.
        again = analysis.reanalyse_incremental(
            context,
            incremental.KEY_SAMPLED,
            label="reward_only",
            module_spec=reward_only.module_spec(),
        )
        record = analysis.check_window_capacity(
            context, label="reward_only", module_spec=reward_only.module_spec()
        )
    finally:
        torch.set_num_threads(before)
    assert "stage window_capacity (" in capsys.readouterr().out
    sampled = json.dumps(in_run[incremental.KEY_SAMPLED], sort_keys=True)
    assert json.dumps(again, sort_keys=True) == sampled
    on_disk = json.loads((context.results_dir / window_capacity.FILE).read_text())
    assert on_disk == json.loads(json.dumps(record))
    assert record["ks"] == [1, 2, 3] and [block["name"] for block in record["regressors"]] == list(
        window_capacity.REGRESSORS
    )
    # The same test on the same episodes: bit for bit where the run's record has the k
    # (the smoke budget's window_k_max is 2: nothing to compare at k = 3).
    assert PLAN.window_k_max == 2
    assert record["recorded_matches"] == {"1": 0.0, "2": 0.0, "3": None}
    tables = {block["name"]: block["table"] for block in on_disk["regressors"]}
    assert tables["epochs_x4"]["regressor"]["epochs"] == 80
    assert tables["width_x2"]["regressor"]["hidden"] == [256, 256]
    assert tables["epochs_half"]["regressor"]["epochs"] == 10
    assert tables["width_half"]["regressor"]["hidden"] == [64, 64]
    for name in ("epochs_half", "width_half", "epochs_x4", "width_x2"):
        assert [row["k"] for row in tables[name]["rows"]] == [1, 2, 3]
        for mine, recorded in zip(tables[name]["rows"], tables["recorded"]["rows"], strict=True):
            assert mine["window"] != recorded["window"], (name, mine["k"])
    # The study README's table (report.window_capacity_table) reads the record as written.
    arm = tmp_path / "reward_only" / "results" / context.run_id
    arm.mkdir(parents=True)
    run = report.StudyRun("reward_only", SEED, context.run_id, Results(), None, None)
    assert report.window_capacity_table([run], root=tmp_path) == report.NO_WINDOW_CAPACITY
    shutil.copy(context.results_dir / window_capacity.FILE, arm)
    lines = report.window_capacity_table([run], root=tmp_path).splitlines()
    assert "to within 0.0e+00 relative" in lines[0] and "width_x2 256x256, 20 epochs" in lines[0]
    rows = [line.split(" | ") for line in lines[4:]]
    assert len(rows) == 3 * 2 * 5  # k x score x MLP
    first = tables["recorded"]["rows"][0]
    assert rows[0][1:5] == [str(SEED), "1", "global", "recorded"]
    assert rows[0][5] == f"{first['window']['r2_pooled']['value']:.4f}"
    assert rows[9][2:5] == ["1", "within tokens_2", "width_x2"]
