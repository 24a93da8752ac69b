"""Fast checks of the occupancy-control study (experiments.mess3_belief_geometry): every
training leaf builds a valid config for each budget, each is the study's spec but for what it
states, and the learning-curve plot draws the solver values it is given."""

from __future__ import annotations

import importlib
import json

import pytest
from experiments.mess3_belief_geometry import analysis, spec, task
from experiments.mess3_belief_geometry.synthesis import experiment as synthesis
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner

from rl_harness import make_context
from rl_harness.envs.hmm import ENV_ID, HMMEnvConfig, HMMVectorEnv
from rl_harness.learners.models import (
    KVCacheLearnerMixin,
    NextTokenAuxHeadMixin,
    StatefulTransformerActorCritic,
)
from rl_harness.learners.models.kv_cache import KVStepsToEpisodes
from rl_harness.losses import InfoTargetsToBatch, NextTokenAuxLossMixin
from tests.study.spec_check import changed_keys

STUDY = "experiments.mess3_belief_geometry"
TRAINING_LEAVES = {
    "reward_only": f"{STUDY}.reward_only.experiment",
    "next_token_aux": f"{STUDY}.next_token_aux.experiment",
    "belief_observation": f"{STUDY}.belief_observation.experiment",
}


def recipe(leaf: str):
    return importlib.import_module(TRAINING_LEAVES[leaf])


def budgets(module):
    return {"SMOKE": module.SMOKE, "CPU": module.CPU, "FULL": module.FULL}


@pytest.mark.parametrize("plan_name", ["SMOKE", "CPU", "FULL"])
@pytest.mark.parametrize("leaf", sorted(TRAINING_LEAVES))
def test_leaf_builds_and_validates_its_config(leaf, plan_name):
    module = recipe(leaf)
    assert callable(module.run)
    plan = budgets(module)[plan_name]
    config = module.build_config(plan)
    config.validate()
    assert config.env == ENV_ID
    env_config = HMMEnvConfig.from_mapping(config.env_config)  # the env's own validation
    assert env_config.model_kwargs == {"alpha": 0.85}
    assert env_config.task == "rl_harness.envs.mess3.tasks:OccupancyControlTask"
    assert env_config.task_kwargs == {"w_max": 5.0, "beta": 4.0, "occupancy_states": [2]}
    assert env_config.observation_delay == 1 and env_config.episode_length == 1024
    assert config.train_batch_size_per_learner == plan.train_batch
    assert config.minibatch_size == plan.minibatch and config.num_epochs == plan.num_epochs
    assert (config.gamma, config.lambda_, config.lr) == (0.99, 0.95, 3e-4)
    assert issubclass(config.learner_class, PPOTorchLearner)
    # Per-step K/V storage (issue 26): episodes keep each step's new key/value only, and the
    # learner rebuilds each chunk's start cache.
    assert issubclass(config.learner_class, KVCacheLearnerMixin)
    # The module builds on the env's spaces and rejects nothing in its config.
    env = HMMVectorEnv(1, config.env_config)
    spec = config.rl_module_spec
    spec.observation_space, spec.action_space = (
        env.single_observation_space,
        env.single_action_space,
    )
    built = spec.build()
    module_to_env = config.build_module_to_env_connector(env=env)
    # The acting pieces run as one UntimedPipeline (issue 53 item 6): look inside it.
    pieces = [inner for c in module_to_env.connectors for inner in getattr(c, "connectors", [c])]
    assert any(isinstance(c, KVStepsToEpisodes) for c in pieces)
    assert isinstance(built, StatefulTransformerActorCritic) and built.is_stateful()
    layout = env.layout
    observed = leaf == "belief_observation"
    assert env_config.include_decision_belief is observed
    assert (layout.decision_belief.stop - layout.decision_belief.start) == (3 if observed else 0)
    # The auxiliary loss: only next_token_aux, on the next *visible* token.
    aux = leaf == "next_token_aux"
    assert issubclass(spec.module_class, NextTokenAuxHeadMixin) is aux
    assert issubclass(config.learner_class, NextTokenAuxLossMixin) is aux
    pipeline = config.build_learner_connector(env.single_observation_space, env.single_action_space)
    ours = [c for c in pipeline.connectors if isinstance(c, InfoTargetsToBatch)]
    if aux:
        # Delay 1: the token seen at t + 1 was emitted on arrival at t, i.e. info["token"]_t.
        assert ours[0].targets == {"next_token_aux": ("token", 0)} and len(ours) == 1
        assert "token" in env_config.info
        assert config.learner_config_dict == {"next_token_aux/weight": module.AUX_WEIGHT}
    else:
        assert ours == [] and config.learner_config_dict == {}
    env.close()
    assert module.build_config(plan) is not config


