"""Causal belief interventions with known answers: the minimum-norm edit (rank-deficient
belief probes included), the scores of exact linear shifts, toy modules whose action is (or
is not) a linear function of the belief their probe reads, the random-direction control,
and a real stateful transformer (before outputs are the rollout's own actions: the carried
cache stays unedited)."""

from __future__ import annotations

import gymnasium as gym
import matplotlib.image
import numpy as np
import pytest
import torch

from rl_harness.analysis import (
    BeliefEdit,
    ProbeSettings,
    Rollouts,
    belief_interventions,
    corner_beliefs,
    fit_affine,
    intervene,
    minimum_norm_edit,
    orthogonal_directions,
    other_step_beliefs,
    plot_action_shifts,
    policy_actions,
    probe_layers,
    replay_rollouts,
    replay_rollouts_named,
    rllib_action_transform,
    shift_difference,
    shift_scores,
)
from rl_harness.analysis.interventions import probe_subspace
from rl_harness.analysis.probes import bootstrap_weights
from rl_harness.learners.models import MLPActorCritic
from tests.analysis.test_replay import build, make_env, rollouts_of

# ---------------------------------------------------------------------------- the edit


def _belief_probe(rng, n=400, d=6):
    """A probe of beliefs (rows sum to 1) from a representation with noise dims: rank k-1."""
    beliefs = rng.dirichlet(np.ones(3), size=n)
    mixing = rng.normal(size=(3, d))
    h = beliefs @ mixing + 0.01 * rng.normal(size=(n, d))
    return fit_affine(h, beliefs), h, beliefs


def test_minimum_norm_edit_reaches_the_target_inside_the_probe_subspace():
    rng = np.random.default_rng(0)
    probe, h, _ = _belief_probe(rng)
    subspace = probe_subspace(probe)
    assert subspace.rank == 2  # the columns of W sum to ~0: beliefs live on a plane
    target = rng.dirichlet(np.ones(3), size=len(h))
    delta = minimum_norm_edit(probe, h, target)
    np.testing.assert_allclose(probe.predict(h + delta), target, atol=1e-9)
    # Inside the probe's subspace (nothing orthogonal to it changes) ...
    inside = delta @ subspace.basis @ subspace.basis.T
    np.testing.assert_allclose(delta, inside, atol=1e-12)
    # ... hence the least-norm solution: adding any null-space vector of W keeps the reading
    # and lengthens the edit.
    null = rng.normal(size=h.shape)
    null -= null @ subspace.basis @ subspace.basis.T
    np.testing.assert_allclose(probe.predict(h + delta + null), target, atol=1e-9)
    assert np.all(np.linalg.norm(delta + null, axis=1) > np.linalg.norm(delta, axis=1))
    # Not numpy's default pinv, which would invert the ~1e-16 singular value.
    assert np.abs(delta).max() < 1e3


def test_an_unreachable_target_gets_the_least_squares_edit():
    rng = np.random.default_rng(1)
    probe, h, _ = _belief_probe(rng)
    target = np.tile([0.5, 0.5, 0.5], (len(h), 1))  # sums to 1.5: off the probe's plane
    after = probe.predict(h + minimum_norm_edit(probe, h, target))
    np.testing.assert_allclose(after.sum(axis=1), 1.0, atol=1e-9)  # still on the plane
    np.testing.assert_allclose(after, np.full_like(after, 1 / 3), atol=1e-9)  # its projection


def test_orthogonal_directions_are_unit_vectors_the_probe_cannot_see():
    rng = np.random.default_rng(2)
    probe, h, _ = _belief_probe(rng)
    directions = orthogonal_directions(probe, (5, 7), np.random.default_rng(3))
    assert directions.shape == (5, 7, 6)
    np.testing.assert_allclose(np.linalg.norm(directions, axis=-1), 1.0)
    flat = directions.reshape(-1, 6)
    np.testing.assert_allclose(probe.predict(h[:35] + 3 * flat), probe.predict(h[:35]), atol=1e-9)
    again = orthogonal_directions(probe, (5, 7), np.random.default_rng(3))
    np.testing.assert_array_equal(directions, again)  # a named stream reproduces them


