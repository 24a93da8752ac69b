"""The search for an operating point where memory pays (experiments.mess3_belief_geometry.
operating_point, issue 52 item 2): its pieces against known answers, the committed record
and the README table made from it."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from experiments.mess3_belief_geometry import operating_point as op
from experiments.mess3_belief_geometry import task
from experiments.mess3_belief_geometry.task import TaskPoint

from rl_harness.envs.mess3 import control_chain_transition
from rl_harness.envs.mess3.control import tilted_transitions

README = op.RECORD.with_name("README.md")
# The flagship's figures (issue 52, DESIGN.md): best stack-3 found 0.3679 of a 0.3819 ceiling.
FLAGSHIP_CEILING, FLAGSHIP_STACK_3 = 0.3819, 0.3679


def _run(value: float, seconds: float = 1.0) -> op.SolverRun:
    return op.SolverRun(value, True, 3, 1e-12, seconds)


def _scores(r2_6: float, policy: str = "belief_mdp") -> op.WindowScores:
    within = {k: r2_6 for k in op.WINDOW_KS}
    return op.WindowScores(policy, op.SCREEN_SIZE, within, within, 0.5, 0.01, 0.3, 2.0)


def _candidate(ceiling: float, stacks: dict[int, float | None], r2_6: float, **point):
    return op.Candidate(
        TaskPoint(**point),
        "coarse",
        _run(ceiling),
        {k: None if v is None else _run(v) for k, v in stacks.items()},
        [_scores(r2_6)],
    )


def test_window_r2_is_full_where_the_newest_token_and_action_fix_the_belief():
    # alpha = 1: the newest visible token is the state one step ago, so the decision belief
    # is that state's row of the executed tilted chain: a function of the k = 1 window.
    point = TaskPoint(alpha=1.0, mixing=0.5)
    rng = np.random.default_rng(0)

    def act(beliefs, tokens):  # actions that vary, so the belief does
        return rng.uniform(-point.w_max, point.w_max, (len(beliefs), 2))

    size = op.RolloutSize(episodes=64, warmup_steps=8, episode_steps=384)
    rollouts = op.policy_rollouts(point, act, size, "random")
    # The recorded beliefs are those rows, exactly (the env's decision belief).
    tokens = rollouts["sequence"][..., :3].argmax(-1)
    low, high = -point.w_max, point.w_max
    actions = low + (high - low) * rollouts["sequence"][..., 3:]
    rows = tilted_transitions(control_chain_transition(0.5), actions)
    expected = np.take_along_axis(rows, tokens[..., None, None], axis=-2)[..., 0, :]
    np.testing.assert_allclose(rollouts["targets"][:, 1:], expected[:, 1:], atol=1e-5)
    scores = op.window_scores(rollouts, "random", size, ks=(1, 2))
    assert scores.within_branch[1] > 0.95 and scores.global_r2[1] > 0.97
    assert scores.belief_variance > 0.05


def test_window_r2_is_low_where_the_belief_lives_in_old_tokens():
    # A slow chain with noisy tokens under zero tilt: the belief integrates many tokens, and
    # within branches of equal last 2 tokens a 1-step window explains far less than at alpha 1.
    point = TaskPoint(alpha=0.6, mixing=0.1)
    size = op.RolloutSize(episodes=64, warmup_steps=64, episode_steps=384)
    rollouts = op.policy_rollouts(point, lambda b, t: np.zeros((len(b), 2)), size, "passive")
    scores = op.window_scores(rollouts, "passive", size, ks=(1,))
    assert scores.within_branch[1] < 0.5
    assert 0.0 < scores.within_variance_share < 1.0


def test_within_variance_share_by_hand():
    # Two branches (last 2 tokens 00 and 11 after the first steps); targets constant within
    # each branch but for one step: the share is that step's squared deviation over the total.
    tokens = np.zeros((1, 6, 3))
    tokens[0, :3, 0] = 1
    tokens[0, 3:, 1] = 1
    targets = np.zeros((1, 6, 3))
    targets[0, 3:, 0] = 1.0
    assert op.within_variance_share(targets, tokens) == pytest.approx(0.0, abs=1e-12)
    targets[0, 5, 1] = 0.5  # within the (1, 1) branch of steps 4, 5
    total = ((targets[0] - targets[0].mean(0)) ** 2).sum()
    within = 2 * 0.25**2
    assert op.within_variance_share(targets, tokens) == pytest.approx(within / total)


def test_choose_takes_the_largest_memory_gain_among_points_meeting_both_bars():
    flagship = _candidate(0.38, {1: 0.19, 2: 0.31, 3: 0.368}, 0.98)
    small_gain = _candidate(0.50, {1: 0.1, 2: 0.3, 3: 0.35}, 0.5, mixing=0.3)
    big_gain = _candidate(0.90, {1: 0.2, 2: 0.5, 3: 0.6}, 0.7, mixing=0.1)
    too_smooth = _candidate(0.90, {1: 0.1, 2: 0.2, 3: 0.3}, 0.85, alpha=0.6)
    assert not flagship.meets() and not too_smooth.meets()
    assert small_gain.meets() and big_gain.meets()
    chosen, meets = op.choose([flagship, small_gain, big_gain, too_smooth])
    assert chosen is big_gain and meets
    assert op.memory_gain(big_gain) == pytest.approx(0.3)
    # None meets both: the smallest max(fraction of the largest k solved, window R²).
    unsolved = _candidate(0.9, {1: 0.1, 2: 0.5, 3: None}, 0.3, alpha=0.7)
    chosen, meets = op.choose([flagship, too_smooth, unsolved])
    assert chosen is unsolved and not meets  # max(0.5 / 0.9, 0.3) = 0.56
    assert op.can_qualify(unsolved) and not op.can_qualify(flagship)


def test_a_candidate_survives_its_record_and_the_table_shows_it():
    candidate = _candidate(0.9, {1: 0.1, 2: 0.5, 3: None}, 0.3, alpha=0.7, w_max=2.5)
    entry = json.loads(json.dumps(candidate.to_dict()))
    back = op.candidate_from_dict(entry)
    assert back.point == candidate.point and back.stacks == candidate.stacks
    assert back.windows == candidate.windows and back.belief_mdp == candidate.belief_mdp
    record = op.make_record([candidate], None, 12.0)
    rows = [line for line in op.table(record).splitlines() if line.startswith("| coarse")]
    assert len(rows) == 1 and "| 0.7 | 1 | 2.5 | 4 | 1 |" in rows[0]
    assert "| 0.111 / 0.556 / - |" in rows[0]


def test_refine_points_step_each_parameter_inside_its_range():
    points = op.refine_points(TaskPoint(alpha=0.6, mixing=0.1))
    assert TaskPoint(alpha=0.6, mixing=0.1, w_max=2.5) in points
    assert TaskPoint(alpha=0.6, mixing=0.1, beta=16.0) in points
    for neighbour in ({"alpha": 0.55}, {"alpha": 0.65}, {"mixing": 0.05}, {"mixing": 0.2}):
        assert TaskPoint(**({"alpha": 0.6, "mixing": 0.1} | neighbour)) in points
    assert all(0 < p.mixing <= 1 for p in op.refine_points(TaskPoint(mixing=1.0)))


def _committed() -> dict:
    return json.loads(op.RECORD.read_text())


def test_the_committed_record_reproduces_the_flagship_figures():
    flagship = [c for c in _committed()["candidates"] if c["stage"] == "flagship"]
    assert len(flagship) == 1 and flagship[0]["point"] == dataclasses.asdict(task.FLAGSHIP)
    entry = flagship[0]
    assert entry["belief_mdp"]["value"] == pytest.approx(FLAGSHIP_CEILING, abs=1e-3)
    assert entry["stacks"]["3"]["value"] == pytest.approx(FLAGSHIP_STACK_3, abs=1e-3)
    assert entry["fractions"]["3"] == pytest.approx(0.96, abs=0.01)
    assert entry["belief_mdp"]["converged"] and entry["stacks"]["3"]["converged"]
    # A 6-step window of tokens and actions gets nearly all of the belief within branches.
    assert entry["windows"][0]["policy"] == "belief_mdp"
    assert entry["windows"][0]["within_branch"]["6"] > 0.95
    assert not entry["meets_both"]


def test_the_chosen_point_is_the_memory_leaves_and_the_readme_shows_the_record():
    record = _committed()
    chosen = record["chosen"]
    assert chosen["point"] == dataclasses.asdict(task.TASK_POINTS["memory"])
    entry = next(c for c in record["candidates"] if c["point"] == chosen["point"])
    assert entry["meets_both"] is chosen["meets_both"]
    if chosen["meets_both"]:
        assert entry["fractions"]["3"] <= op.FRACTION_BAR
        assert entry["windows"][0]["within_branch"]["6"] <= op.WINDOW_BAR
    # Every candidate has the stack and window numbers the README table prints.
    for c in record["candidates"]:
        assert c["belief_mdp"]["converged"] is not None and "1" in c["stacks"]
        assert {str(k) for k in op.WINDOW_KS} <= set(c["windows"][0]["within_branch"])
    # The README's table is made from the record (rewrite: `operating_point --readme`).
    readme = README.read_text()
    assert op.readme_with_table(readme, record) == readme


@pytest.mark.slow
def test_the_search_reproduces_the_flagship_stack_3_from_scratch(tmp_path):
    ceiling, stacks = op.solve_point(task.FLAGSHIP, op.STACK_KS, tmp_path)
    assert ceiling.value == pytest.approx(FLAGSHIP_CEILING, abs=1e-3) and ceiling.converged
    assert stacks[3].value == pytest.approx(FLAGSHIP_STACK_3, abs=1e-3) and stacks[3].converged
    assert stacks[1].value < stacks[2].value <= stacks[3].value < ceiling.value