@pytest.mark.parametrize("leaf", sorted(TRAINING_LEAVES))
def test_budgets_are_what_the_recipe_states(leaf, tmp_path):
    module = recipe(leaf)
    smoke, cpu, full = module.SMOKE, module.CPU, module.FULL
    assert smoke.iterations * smoke.train_batch <= 2048
    assert cpu.iterations * cpu.train_batch >= 2_000_000
    assert full.iterations * full.train_batch >= 10_000_000
    assert (full.iterations - 1) * full.train_batch < 10_000_000  # the least that reaches 10M
    for plan in (smoke, cpu, full):
        assert plan.probe_episodes >= 4 and plan.probe_steps + plan.warmup_steps <= 1024
        # Windows up to K must fit in the warm-up (recorded steps see whole windows).
        assert 2 <= plan.window_k_max <= plan.warmup_steps
        assert 2 <= plan.training_probe_episodes <= plan.probe_episodes
    assert cpu.window_k_max == full.window_k_max == 6

    def context(**options):
        return make_context(tmp_path, experiment_module=TRAINING_LEAVES[leaf], **options)

    # Chosen by name, never by the hardware: a GPU profile still runs the default CPU budget.
    assert module.BUDGETS == {"smoke": smoke, "cpu": cpu, "full": full}
    assert context(smoke=True).settings == smoke
    assert context().settings == cpu and context().budget == module.DEFAULT_BUDGET == "cpu"
    assert context(hardware_profile="single-gpu").settings == cpu
    assert context(budget="full", hardware_profile="single-gpu").settings == full


def test_learning_curve_reference_lines_are_the_solver_values(tmp_path):
    # The analysis writes solver_values.json, then draws the plot from what it wrote: read
    # the JSON back and compare with the lines read back from the drawn figure.
    values = {
        "oracle": 0.31,
        "belief_mdp": 0.27,
        "stack_3": 0.25,
        "stack_2": 0.22,
        "memoryless": 0.18,
        "source": "test",
    }
    (tmp_path / "solver_values.json").write_text(json.dumps(values))
    stored = json.loads((tmp_path / "solver_values.json").read_text())
    rows = [
        {
            "num_env_steps_sampled_lifetime": 1000 * i,
            analysis.RETURN_KEY: 100.0 + i,
            analysis.LENGTH_KEY: 1000.0,
        }
        for i in range(1, 4)
    ]
    drawn = analysis.plot_return_per_step(
        tmp_path / "learning_curve.png",
        rows,
        task.references_from(stored),
        title="test",
        evaluations={"final greedy": 0.2},
    )
    assert drawn == {
        "oracle (state known)": 0.31,
        "belief-MDP ceiling": 0.27,
        "best stack-3 found": 0.25,
        "best stack-2": 0.22,
        "best memoryless": 0.18,
    }
    assert (tmp_path / "learning_curve.png").stat().st_size > 10_000
    # Missing solver values draw no line (never a made-up one).
    assert task.references_from({"oracle": 0.3, "belief_mdp": None}) == {
        "oracle (state known)": 0.3
    }