def test_counterfactual_beliefs_come_from_corners_and_other_episodes():
    episodes = np.repeat(np.eye(3)[[0, 1, 2, 0]][:, None] * 0.5 + 0.5 / 3, 5, axis=1)
    episodes[..., 0] += np.arange(4)[:, None] * 1e-3  # each episode identifiable
    corners = corner_beliefs(episodes, np.random.default_rng(0))
    assert corners.shape == episodes.shape
    assert set(map(tuple, corners.reshape(-1, 3))) <= {(1, 0, 0), (0, 1, 0), (0, 0, 1)}
    others = other_step_beliefs(episodes, np.random.default_rng(0))
    assert others.shape == episodes.shape
    own = np.isclose(others[..., 0][:, :, None], episodes[:, 0, 0][None, None, :])
    assert not np.any(own[np.arange(4), :, np.arange(4)])  # never its own episode
    assert np.all(own.sum(-1) == 1)  # always one real episode's belief


# ---------------------------------------------------------------------------- scores


def test_shift_scores_of_exact_linear_shifts():
    rng = np.random.default_rng(0)
    optimal = rng.normal(size=(20, 30, 2))
    weights = bootstrap_weights(20, 200, np.random.default_rng(1))
    full = shift_scores(optimal, optimal, weights=weights)
    half = shift_scores(0.5 * optimal, optimal, weights=weights)
    still = shift_scores(np.zeros_like(optimal), optimal, weights=weights)
    noise = shift_scores(rng.normal(size=optimal.shape), optimal, weights=weights)
    for scores, fraction in ((full, 1.0), (half, 0.5)):
        assert scores.correlation.value == pytest.approx(1.0)
        assert scores.cosine.value == pytest.approx(1.0)
        assert scores.fraction.value == pytest.approx(fraction)
        assert scores.fraction.low == pytest.approx(fraction)  # exact in every resample
    assert half.policy_shift_rms.value == pytest.approx(0.5 * half.optimal_shift_rms.value)
    assert still.fraction.value == 0.0 and still.policy_shift_rms.value == 0.0
    assert still.correlation is None and "does not move" in still.undefined["correlation"]
    assert abs(noise.correlation.value) < 0.1 and abs(noise.fraction.value) < 0.1
    assert noise.correlation.low < 0.0 < noise.correlation.high
    assert full.n_episodes == 20 and full.n_steps == 600
    paired = shift_difference((optimal, optimal), (0.5 * optimal, optimal), weights=weights)
    assert paired["fraction"].value == pytest.approx(0.5)
    assert paired["fraction"].low == pytest.approx(0.5) == paired["fraction"].high
    shifted = (0.3 * optimal, optimal)
    same = shift_difference(shifted, shifted, weights=weights)
    assert same["correlation"].low == same["correlation"].high == 0.0


# ---------------------------------------------------------------------------- toy modules

OBS_DIM, ACTIONS = 6, 2  # the belief (3) and three noise inputs; a 2-d Box action
A = np.array([[1.0, -2.0, 0.5], [0.0, 1.5, -1.0]])  # the optimal policy: a = A b + a0
A0 = np.array([0.3, -0.2])


def toy_module(reads: str, scale: float = 1.0) -> MLPActorCritic:
    """An MLP whose representation is its input + 10 (ReLU stays linear) and whose action
    mean is `scale` * A @ (belief part) ("belief") or A @ (noise part) ("noise")."""
    module = MLPActorCritic(
        observation_space=gym.spaces.Box(-20.0, 20.0, (OBS_DIM,), np.float32),
        action_space=gym.spaces.Box(-100.0, 100.0, (ACTIONS,), np.float32),
        model_config={"hidden_sizes": [OBS_DIM], "activation": "relu"},
    )
    with torch.no_grad():
        layer = module.encoder.net[0]
        layer.weight.copy_(torch.eye(OBS_DIM))
        layer.bias.fill_(10.0)
        head = module.pi.net[-1]
        head.weight.zero_()
        columns = slice(0, 3) if reads == "belief" else slice(3, 6)
        head.weight[:ACTIONS, columns] = torch.as_tensor(scale * A, dtype=torch.float32)
        head.bias.zero_()
    return module


def toy_rollouts(episodes: int = 40, steps: int = 60) -> Rollouts:
    rng = np.random.default_rng(7)
    # Multiples of 1/64: exact in float32, also after the +10, so the toy's answers are exact.
    shares = rng.dirichlet(np.ones(3), size=(episodes, steps)).reshape(-1, 3)
    beliefs = np.stack([rng.multinomial(64, p) for p in shares]).reshape(episodes, steps, 3) / 64
    noise = rng.integers(0, 65, size=(episodes, steps, 3)) / 64
    observations = np.concatenate([beliefs, noise], axis=-1).astype(np.float32)
    return Rollouts(
        observations=observations,
        representations=observations + 10.0,
        targets=beliefs,
        actions=np.zeros((episodes, steps, ACTIONS)),
        rewards=np.zeros((episodes, steps)),
        episode_ids=np.arange(episodes),
        episode_seeds=np.arange(episodes),
        num_envs=episodes,
    )


