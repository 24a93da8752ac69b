"""The leaves at the operating point where memory pays (issue 52 item 2): each is its base
leaf with the `task_point` setting "memory", and the env, the analysis env and the solver
problem all run that point's chain. The smoke run through the CLI is `slow`."""

from __future__ import annotations

import dataclasses
import importlib
import json

import numpy as np
import pytest
from experiments.mess3_belief_geometry import probing, spec, task

from rl_harness import make_context, read_results
from rl_harness.envs.hmm import HMMEnvConfig, HMMVectorEnv
from rl_harness.envs.mess3 import control_chain_transition
from tests.study.spec_check import changed_keys
from tests.study.test_belief_geometry_configs import STUDY, budgets
from tests.study.test_belief_geometry_smoke import smoke

MEMORY_LEAVES = {"reward_only_memory": "reward_only", "next_token_aux_memory": "next_token_aux"}
POINT = task.TASK_POINTS["memory"]


def leaf_module(leaf: str):
    return importlib.import_module(f"{STUDY}.{leaf}.experiment")


def test_the_memory_point_is_not_the_flagship():
    assert POINT != task.FLAGSHIP
    assert task.point_of(dataclasses.replace(spec.SMOKE, task_point="memory")) is POINT
    with pytest.raises(ValueError, match="unknown task_point 'nowhere'; one of flagship"):
        task.point_of(dataclasses.replace(spec.SMOKE, task_point="nowhere"))


@pytest.mark.parametrize("plan_name", ["SMOKE", "CPU", "FULL"])
@pytest.mark.parametrize("leaf", sorted(MEMORY_LEAVES))
def test_a_memory_leaf_is_its_base_leaf_at_the_memory_point(leaf, plan_name):
    module, base = leaf_module(leaf), leaf_module(MEMORY_LEAVES[leaf])
    plan, base_plan = budgets(module)[plan_name], budgets(base)[plan_name]
    # The memory point, and the incremental test against several untrained inits (spec.py).
    assert plan.untrained_inits == spec.MEMORY_UNTRAINED_INITS == 3
    assert base_plan.untrained_inits == 1
    assert plan == dataclasses.replace(base_plan, task_point="memory", untrained_inits=3)
    assert module.DEFAULT_BUDGET == base.DEFAULT_BUDGET
    module.build_config(plan).validate()  # validate() fills fields: compare fresh configs
    own = module.build_config(plan)
    assert changed_keys(base.build_config(base_plan), own) == {"env_config"}
    # `--set task_point=memory` on the base leaf builds the same config.
    assert changed_keys(base.build_config(plan), own) == set()
    env_config = HMMEnvConfig.from_mapping(own.env_config)
    assert env_config.model_kwargs == {"alpha": POINT.alpha, "mixing": POINT.mixing}
    assert env_config.task_kwargs["w_max"] == POINT.w_max
    assert env_config.task_kwargs["beta"] == POINT.beta
    assert env_config.observation_delay == POINT.delay
    env = HMMVectorEnv(1, own.env_config)
    np.testing.assert_allclose(env.model.transition_matrix, control_chain_transition(POINT.mixing))
    env.close()


def test_the_analysis_env_and_the_solvers_run_the_point_of_the_plan():
    plan = dataclasses.replace(spec.SMOKE, task_point="memory")
    env = probing.probe_env_factory(False, task.point_of(plan))(2)
    np.testing.assert_allclose(env.model.transition_matrix, control_chain_transition(POINT.mixing))
    assert env.single_action_space.high.max() == POINT.w_max
    env.close()
    problem = POINT.problem()
    assert problem.settings()["alpha"] == POINT.alpha
    np.testing.assert_allclose(problem.base, control_chain_transition(POINT.mixing))


@pytest.mark.parametrize("leaf", sorted(MEMORY_LEAVES))
def test_memory_budgets_are_chosen_by_name(leaf, tmp_path):
    module = leaf_module(leaf)

    def context(**options):
        return make_context(tmp_path, experiment_module=f"{STUDY}.{leaf}.experiment", **options)

    assert context(smoke=True).settings == module.SMOKE
    assert context().settings == module.CPU and context().budget == "cpu"
    assert context().settings.task_point == "memory"


@pytest.mark.slow
def test_reward_only_memory_smoke_runs_at_the_memory_point(tmp_path):
    leaf = "reward_only_memory"
    run_dir = smoke(f"{STUDY}.{leaf}.experiment", tmp_path, leaf)
    manifest = json.loads((run_dir / "run_manifest.json").read_text())
    assert manifest["status"] == "completed"
    metrics = json.loads((run_dir / "probe_metrics.json").read_text())
    assert metrics["recipe"] == leaf and metrics["budget"]["task_point"] == "memory"
    assert metrics["task"]["task_point"] == "memory"
    assert (metrics["task"]["alpha"], metrics["task"]["mixing"]) == (POINT.alpha, POINT.mixing)
    solvers = json.loads((run_dir / "solver_values.json").read_text())
    assert solvers["problem"]["mixing"] == POINT.mixing
    assert solvers["problem"]["alpha"] == POINT.alpha
    assert solvers["stack_3"] < solvers["belief_mdp"]
    assert "interventions" in metrics and (run_dir / "yardstick.json").exists()
    # Both incremental tests against the leaf's three untrained inits, in-run.
    result = read_results(run_dir)  # the named metrics (rl_harness.Results)
    for key in ("incremental_r2", "incremental_r2_sampled"):
        assert metrics[key]["untrained_inits"] == 3
        assert metrics[key]["table"]["controls"] == ["control", "control_1", "control_2"]
        assert result.value(f"{key}/untrained_inits") == 3
        assert result.get(f"{key}/k1/agent_minus_controls_min") is not None
