"""Closed-loop analysis: counterfactual inputs, ablations that persist in the carried
context, agreement with a reference policy, each checkpoint on its own rollouts."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rl_harness.analysis import (
    ProbeSettings,
    RunArtifacts,
    ablate_rollouts,
    ablation_preprocess,
    action_agreement,
    check_closed_loop,
    collect_rollouts,
    counterfactual_representations,
    evaluate_probe,
    fit_affine,
    info_target,
    input_counterfactual,
    load_module,
    probe_checkpoints,
    probe_checkpoints_closed_loop,
    replay_rollouts,
    shift_report,
    swap_one_hot,
)
from rl_harness.envs.hmm import HMMVectorEnv
from rl_harness.envs.hmm.action_tasks import counterfactual_beliefs
from rl_harness.learners.models import StatefulTransformerActorCritic
from tests.analysis.conftest import ENV_CONFIG, EPISODE_LENGTH

FEEDBACK = {
    "model": "rl_harness.envs.mess3:mess3_model",
    "model_kwargs": {"x": 0.05, "alpha": 0.85},
    "task": "rl_harness.envs.hmm.action_tasks:GuessFeedbackTask",
    "task_kwargs": {"emission": "on_leave", "feedback": 0.1},
    "episode_length": 12,
    "token_window": 1,
    "action_window": 1,
    "info": ["decision_belief", "token", "action"],
}
STEPS = 12


def make_env(num_envs: int) -> HMMVectorEnv:
    return HMMVectorEnv(num_envs, FEEDBACK)


@pytest.fixture(scope="module")
def setup():
    env = make_env(1)
    torch.manual_seed(0)
    module = RLModuleSpec(
        module_class=StatefulTransformerActorCritic,
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
        model_config={
            "max_seq_len": 8,
            "context": 8,
            "d_model": 16,
            "num_heads": 2,
            "num_layers": 2,
            "prev_action": False,
        },
    ).build()
    rollouts = collect_rollouts(
        module,
        make_env,
        n_episodes=8,
        episode_steps=STEPS,
        seed=3,
        num_envs=4,
        target=info_target("decision_belief"),
    )
    return env, module, rollouts


def test_an_edit_of_the_newest_input_leaves_the_context_clean(setup):
    env, module, rollouts = setup
    edited, codes, mask = swap_one_hot(rollouts.observations, env.layout.actions)
    assert not mask[:, 0].any() and mask[:, 1:].all()  # no previous action at step 0
    clean, changed = counterfactual_representations(module, rollouts, edited)
    np.testing.assert_array_equal(clean, replay_rollouts(module, rollouts))
    np.testing.assert_array_equal(changed[:, 0], clean[:, 0])
    assert np.abs(changed[:, 1:] - clean[:, 1:]).max(axis=-1).min() > 0
    # Ablating every step corrupts the carried context too: at step 1 the context holds
    # only step 0 (which has no action), so both agree; from step 2 on they differ.
    masked = ablate_rollouts(rollouts, env.layout.actions, "mask", seed=0)
    assert masked.observations[..., env.layout.actions].max() == 0
    ablated = replay_rollouts(module, masked)
    newest_only = counterfactual_representations(module, rollouts, masked.observations)[1]
    np.testing.assert_allclose(ablated[:, :2], newest_only[:, :2], atol=1e-6)
    assert np.abs(ablated[:, 2:] - newest_only[:, 2:]).max(axis=-1).min() > 1e-6


def test_counterfactual_shift_against_the_exact_one(setup):
    env, module, rollouts = setup
    edited, codes, mask = swap_one_hot(rollouts.observations, env.layout.actions)
    tokens = rollouts.observations[..., env.layout.tokens].argmax(-1)
    previous = np.concatenate(
        [np.tile(env.model.initial, (rollouts.n_episodes, 1, 1)), rollouts.targets[:, :-1]], 1
    )
    actions = rollouts.observations[..., env.layout.actions].argmax(-1)
    # With the recorded action, the exact step is the env's own belief.
    same = counterfactual_beliefs(env.task, previous, actions, tokens)
    np.testing.assert_allclose(same[mask], rollouts.targets[mask], atol=1e-12)
    exact = counterfactual_beliefs(env.task, previous, np.where(mask, codes, 0), tokens)
    shift = np.where(mask[..., None], exact - rollouts.targets, 0.0)
    assert np.abs(shift[mask]).max() > 0.01  # the swap moves the exact belief
    probe = fit_affine(rollouts.representations.reshape(-1, 16), rollouts.targets.reshape(-1, 3))
    report = input_counterfactual(module, rollouts, probe, edited, shift, mask)
    assert report.n_steps == int(mask.sum()) and np.isfinite(report.cosine)
    perfect = shift_report(shift, shift, mask)
    assert (perfect.cosine, perfect.slope, perfect.r2) == pytest.approx((1.0, 1.0, 1.0))
    half = shift_report(0.5 * shift, shift, mask)
    assert (half.cosine, half.slope) == pytest.approx((1.0, 0.5))


def test_shuffles_keep_each_episodes_inputs_and_closed_loop_ablations_run(setup):
    env, module, rollouts = setup
    columns = env.layout.actions
    shuffled = ablate_rollouts(rollouts, columns, "shuffle", seed=0)
    for e in range(rollouts.n_episodes):
        before = rollouts.observations[e][:, columns]
        after = shuffled.observations[e][:, columns]
        assert sorted(map(tuple, before)) == sorted(map(tuple, after))
    assert not np.array_equal(shuffled.observations, rollouts.observations)
    np.testing.assert_array_equal(
        shuffled.observations[..., env.layout.tokens], rollouts.observations[..., env.layout.tokens]
    )
    with pytest.raises(ValueError, match="ablation must be one of"):
        ablate_rollouts(rollouts, columns, "drop", seed=0)
    masked_loop = collect_rollouts(
        module,
        make_env,
        n_episodes=4,
        episode_steps=STEPS,
        seed=3,
        num_envs=4,
        target=info_target("decision_belief"),
        preprocess=ablation_preprocess(columns, "mask", seed=0),
    )
    # The env still shows the actions; only the module's reading is corrupted.
    assert masked_loop.observations[:, 1:, columns].sum() > 0


def test_agreement_with_the_agents_own_greedy_actions_is_total(setup):
    _, module, rollouts = setup
    agreement = action_agreement(module, rollouts, rollouts.actions)
    assert agreement["greedy"] == 1.0 and 1 / 3 < agreement["sampled"] <= 1.0
    other = action_agreement(module, rollouts, (rollouts.actions + 1) % 3)
    assert other["greedy"] == 0.0 and other["sampled"] < agreement["sampled"]


@pytest.fixture(scope="module")
def checkpoint_pairs(tiny_run):
    run = RunArtifacts.open(tiny_run.results_dir)
    steps, _ = run.metric("num_env_steps_sampled_lifetime")
    return [(int(s), f) for s, f in zip(steps, run.checkpoints(), strict=True)]


def test_each_checkpoint_is_probed_on_its_own_rollouts(checkpoint_pairs):
    # The run's agent reads one token (Box (3,)) and guesses one of 3: here its guesses tilt
    # the process (feedback, emission on entering), so each checkpoint sees its own tokens.
    feedback = ENV_CONFIG | {
        "task": "rl_harness.envs.hmm.action_tasks:GuessFeedbackTask",
        "task_kwargs": {"emission": "on_enter", "feedback": 0.5},
    }

    def tiny_env(num_envs: int) -> HMMVectorEnv:
        return HMMVectorEnv(num_envs, feedback)

    def collect(module):
        return collect_rollouts(
            module,
            tiny_env,
            n_episodes=8,
            episode_steps=EPISODE_LENGTH,
            seed=2,
            num_envs=4,
            target=info_target("belief"),
            policy="sample",
        )

    def score(r):
        # Lists and nested mappings, as a study's read-outs are (fractions per action, by
        # guess); NumPy values included.
        counts = np.bincount(r.actions.reshape(-1), minlength=3) / r.actions.size
        return {
            "accuracy": r.mean_reward_per_step(),
            "fractions": counts,
            "by_guess": {str(a): [float(counts[a]), np.float32(a)] for a in range(3)},
        }

    settings = ProbeSettings(seed=1, n_bootstrap=20, branch_depth=1)
    lines: list[str] = []
    probes = probe_checkpoints_closed_loop(
        checkpoint_pairs,
        collect,
        settings,
        branch_tokens=lambda r: r.observations.argmax(-1),
        score=score,
        progress=lines.append,
    )
    assert len(lines) == len(checkpoint_pairs) and lines[-1].startswith(
        f"checkpoint {len(checkpoint_pairs)}/{len(checkpoint_pairs)} at "
    )
    assert [p.env_steps for p in probes] == sorted(s for s, _ in checkpoint_pairs)
    final = load_module(checkpoint_pairs[-1][1])
    own = collect(final)
    report = evaluate_probe(
        own.representations,
        own.targets,
        settings,
        branch_tokens=own.observations.argmax(-1),
    ).report
    assert probes[-1].r2_pooled == report.r2_pooled
    # The whole report is kept, with what a study reads beside the two R² values.
    assert probes[-1].report == report
    saved = json.loads(json.dumps(probes[-1].to_dict()))
    assert saved["mse"] == report.mse_pooled.value
    assert saved["target_variance"] == report.mse_best_constant_pooled.value
    within = report.within_branch.within_variance
    assert saved["branch_baseline_mse"] == pytest.approx(np.mean(list(within.values())))
    assert saved["report"]["mse_train_mean_pooled"] == report.mse_train_mean_pooled.to_dict()
    fractions = np.bincount(own.actions.reshape(-1), minlength=3) / own.actions.size
    assert saved["extra"]["fractions"] == fractions.tolist()
    assert saved["extra"]["by_guess"]["2"] == [fractions[2], 2.0]
    assert saved["extra"]["accuracy"] == own.mean_reward_per_step()
    # The fixed replay scores the first checkpoint on the final agent's histories instead.
    first_rollouts = collect(load_module(checkpoint_pairs[0][1]))
    assert not np.array_equal(first_rollouts.observations, own.observations)
    fixed = probe_checkpoints(
        checkpoint_pairs, own, settings, branch_tokens=own.observations.argmax(-1)
    )
    assert fixed[-1].r2_pooled == probes[-1].r2_pooled
    assert fixed[0].r2_pooled != probes[0].r2_pooled
    assert probes[0].to_dict()["extra"]["accuracy"] == first_rollouts.mean_reward_per_step()


def test_a_dict_reading_module_is_analysed_on_flat_records():
    from rl_harness.envs.hmm import split_observation
    from rl_harness.learners.models import TransformerActorCritic

    config = FEEDBACK | {"token_window": 4, "action_window": 4, "episode_length": 16}
    flat = HMMVectorEnv(1, config)
    as_dict = HMMVectorEnv(1, config | {"dict_observation": True})
    torch.manual_seed(0)
    module = RLModuleSpec(
        module_class=TransformerActorCritic,
        observation_space=as_dict.single_observation_space,
        action_space=as_dict.single_action_space,
        model_config={
            "context_len": 4,
            "window_keys": ["tokens", "actions"],
            "d_model": 8,
            "num_heads": 2,
            "num_layers": 1,
            "newest_first": True,
        },
    ).build()

    def to_dict(obs):
        return split_observation(obs, flat.parts)

    rollouts = collect_rollouts(
        module,
        lambda n: HMMVectorEnv(n, config),
        n_episodes=4,
        episode_steps=16,
        seed=0,
        num_envs=4,
        target=info_target("decision_belief"),
        preprocess=to_dict,
    )
    assert rollouts.observations.shape == (4, 16, flat.layout.size)
    np.testing.assert_array_equal(
        replay_rollouts(module, rollouts, preprocess=to_dict), rollouts.representations
    )
    obs, _ = as_dict.reset(seed=5)
    flat_obs, _ = flat.reset(seed=5)
    for key, value in to_dict(flat_obs).items():
        np.testing.assert_array_equal(value, obs[key])


def test_side_arrays_are_recorded_beside_the_targets_and_not_probed(setup):
    _, module, rollouts = setup

    def collect(**extra):
        return collect_rollouts(
            module,
            make_env,
            n_episodes=8,
            episode_steps=STEPS,
            seed=3,
            num_envs=4,
            target=info_target("decision_belief"),
            **extra,
        )

    with_side = collect(side={"token": info_target("token"), "action": info_target("action")})
    np.testing.assert_array_equal(with_side.targets, rollouts.targets)
    np.testing.assert_array_equal(with_side.representations, rollouts.representations)
    tokens = collect_rollouts(
        module,
        make_env,
        n_episodes=8,
        episode_steps=STEPS,
        seed=3,
        num_envs=4,
        target=info_target("token"),
    ).targets
    assert with_side.side["token"].shape == (8, STEPS, 1)
    np.testing.assert_array_equal(with_side.side["token"], tokens)
    assert rollouts.side == {}


def test_a_bad_score_fails_before_training_not_after(setup):
    _, module, _ = setup

    def collect(m):
        return collect_rollouts(
            m,
            make_env,
            n_episodes=4,
            episode_steps=4,
            seed=0,
            num_envs=4,
            target=info_target("decision_belief"),
        )

    good = check_closed_loop(
        module, collect, score=lambda r: {"fractions": np.ones(3) / 3, "n": {"steps": 16}}
    )
    assert good == {"fractions": [1 / 3] * 3, "n": {"steps": 16.0}}
    with pytest.raises(TypeError, match="score/by_state/0 is a str"):
        check_closed_loop(module, collect, score=lambda r: {"by_state": {"0": "high"}})
    with pytest.raises(TypeError, match=r"score/flags\[1\] is a bool"):
        check_closed_loop(module, collect, score=lambda r: {"flags": [1.0, True]})
    with pytest.raises(ValueError, match="branch_tokens must give codes"):
        check_closed_loop(module, collect, branch_tokens=lambda r: r.actions[:, :2])


# A recipe that checks its closed-loop analysis before it trains (as a study should): its
# score returns a string, so the run fails before Ray starts and before any iteration.
CHECKED_RECIPE = """
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from rl_harness import run_algorithm
from rl_harness.analysis import check_closed_loop, collect_rollouts, info_target
from rl_harness.envs.hmm import HMMVectorEnv
from rl_harness.learners.models import MLPActorCritic