def optimal_policy(beliefs: np.ndarray) -> np.ndarray:
    return beliefs @ A.T + A0


def _interventions(agent, control, rollouts):
    rng = np.random.default_rng(11)
    return belief_interventions(
        agent,
        rollouts,
        layers=["representation"],
        optimal_policy=optimal_policy,
        counterfactuals={
            "corners": corner_beliefs(rollouts.targets, rng),
            "other_steps": other_step_beliefs(rollouts.targets, rng),
        },
        seed=0,
        control=control,
        n_bootstrap=200,
        # The toy representation has an exactly constant direction (the belief part sums to
        # 31): unregularized, the probe would fit rounding noise along it (docs/interventions.md).
        ridge=1e-9,
    )


def test_a_policy_linear_in_the_probed_belief_scores_perfectly_and_one_ignoring_it_zero():
    rollouts = toy_rollouts()
    report = _interventions(toy_module("belief"), toy_module("noise"), rollouts)
    assert report.n_bootstrap == 200 and len(report.test_episodes) == 10
    for name in ("corners", "other_steps"):
        agent = report.modules["agent"]["representation"].edits[name]
        assert agent.belief.correlation.value == pytest.approx(1.0, abs=1e-6)
        assert agent.belief.cosine.value == pytest.approx(1.0, abs=1e-6)
        assert agent.belief.fraction.value == pytest.approx(1.0, abs=1e-5)
        assert agent.probe_miss_rms < 1e-5  # the probe reads b' after the edit
        # The random control: same length, a direction the probe cannot see.
        assert agent.random_orthogonal.policy_shift_rms.value > 0.1
        assert abs(agent.random_orthogonal.correlation.value) < 0.15
        assert abs(agent.random_orthogonal.fraction.value) < 0.15
        assert agent.belief_minus_random["fraction"].low > 0.8
        ignoring = report.modules["control"]["representation"].edits[name]
        assert ignoring.belief.fraction.value == pytest.approx(0.0, abs=1e-6)
        assert ignoring.belief.policy_shift_rms.value == pytest.approx(0.0, abs=1e-6)
        assert ignoring.belief.correlation is None
        difference = report.differences["agent_minus_control"]["representation"][name]
        assert difference["fraction"].value == pytest.approx(1.0, abs=1e-5)
    as_json = report.to_dict()
    assert as_json["modules"]["agent"]["representation"]["probe_rank"] == 2
    assert (
        as_json["modules"]["control"]["representation"]["edits"]["corners"]["belief"]["correlation"]
        is None
    )


def test_a_policy_using_half_the_belief_direction_achieves_half_the_optimal_shift():
    report = _interventions(toy_module("belief", scale=0.5), None, toy_rollouts())
    scores = report.modules["agent"]["representation"].edits["corners"].belief
    assert scores.fraction.value == pytest.approx(0.5, abs=1e-5)
    assert scores.correlation.value == pytest.approx(1.0, abs=1e-6)
    assert report.differences == {}


def test_the_action_shift_figure_draws_every_series(tmp_path):
    rollouts = toy_rollouts(episodes=8, steps=20)
    report = _interventions(toy_module("belief"), toy_module("noise"), rollouts)
    drawn = plot_action_shifts(tmp_path / "shifts.png", report, title="toy", max_points=50)
    assert len(drawn) == 6 and all(0 < count <= 50 for count in drawn.values())
    assert matplotlib.image.imread(tmp_path / "shifts.png").shape[0] > 100
    with pytest.raises(ValueError, match="not in the report"):
        plot_action_shifts(tmp_path / "x.png", report, layers=["block_1"], title="toy")


