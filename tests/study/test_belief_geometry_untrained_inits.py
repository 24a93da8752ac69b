"""The memory leaves' incremental test against several untrained initialisations (one random
network is one draw): the record of three inits keeps init 0's c exactly as a one-init record
has it, each init is its own network, the headline carries the claim (the minimum over inits)
and the report reads old one-init and new several-init records side by side, the across-seed
test on the minimum."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from experiments.mess3_belief_geometry import (
    analysis,
    confirmatory,
    incremental,
    probing,
    report,
    spec,
    task,
)
from experiments.mess3_belief_geometry.reward_only import experiment as reward_only
from experiments.mess3_belief_geometry.reward_only_memory import experiment as memory_leaf

from rl_harness import Metric, Results
from rl_harness.analysis import collect_rollouts, load_module, replay_rollouts
from rl_harness.seeding import stream_seed
from tests.study.reward_only_runs import STAGE_RECORDS, untrained_agent, write_finished_run
from tests.study.test_belief_geometry_controls import SEED
from tests.study.test_belief_geometry_report import memory_runs  # noqa: F401 (fixture)


def test_the_registered_confirmatory_statistic_is_what_the_memory_leaves_record():
    # confirmatory.PLAN (registered before its runs) reads this headline name and count.
    assert confirmatory.PLAN.n_untrained == spec.MEMORY_UNTRAINED_INITS
    assert memory_leaf.CPU.untrained_inits == confirmatory.PLAN.n_untrained
    assert confirmatory.PLAN.key == incremental.KEY_SAMPLED
    assert confirmatory.PLAN.statistic == "agent_minus_controls_min"


def test_init_zero_is_the_control_every_stage_always_used():
    assert analysis.untrained_seed(SEED, 0) == stream_seed(SEED, "study", "untrained")
    seeds = {analysis.untrained_seed(SEED, j) for j in range(3)}
    assert len(seeds) == 3 and analysis.untrained_seed(SEED, 2) == stream_seed(
        SEED, "study", "untrained", "2"
    )
    assert incremental.control_names(3) == ["control", "control_1", "control_2"]


def test_three_inits_keep_init_zero_and_carry_the_minimum(tmp_path):
    """The sampled stage's record at the memory point with the memory leaf's three inits,
    beside the same test with init 0 alone (what the committed records hold)."""
    agent, _ = untrained_agent()
    _, checkpoint = write_finished_run(tmp_path, agent, SEED, STAGE_RECORDS)
    plan = memory_leaf.SMOKE
    assert plan.untrained_inits == 3
    module = load_module(checkpoint)
    make_env = probing.probe_env_factory(False, task.point_of(plan))
    env = make_env(1)
    layout, space = env.layout, env.single_action_space
    env.close()
    settings = probing.rollout_settings(plan, SEED, make_env, space)
    rollouts = collect_rollouts(
        module,
        n_episodes=plan.probe_episodes,
        episode_steps=plan.probe_steps,
        policy="sample",
        **settings,
    )
    inits = analysis.untrained_controls(reward_only.module_spec(), make_env, SEED, plan)
    features = [replay_rollouts(c, rollouts, steps_per_call=probing.REPLAY_STEPS) for c in inits]
    assert not np.allclose(features[0], features[1])  # another network, not another replay

    def measure(untrained):
        record = incremental.measure_with_own_probe(
            rollouts,
            untrained,
            layout=layout,
            plan=plan,
            seed=SEED,
            data=incremental.DATA_SAMPLED,
            say=lambda m: None,
        )
        return json.loads(json.dumps(record))

    one, three = measure(features[0]), measure(features)
    assert one["schema_version"] == 1 and "untrained_inits" not in one
    assert three["schema_version"] == 2 and three["untrained_inits"] == 3
    table = three["table"]
    assert table["controls"] == ["control", "control_1", "control_2"]
    for old, new in zip(one["table"]["rows"], table["rows"], strict=True):
        # c_0 is the one-init record's c, bit for bit (same module, same fit streams).
        first = new["controls"]["control"]
        assert first["control"] == old["control"]
        assert first["agent_minus_control"] == old["agent_minus_control"]
        assert new["window"] == old["window"] and new["agent"] == old["agent"]
        # The claim: the minimum over inits, at every score.
        values = [c["agent_minus_control"]["r2_pooled"]["value"] for c in new["controls"].values()]
        assert new["agent_minus_controls_min"]["r2_pooled"]["value"] == min(values)
        assert new["agent_minus_controls_mean"]["r2_pooled"]["value"] == pytest.approx(
            np.mean(values)
        )
    top = incremental.headline(three)
    assert top.value("untrained_inits") == 3
    names = set(top)
    assert "k1/agent_minus_control" not in names and "k1/r2_control" not in names
    assert {"k1/agent_minus_controls_min", "k1/agent_minus_controls_min_p_holm"} <= names
    assert {"k2/agent_minus_control_2_within_branch", "k2/r2_control_1"} <= names
    minimum = top.value("k1/agent_minus_controls_min_p_holm")
    assert minimum == max(top.value(f"k1/agent_minus_control_{j}_p_holm") for j in range(3))
    # A one-init record's headline is as it was.
    assert "k1/agent_minus_control" in set(incremental.headline(one))


def _several(run: report.StudyRun, seed: int) -> report.StudyRun:
    """The run as seed `seed` with a three-init greedy record: each b - c becomes the
    minimum over inits (0.01 * (seed + 1) below it) and the mean (0.005 below it)."""
    key = incremental.KEY
    metrics = {}
    for name, metric in run.result.items():
        head, _, tail = name.rpartition("/")
        if not name.startswith(f"{key}/k") or not tail.startswith("agent_minus_control"):
            metrics[name] = metric
            continue
        suffix = tail.removeprefix("agent_minus_control")
        if suffix.endswith("_p_holm"):
            metrics[f"{head}/agent_minus_controls_min{suffix}"] = metric
            continue
        low = dataclasses.replace(
            metric,
            value=metric.value - 0.01 * (seed + 1),
            low=metric.low - 0.01 * (seed + 1),
            high=metric.high - 0.01 * (seed + 1),
        )
        metrics[f"{head}/agent_minus_controls_min{suffix}"] = low
        metrics[f"{head}/agent_minus_controls_mean{suffix}"] = Metric(metric.value - 0.005)
    metrics[f"{key}/untrained_inits"] = Metric(3)
    return dataclasses.replace(run, seed=seed, result=Results(metrics))


def test_the_report_reads_one_init_and_several_init_records(memory_runs) -> None:  # noqa: F811
    base = memory_runs[0]
    key, name = incremental.KEY, "agent_minus_control"
    before = report.memory_incremental_runs_table([base])
    assert "| inits |" not in before  # one-init records: the table as it was
    runs = [base, *(_several(base, seed) for seed in (5, 6))]
    per_run = report.memory_incremental_runs_table(runs)
    assert "| inits |" in per_run and "min b - c_j [95%]" in per_run
    old = base.result.value(f"{key}/k1/{name}")
    new = runs[1].result.value(f"{key}/k1/agent_minus_controls_min")
    mean = runs[1].result.value(f"{key}/k1/agent_minus_controls_mean")
    old_line = next(
        ln
        for ln in per_run.splitlines()
        if ln.startswith(f"| {base.arm} | {base.seed} | 1 | 1 | global |")
    )
    new_line = next(
        ln for ln in per_run.splitlines() if ln.startswith(f"| {base.arm} | 5 | 3 | 1 | global |")
    )
    assert old_line.endswith(f"| {old:+.3f} |") and f"{old:+.3f} [" in old_line
    assert new_line.endswith(f"| {mean:+.3f} |") and f"{new:+.3f} [" in new_line
    # Across seeds b - c is the minimum over inits where a run has several.
    rows = report.incremental_rows([r.result for r in runs], key)[name]
    values = [old, new, runs[2].result.value(f"{key}/k1/agent_minus_controls_min")]
    assert rows[0]["values"] == pytest.approx(values)
    seeds = report.memory_incremental_seeds_table(runs)
    assert "the minimum over each run's untrained inits" in seeds
