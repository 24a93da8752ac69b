"""The mess3_action_symmetry study against the original it ports (issue 50 item 7), without
Ray (seconds): every setting of the spec is the original's (each number restated here from
the original's `shared.py` and `task.py`, experiment repo Al-does/alex-rl-experiments,
`experiments/mess3_reward_state_action_symmetry_cycle_1`), each leaf's config is the
spec's but for its variant and delay, the two exact facts (0.3324, 0.7541) read through
the study, and original_figures.json cites a path and a commit for every figure."""

from __future__ import annotations

import importlib
import json
import math
import re

import numpy as np
import pytest
from experiments.mess3_action_symmetry import shared, spec, task

from rl_harness.envs.hmm import HMMVectorEnv
from rl_harness.envs.hmm.action_tasks import OneStepLookaheadPolicy
from tests.study.spec_check import changed_keys

STUDY = "experiments.mess3_action_symmetry"
LEAVES = {"variant_2": (2, 1), "variant_2_no_delay": (2, 0)}

# The original (shared.py at 3d05a70 / f19bd45, task.py at 4b79da4), restated.
ORIGINAL_PPO = {
    "lr": 4.2e-4,
    "gamma": 0.99,
    "lambda_": 0.95,
    "clip_param": 0.2,
    "vf_loss_coeff": 0.5,
    "entropy_coeff": 0.003,
    "train_batch_size_per_learner": 32_768,
    "minibatch_size": 2048,
    "num_epochs": 6,
    # It set no KL option: RLlib's default term stayed on.
    "use_kl_loss": True,
    "kl_coeff": 0.2,
}
ORIGINAL_SMOKE = {"lr": 3e-4, "train_batch_size_per_learner": 2048, "minibatch_size": 256}
ORIGINAL_SMOKE_ENV_STEPS = 4096
ORIGINAL_ENV_STEPS = {"variant_2": 10_000_000, "variant_2_no_delay": 1_000_000}
ORIGINAL_MODEL = {"d_model": 96, "num_layers": 3, "num_heads": 4, "context": 64}
ORIGINAL_PROBE = {"warmup": 64, "fit_steps": 60_000, "test_steps": 80_000, "resamples": 1000}
ORIGINAL_DIRECTIONS = {  # positive, negative: sign of the shift from source states 0, 1, 2
    1: ((1, 1, 1), (-1, -1, -1)),
    2: ((1, 1, -1), (-1, -1, -1)),
    3: ((1, -1, -1), (-1, 1, -1)),
}


def original_transition(base: np.ndarray, directions) -> np.ndarray:
    """The original's `_tilt_reward_state_probability`, restated: +-1.5 on the log-odds of
    entering state 2 per source row, the row's other odds kept."""
    logits = np.log(base)
    logits[:, 2] += 1.5 * np.asarray(directions, dtype=np.float64)
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True)


def leaf(name: str):
    return importlib.import_module(f"{STUDY}.{name}.experiment")


@pytest.mark.parametrize("name", sorted(LEAVES))
def test_each_leaf_runs_the_originals_ppo_model_and_budget(name):
    module = leaf(name)
    budgets = module.RECIPE.budgets
    config = module.build_config(budgets["full"])
    for key, value in ORIGINAL_PPO.items():
        assert getattr(config, key) == value, key
    for key, value in ORIGINAL_MODEL.items():
        assert config.rl_module_spec.model_config[key] == value, key
    # The original's initialisation; the previous action comes in the observation.
    model = config.rl_module_spec.model_config
    assert (model["init"], model["init_std"], model["pi_output_scale"]) == ("normal", 0.02, 1.0)
    assert model["prev_action"] is False and model["max_seq_len"] == 32
    # Its stop: the first iteration with >= N sampled env steps (32,768 per iteration here).
    full = budgets["full"]
    steps = ORIGINAL_ENV_STEPS[name]
    assert full.iterations * full.train_batch >= steps > (full.iterations - 1) * full.train_batch
    assert full.iterations == {"variant_2": 306, "variant_2_no_delay": 31}[name]
    # Its probe: a 64-step warm-up, 140,000 recorded steps (4/7 held out), 1,000 resamples.
    assert full.warmup_steps == ORIGINAL_PROBE["warmup"]
    recorded = full.probe_episodes * full.probe_steps
    assert 0 <= recorded - (ORIGINAL_PROBE["fit_steps"] + ORIGINAL_PROBE["test_steps"]) < 1000
    assert full.warmup_steps + full.probe_steps == task.EPISODE_LENGTH
    assert math.isclose(shared.PROBE_TEST_FRACTION, 80_000 / 140_000)
    assert full.n_bootstrap == full.n_permutations == ORIGINAL_PROBE["resamples"]
    assert shared.PROBE_RIDGE == 1e-6 and shared.BRANCH_DEPTH == 2
    # The original's smoke.
    smoke = module.build_config(budgets["smoke"])
    for key, value in ORIGINAL_SMOKE.items():
        assert getattr(smoke, key) == value, key
    assert budgets["smoke"].iterations * budgets["smoke"].train_batch == ORIGINAL_SMOKE_ENV_STEPS