def test_a_saturated_policy_moves_fully_before_the_clip_and_the_clipped_fraction_is_exact():
    """RLlib's unsquashing clips the mean to [-1, 1] before scaling it to the bounds (+-100).
    The toy's mean is 0.75 A b, so some coordinates saturate; the optimal policy is the
    unclipped 75 A b. Before the clip the belief edit moves the action by exactly the optimal
    shift (fraction 1); after it, by less. The clipped fraction is the share of coordinates
    with |0.75 A b| > 1, unedited (b) and after the edit (b', which the probe then reads)."""
    rollouts = toy_rollouts()
    space = gym.spaces.Box(-100.0, 100.0, (ACTIONS,), np.float32)
    rng = np.random.default_rng(11)
    corners = corner_beliefs(rollouts.targets, rng)
    module = toy_module("belief", scale=0.75)
    with torch.no_grad():  # cancel the representation's +10: the mean is 0.75 A b exactly
        module.pi.net[-1].bias[:ACTIONS] = torch.as_tensor(-7.5 * A.sum(1), dtype=torch.float32)
    report = belief_interventions(
        module,
        rollouts,
        layers=["representation"],
        optimal_policy=lambda beliefs: 75.0 * beliefs @ A.T,
        counterfactuals={"corners": corners},
        seed=0,
        n_bootstrap=50,
        ridge=1e-9,
        action_transform=rllib_action_transform(space),
        pre_clip_transform=rllib_action_transform(space, unclipped=True),
    )
    scores = report.modules["agent"]["representation"].edits["corners"]
    assert scores.pre_clip["belief"].fraction.value == pytest.approx(1.0, abs=1e-5)
    assert scores.pre_clip["belief"].correlation.value == pytest.approx(1.0, abs=1e-6)
    assert scores.belief.fraction.value < 0.9  # saturation hides part of the shift
    test = np.asarray(report.test_episodes)

    def saturated(beliefs: np.ndarray) -> float:
        return float(np.mean(np.abs(0.75 * beliefs @ A.T) > 1.0))

    expected_before, expected_after = saturated(rollouts.targets[test]), saturated(corners[test])
    assert 0.01 < expected_before < expected_after < 0.95  # a case with something to count
    assert scores.clipped_fraction["unedited"] == pytest.approx(expected_before, abs=1e-12)
    assert scores.clipped_fraction["belief"] == pytest.approx(expected_after, abs=1e-12)
    assert 0.0 <= scores.clipped_fraction["random_orthogonal"] <= 1.0
    as_json = report.to_dict()["modules"]["agent"]["representation"]["edits"]["corners"]
    assert as_json["pre_clip"]["belief"]["fraction"]["value"] == pytest.approx(1.0, abs=1e-5)
    assert as_json["clipped_fraction"]["unedited"] == pytest.approx(expected_before)
    # Without a transform nothing is clipped and the two shifts are the same.
    plain = _interventions(toy_module("belief"), None, rollouts)
    edit = plain.modules["agent"]["representation"].edits["corners"]
    assert edit.clipped_fraction == {"unedited": 0.0, "belief": 0.0, "random_orthogonal": 0.0}
    assert edit.pre_clip["belief"].fraction.value == pytest.approx(edit.belief.fraction.value)


def test_the_unclipped_rllib_transform_is_the_affine_unsquash():
    space = gym.spaces.Box(np.array([0.0, -1.0]), np.array([2.0, 3.0]), dtype=np.float64)
    raw = np.array([[0.5, -1.5], [2.0, 0.1]])
    clipped = rllib_action_transform(space)(raw)
    affine = rllib_action_transform(space, unclipped=True)(raw)
    np.testing.assert_allclose(affine, [[1.5, -2.0], [3.0, 1.2]])
    np.testing.assert_allclose(clipped, [[1.5, -1.0], [2.0, 1.2]], rtol=1e-6)
    same = rllib_action_transform(space, normalize_actions=False, unclipped=True)(raw)
    np.testing.assert_array_equal(same, raw)


# ---------------------------------------------------------------------------- real modules


def _greedy(name: str):
    module = build(name, seed=0)
    return module, rollouts_of(module, policy="greedy")