def test_return_per_step_curve_divides_return_by_length():
    rows = [
        {
            "num_env_steps_sampled_lifetime": 10,
            analysis.RETURN_KEY: 50.0,
            analysis.LENGTH_KEY: 500.0,
        },
        {"num_env_steps_sampled_lifetime": 20},  # no episode finished: skipped
    ]
    steps, values = analysis.return_per_step_curve(rows)
    assert steps.tolist() == [10.0] and values.tolist() == [0.1]


# What each leaf states beyond the spec (spec.py): the config.to_dict() keys it changes.
STATED = {
    "reward_only": set(),
    "belief_observation": {"env_config"},
    "next_token_aux": {
        "env_config",
        "_rl_module_spec",
        "_learner_class",
        "learner_config_dict",
        "_learner_connector",
    },
}


@pytest.mark.parametrize("plan_name", ["SMOKE", "CPU", "FULL"])
@pytest.mark.parametrize("leaf", sorted(TRAINING_LEAVES))
def test_each_leaf_is_the_spec_but_for_what_it_states(leaf, plan_name):
    module = recipe(leaf)
    assert module.BUDGETS is spec.BUDGETS and module.DEFAULT_BUDGET == spec.DEFAULT_BUDGET
    plan = budgets(spec)[plan_name]
    assert budgets(module)[plan_name] is plan
    base = spec.ppo_config(
        plan, env_config=task.env_config(info=[]), module_spec=spec.module_spec()
    )
    own = module.build_config(plan)
    changed = changed_keys(base, own)
    assert changed == STATED[leaf]
    # What the stated keys hold.
    if leaf == "belief_observation":
        assert own.env_config == base.env_config | {"include_decision_belief": True}
    if leaf == "next_token_aux":
        assert own.env_config == base.env_config | {"info": ["token"]}
        model_config = own.rl_module_spec.model_config
        assert model_config == spec.MODEL_CONFIG | {"next_token_aux/num_classes": 3}
        assert own.learner_config_dict == {"next_token_aux/weight": module.AUX_WEIGHT}
    assert synthesis.TRAINING_LEAVES == (
        "reward_only",
        "next_token_aux",
        "belief_observation",
        "reward_only_memory",
        "next_token_aux_memory",
    )


@pytest.mark.parametrize("plan_name", ["SMOKE", "CPU", "FULL"])
def test_checkpoints_at_step_0_and_each_doubling_of_env_steps(plan_name):
    plan = budgets(recipe("reward_only"))[plan_name]
    schedule = analysis.checkpoint_schedule(plan)
    assert schedule.at_start and schedule.every == 0
    due = [
        i
        for i in range(1, plan.iterations + 1)
        if schedule.reasons(
            i,
            i * plan.train_batch,
            previous_iteration=i - 1,
            previous_env_steps=(i - 1) * plan.train_batch,
        )
    ]
    # Plus step 0 and the final checkpoint the runner always saves.
    expected = {
        "SMOKE": [1],
        "CPU": [1, 2, 4, 8, 16, 32],
        "FULL": [1, 2, 4, 8, 16, 32, 64, 128, 256],
    }
    assert due == expected[plan_name]


@pytest.mark.parametrize("leaf", sorted(TRAINING_LEAVES))
def test_each_leaf_states_the_original_init_and_config_json_records_it(leaf):
    """Every flagship leaf states the original study's initialisation (issue 37) in its
    MODEL_CONFIG, and the record the harness writes as config.json holds it resolved."""
    import json

    from rl_harness.harness.configrecord import config_record

    original = {"init": "normal", "init_std": 0.02, "pi_output_scale": 1.0, "vf_output_scale": 1.0}
    module = recipe(leaf)
    config = module.build_config(module.SMOKE)
    stated = {k: v for k, v in config.rl_module_spec.model_config.items() if k in original}
    assert stated == original
    assert json.loads(json.dumps(config_record(config)))["module"]["init"] == original
