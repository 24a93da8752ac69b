"""The occupancy-control study's causal belief interventions (issue 30), fast: the budgets
that size them and the stage writing interventions.json and its figure on a saved module (no
training). A finished run's are rewritten by `rl-harness analyze` (test_belief_geometry_smoke)."""

from __future__ import annotations

import dataclasses
import json

import matplotlib.image
import numpy as np
import pytest
from experiments.mess3_belief_geometry import interventions, probing
from experiments.mess3_belief_geometry.reward_only import experiment as reward_only

from rl_harness.analysis import collect_rollouts, load_module
from rl_harness.analysis.replay import replay_rollouts_named
from rl_harness.seeding import stream_seed
from tests.study.reward_only_runs import untrained_agent, write_finished_run
from tests.study.test_belief_geometry_configs import TRAINING_LEAVES, budgets, recipe

SEED = 3
# A stand-in for the belief-MDP policy (the real one is a cached solve): any fixed map from
# beliefs to actions in env units checks the plumbing.
MIXING = np.array([[4.0, -1.0], [-2.0, 3.0], [0.5, -4.5]])


def stand_in_policy(beliefs: np.ndarray) -> np.ndarray:
    return beliefs @ MIXING


@pytest.mark.parametrize("leaf", sorted(TRAINING_LEAVES))
def test_intervention_sizes_fit_the_probe_rollouts(leaf):
    module = recipe(leaf)
    for plan in budgets(module).values():
        assert 4 <= plan.intervention_episodes <= plan.probe_episodes
        assert 1 <= plan.intervention_steps <= plan.probe_steps
        # At least 2 held-out episodes to edit (the probe's test fraction).
        assert round(probing.PROBE_TEST_FRACTION * plan.intervention_episodes) >= 2
    smoke = module.SMOKE
    assert smoke.intervention_episodes * smoke.intervention_steps <= 256  # tiny


def _space(make_env):
    env = make_env(1)
    space = env.single_action_space
    env.close()
    return space


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A results folder as a finished smoke run of reward_only leaves it, with its agent
    saved where the run's final checkpoint would be (no training: an untrained module)."""
    agent, _ = untrained_agent()
    return write_finished_run(tmp_path_factory.mktemp("run"), agent, SEED)


def _pre_clip_fraction(edits):
    fraction = edits["pre_clip"]["belief"]["fraction"]
    return None if fraction is None else fraction["value"]


def test_the_stage_writes_interventions_json_and_its_figure(finished_run, tmp_path):
    _, checkpoint = finished_run
    plan = reward_only.SMOKE
    # The in-run stage on the run's own analysis rollouts (probe_steps long), cut to the
    # intervention sizes: same seeds, warm-up, batching and control as the analysis.
    module = load_module(checkpoint)
    make_env = probing.probe_env_factory(decision_belief_in_observation=False)
    analysis_rollouts = collect_rollouts(
        module,
        n_episodes=plan.probe_episodes,
        episode_steps=plan.probe_steps,
        policy="greedy",
        **probing.rollout_settings(plan, SEED, make_env, _space(make_env)),
    )
    control = probing.untrained_module(
        reward_only.module_spec(), make_env, stream_seed(SEED, "study", "untrained")
    )
    headline = interventions.run_interventions(
        tmp_path,
        label="reward_only",
        module=module,
        control=control,
        rollouts=interventions.intervention_rollouts(analysis_rollouts, plan),
        plan=plan,
        seed=SEED,
        checkpoint=checkpoint,
        say=lambda message: None,
        optimal_policy=stand_in_policy,
    )
    written = json.loads((tmp_path / interventions.INTERVENTIONS_FILE).read_text())
    assert written["recipe"] == "reward_only" and written["seed"] == SEED
    assert written["checkpoint"] == str(checkpoint)
    assert written["sizes"] == {
        "episodes": plan.intervention_episodes,
        "warmup_steps": plan.warmup_steps,
        "steps": plan.intervention_steps,
        "n_bootstrap": plan.n_bootstrap,
    }
    report = written["report"]
    assert report["layers"] == list(interventions.INTERVENTION_LAYERS)
    assert report["counterfactuals"] == ["corners", "other_steps"]
    assert set(report["modules"]) == {"agent", "control"}
    assert report["n_test_episodes"] == 2 and report["episode_steps"] == plan.intervention_steps
    edits = report["modules"]["agent"]["final_norm"]["edits"]["corners"]
    assert set(edits) >= {"belief", "random_orthogonal", "belief_minus_random"}
    assert edits["probe_miss_rms"] < 1e-3  # the edit made the probe read the corner
    # Beside the post-clip scores: the pre-clip ones and the clipped fractions (issue 37).
    assert written["schema_version"] == 2
    assert set(edits["pre_clip"]) == {"belief", "random_orthogonal"}
    assert set(edits["clipped_fraction"]) == {"unedited", "belief", "random_orthogonal"}
    assert all(0.0 <= value <= 1.0 for value in edits["clipped_fraction"].values())
    headline_corners = interventions.intervention_headline(written)["final_norm"]["corners"]
    assert headline_corners["agent_clipped_fraction"] == edits["clipped_fraction"]["belief"]
    assert headline_corners["agent_pre_clip"] == _pre_clip_fraction(edits)
    assert headline == interventions.intervention_headline(written)
    assert headline["final_norm"]["corners"]["agent"] == edits["belief"]["fraction"]["value"]
    image = matplotlib.image.imread(tmp_path / interventions.INTERVENTIONS_FIGURE)
    assert image.shape[0] > 200  # a row per layer
    assert sum(written["figure_points"].values()) > 0


def test_intervention_rollouts_cut_episodes_and_steps_but_keep_the_warmup():
    agent, make_env = untrained_agent()
    plan = reward_only.SMOKE
    rollouts = collect_rollouts(
        agent,
        n_episodes=plan.probe_episodes,
        episode_steps=plan.probe_steps,
        **probing.rollout_settings(plan, SEED, make_env, _space(make_env)),
    )
    # Fewer intervention episodes than probe episodes, as at the CPU budget (64 of 256): every
    # per-episode array must be cut, the warm-up actions too (a CPU run failed on that).
    plan = dataclasses.replace(plan, intervention_episodes=plan.probe_episodes // 2)
    n = plan.intervention_episodes
    assert rollouts.warmup_actions is not None  # the flagship module reads its previous action
    cut = interventions.intervention_rollouts(rollouts, plan)
    assert cut.observations.shape[:2] == (n, plan.intervention_steps)
    assert cut.targets.shape[:2] == cut.representations.shape[:2] == cut.rewards.shape
    assert cut.warmup_observations.shape[:2] == (n, plan.warmup_steps)
    assert cut.warmup_actions.shape[:2] == (n, plan.warmup_steps)
    assert cut.episode_ids.shape == cut.episode_seeds.shape == (n,)
    assert all(value.shape[:2] == (n, plan.intervention_steps) for value in cut.side.values())
    np.testing.assert_array_equal(cut.targets, rollouts.targets[:n, : plan.intervention_steps])
    np.testing.assert_array_equal(cut.warmup_actions, rollouts.warmup_actions[:n])
    # What the interventions do with them: replay the cut rollouts through the agent.
    named = replay_rollouts_named(agent, cut)
    assert all(value.shape[:2] == (n, plan.intervention_steps) for value in named.values())
    bigger = dataclasses.replace(plan, intervention_steps=plan.probe_steps + 1)
    with pytest.raises(ValueError, match="the rollouts hold"):
        interventions.intervention_rollouts(rollouts, bigger)