@pytest.mark.parametrize("name", ["gru", "transformer"])
def test_the_carried_state_is_the_unedited_one(name):
    module, rollouts = _greedy(name)
    layer = "block_1" if name == "transformer" else "representation"
    features = (
        probe_layers(module, rollouts, ProbeSettings(seed=0, n_bootstrap=10))
        if name == "transformer"
        else None
    )
    if features is not None:
        probe = features.evaluations[layer].probe
        assert features.evaluations["final_norm"].report == features.reports["final_norm"]
    else:
        probe = fit_affine(
            replay_rollouts(module, rollouts).reshape(-1, 8), rollouts.targets.reshape(-1, 3)
        )
    corners = corner_beliefs(rollouts.targets, np.random.default_rng(0))
    zero = np.zeros_like(rollouts.targets)
    done = intervene(
        module,
        rollouts,
        probe,
        {"corners": BeliefEdit(targets=corners), "nothing": BeliefEdit(shift=zero)},
        layer=layer,
    )
    space = make_env(1).single_action_space
    before = policy_actions(module, done.before.action_inputs, rllib_action_transform(space))
    # The unedited reading is what the agent did: every step started from its real state,
    # although every step was also edited (towards a corner) beside it.
    np.testing.assert_allclose(before, rollouts.actions, atol=1e-5)
    np.testing.assert_allclose(
        done.after["nothing"].action_inputs, done.before.action_inputs, atol=1e-5
    )
    assert np.abs(done.after["corners"].action_inputs - done.before.action_inputs).max() > 1e-4
    np.testing.assert_allclose(done.probe_after["corners"], corners, atol=1e-4)
    assert np.all(done.edit_norm["nothing"] < 1e-5)


@pytest.mark.parametrize("name", ["gru", "transformer"])
def test_the_unedited_read_is_replays(name):
    """intervene steps the module as replay does (ModuleStepper: same batches, extractor and
    carried state): its unedited residual is the one the probes were fitted on."""
    module, rollouts = _greedy(name)
    layer = "block_1" if name == "transformer" else "representation"
    if name == "transformer":
        replayed = replay_rollouts_named(module, rollouts)["block_1"]
    else:
        replayed = replay_rollouts(module, rollouts)
    flat = replayed.reshape(-1, replayed.shape[-1])
    probe = fit_affine(flat, rollouts.targets.reshape(-1, 3))
    edit = {"nothing": BeliefEdit(shift=np.zeros_like(rollouts.targets))}
    done = intervene(module, rollouts, probe, edit, layer=layer)
    norm = np.linalg.norm(replayed.astype(np.float64), axis=-1)
    np.testing.assert_allclose(done.representation_norm, norm, rtol=1e-12)
    reading = probe.predict(flat).reshape(rollouts.targets.shape)
    np.testing.assert_allclose(done.probe_before, reading, rtol=1e-9, atol=1e-9)


def test_a_carried_edit_changes_later_steps_only():
    module, rollouts = _greedy("transformer")
    probe = (
        probe_layers(module, rollouts, ProbeSettings(seed=0, n_bootstrap=10))
        .evaluations["block_1"]
        .probe
    )
    edit = {
        "corners": BeliefEdit(targets=corner_beliefs(rollouts.targets, np.random.default_rng(0)))
    }
    kept = intervene(module, rollouts, probe, edit, layer="block_1")
    carried = intervene(module, rollouts, probe, edit, layer="block_1", carry_edit=True)
    np.testing.assert_array_equal(carried.before.action_inputs, kept.before.action_inputs)
    first_kept = kept.after["corners"].action_inputs[:, 0]
    np.testing.assert_allclose(carried.after["corners"].action_inputs[:, 0], first_kept, atol=1e-5)
    later = (
        carried.after["corners"].action_inputs[:, 1:] - kept.after["corners"].action_inputs[:, 1:]
    )
    assert np.abs(later).max() > 1e-4
    # Each edit still makes the probe read its target on the edited history.
    np.testing.assert_allclose(carried.probe_after["corners"], edit["corners"].targets, atol=1e-4)


def test_intervention_errors_are_clear():
    module, rollouts = _greedy("gru")
    rng = np.random.default_rng(0)
    probe = fit_affine(rng.normal(size=(50, 8)), rng.normal(size=(50, 3)))
    ok = {"x": BeliefEdit(shift=np.zeros_like(rollouts.targets))}
    # A GRU has forward_heads but no residual edit: the error names the missing methods.
    with pytest.raises(TypeError, match=r"no encode_step_edited.*editing layer 'block_1'"):
        intervene(module, rollouts, probe, ok, layer="block_1")
    with pytest.raises(TypeError, match=r"no encode_step_edited.*: carry_edit needs"):
        intervene(module, rollouts, probe, ok, carry_edit=True)
    with pytest.raises(ValueError, match="exactly one of targets and shift"):
        intervene(module, rollouts, probe, {"x": BeliefEdit()})
    with pytest.raises(ValueError, match=r"targets/shift must be \(E, T, k\)"):
        intervene(module, rollouts, probe, {"x": BeliefEdit(shift=np.zeros((2, 2, 3)))})
    with pytest.raises(ValueError, match="must index the 6 episodes"):
        intervene(module, rollouts, probe, ok, episodes=np.array([7]))