ENV = {
    "model": "rl_harness.envs.mess3:mess3_model",
    "model_kwargs": {"x": 0.05, "alpha": 0.85},
    "task": "rl_harness.envs.mess3.tasks:NextTokenTask",
    "episode_length": 8,
    "token_window": 1,
    "info": ["belief"],
}

def collect(module):
    return collect_rollouts(module, lambda n: HMMVectorEnv(n, ENV), n_episodes=2,
                            episode_steps=4, seed=0, num_envs=2, target=info_target("belief"))

def run(context):
    env = HMMVectorEnv(1, ENV)
    spaces = {"observation_space": env.single_observation_space,
              "action_space": env.single_action_space}
    module = RLModuleSpec(module_class=MLPActorCritic, **spaces).build()
    check_closed_loop(module, collect, score=lambda r: {"verdict": "fine"})
    run_algorithm(PPOConfig().environment("CartPole-v1"), context, stop=1)
"""


def test_a_recipe_that_checks_first_fails_in_seconds(tmp_path):
    from rl_harness.cli import main
    from tests.tools.helpers import manifest, run_dirs, write_leaf

    leaf = write_leaf(tmp_path, CHECKED_RECIPE)
    assert main([str(leaf)]) == 1
    (run,) = run_dirs(leaf)
    record = manifest(run)
    assert record["status"] == "failed"
    assert record["error"]["type"] == "TypeError"
    assert "score/verdict is a str" in record["error"]["message"]
    assert not (run / "metrics.jsonl").exists()  # no iteration ran