def test_the_cpu_budget_of_variant_2_differs_from_the_original_only_in_length():
    budgets = leaf("variant_2").RECIPE.budgets
    cpu, full = budgets["cpu"], budgets["full"]
    assert {field for field in vars(full) if getattr(full, field) != getattr(cpu, field)} == {
        "iterations"
    }
    assert cpu.iterations == 31  # >= 1M env steps: the original has a checkpoint at 1,058,450
    assert leaf("variant_2").RECIPE.default == "cpu"
    assert leaf("variant_2_no_delay").RECIPE.default == "full"


@pytest.mark.parametrize("name", sorted(LEAVES))
def test_each_leaf_is_the_spec_but_for_its_variant_and_delay(name):
    module = leaf(name)
    variant, delay = LEAVES[name]
    assert (module.LEAF.variant, module.LEAF.delay, module.LEAF.label) == (variant, delay, name)
    for budget in module.RECIPE.budgets.values():
        own = module.build_config(budget)
        base = spec.ppo_config(budget, variant=variant, delay=delay)
        assert changed_keys(base, own) == set()
        assert module.build_config(budget) is not own  # fresh each call
    other = spec.ppo_config(module.RECIPE.budgets["smoke"], variant=variant, delay=1 - delay)
    assert changed_keys(other, module.build_config(module.RECIPE.budgets["smoke"])) == {
        "env_config"
    }


@pytest.mark.parametrize("variant", [1, 2, 3])
def test_the_env_is_the_originals(variant):
    config = task.env_config(variant, 1, info=["state_before", "state"])
    env = HMMVectorEnv(32, config)
    # The control model, started uniform; 1024-step episodes, the first ones of random length.
    np.testing.assert_allclose(env.model.initial, [1 / 3, 1 / 3, 1 / 3])
    assert config["model_kwargs"] == {"alpha": 0.85, "start": "uniform"}
    assert config["episode_length"] == 1024 and config["random_first_episode_length"] is True
    # Token one-hot then previous-action one-hot: the original's 6 floats.
    assert env.single_observation_space.shape == (6,)
    base = env.model.transition_matrix
    positive, negative = ORIGINAL_DIRECTIONS[variant]
    expected = (base, original_transition(base, positive), original_transition(base, negative))
    for action in range(3):
        np.testing.assert_allclose(env.task.transitions[action], expected[action], atol=1e-15)
    # Reward 1 when the state the move LEAVES is 2.
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(40):
        _, reward, _, _, info = env.step(rng.integers(0, 3, 32))
        np.testing.assert_array_equal(reward, (info["state_before"] == 2).astype(np.float64))
    env.close()


def test_the_two_facts_read_through_the_study():
    facts = task.facts(2)
    assert round(facts["entry_bound"], 4) == task.KNOWN_ENTRY_BOUND == 0.3324
    assert round(facts["threshold"], 4) == task.KNOWN_THRESHOLD == 0.7541
    with pytest.raises(ValueError, match="does not win below a threshold"):
        task.facts(1)
    # The task's own reward (the state left) ties every action: the oracle scores the state
    # entered, and picks noop exactly above the threshold.
    with pytest.raises(ValueError, match="every action ties"):
        OneStepLookaheadPolicy(task.task(2, 1), "reward")
    oracle = task.myopic_oracle(2)
    p = np.array([0.0, 0.5, facts["threshold"] - 1e-9, facts["threshold"] + 1e-9, 1.0])
    beliefs = np.stack([(1 - p) / 2, (1 - p) / 2, p], axis=1)
    np.testing.assert_array_equal(oracle(beliefs), [1, 1, 1, 0, 0])


@pytest.mark.parametrize(
    ("name", "noop_reached"), [("variant_2", False), ("variant_2_no_delay", True)]
)
def test_the_noop_region_is_reached_only_at_delay_0(name, noop_reached):
    """The leaves' analysis env: at delay 1 no decision belief passes 0.3324, so the oracle
    never takes noop; at delay 0 the current token lifts some past 0.7541."""
    module = leaf(name)
    env = HMMVectorEnv(16, shared.analysis_env(module.LEAF))
    _, info = env.reset(seed=0)
    oracle = task.myopic_oracle(2)
    rng = np.random.default_rng(1)
    mass, noop = [], []
    for _ in range(300):
        _, _, _, _, info = env.step(rng.integers(0, 3, 16))
        mass.append(info["decision_belief"][:, 2])
        noop.append(oracle(info["decision_belief"]) == 0)
    env.close()
    mass, noop = np.concatenate(mass), np.concatenate(noop)
    assert bool(noop.any()) is noop_reached
    if not noop_reached:
        assert mass.max() <= task.facts(2)["entry_bound"] + 1e-12


def test_the_original_figures_cite_their_records():
    path = shared.Path(spec.__file__).with_name("original_figures.json")
    figures = json.loads(path.read_text(encoding="utf-8"))
    assert figures["repository"] == "Al-does/alex-rl-experiments"
    assert {run["leaf"] for run in figures["runs"]} == set(LEAVES)
    for run in figures["runs"]:
        assert run["path"].startswith(figures["study"]) and run["path"].endswith(".json")
        assert re.fullmatch(r"[0-9a-f]{40}", run["commit"])
        assert run["seed"] == 42 and run["observation_delay"] == LEAVES[run["leaf"]][1]
        final = run["final"]
        assert final["env_steps"] >= ORIGINAL_ENV_STEPS[run["leaf"]]
        assert math.isclose(sum(final["greedy_action_fractions"]), 1.0)
