"""Causal belief interventions: does the policy act on the belief its probe reads?

A probe shows that a belief is decodable from a representation, not that the policy uses
it. Here the representation at one layer is edited, within one step, so that the probe
reads a chosen counterfactual belief b', and the rest of the module runs from the edited
representation; the policy's action shift is then compared with the shift an optimal
policy makes between the belief b and b' (any callable, e.g. a belief-MDP solver's policy:
analysis knows no env, the caller injects it). See docs/interventions.md.

The edit (`minimum_norm_edit`): with the affine probe b_hat(h) = h @ W + c (W: d x k), the
least-norm change of h that moves the reading to b' is delta = (b' - b_hat(h)) @ pinv(W).
It lies in the column space of W (the directions the probe reads) and leaves the orthogonal
complement untouched. The pseudo-inverse drops singular values below `rank_tol` times the
largest: a probe of targets that sum to 1 (beliefs) has columns of W that sum to ~0, so W
has rank k - 1 and only readings on the plane sum(b) = 1 are reachable; a b' off that plane
gets the least-squares edit (the probe then reads the projection of b' onto the plane,
reported as `probe_miss_rms`). Beliefs in the simplex are always reachable.

The control edit (`orthogonal_directions`): at each step, the same length as the belief
edit, along a random unit direction orthogonal to the probe's subspace (a named seeding
stream). A second control, the same procedure on another module (e.g. an untrained one
with its own probe fitted on the same rollouts), is the caller's second module.

Where the edit happens (`intervene`): rollouts are replayed as in `replay.py` (the carried
state is the unedited one, so every step starts from what the agent actually had); at each
recorded step the module reads the step once unedited (the "before" outputs) and once per
edit with the residual at `layer` edited:

- a module with `encode_step_edited(batch, layer, edit)` (StatefulTransformerActorCritic):
  any residual ("embed", "block_1".."block_L", "final_norm"); the later blocks, final norm
  and heads run from the edited residual; the K/V cache carried to the next step is the
  unedited one unless `carry_edit=True` (then each edit's rows carry their own edited
  cache, and edits at later steps are computed on that edited history);
- any ActorCriticRLModule (MLP, GRU, window transformer): layer "representation", the
  vector the heads read (`encode`); the heads run from the edited one (`forward_heads`).

Scores (`shift_scores`), from per-episode sums so a bootstrap over episodes is one matrix
product (`probes.bootstrap`): with p the policy's action shift and o the optimal one,
(E, T, A) each, pooled over steps and action coordinates:

- correlation: Pearson, each coordinate centred on its own mean (None when the policy does
  not move: its shift at most SHIFT_TOL times the optimal one);
- cosine: sum(p . o) / sqrt(sum |p|^2 sum |o|^2);
- fraction: sum(p . o) / sum |o|^2, the projection of the policy's shift on the optimal
  one as a fraction of its length (1: the full optimal shift; 0: none of it);
- policy_shift_rms, optimal_shift_rms: sqrt(mean over steps of |p|^2), sqrt(... |o|^2).

Actions (`policy_actions`): for a Box action space the distribution's mean (the greedy
action) through the rollouts' `action_transform` (env units: RLlib's unsquashing clips, so
a saturated action cannot move); for a Discrete one the action probabilities (the mean of
the one-hot action), against an optimal policy that returns probabilities.

Before saturation (Box actions): the policy head is linear, so the shift of the
distribution's mean before the transform is what the edit did to the policy, saturated or
not. `belief_interventions` scores it too (`EditScores.pre_clip`), mapped to env units by
`pre_clip_transform` (the transform without its clipping, e.g.
`rllib_action_transform(space, unclipped=True)`; none: the mean's own units), and reports
`clipped_fraction`: the fraction of action coordinates the transform saturates (where it
differs from its unclipped version), unedited and after each edit. A policy that moves
fully before the clip but is saturated reads fraction 1 before and less after it.

`belief_interventions` composes it all for the agent and a control module: per-layer
probes (`probe_named`, the same split for both), the edits on the probes' held-out
episodes, scores, the random-direction control, paired bootstrap differences (belief edit
minus random edit, agent minus control) and the arrays `plot_action_shifts` draws.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from rl_harness.analysis.layer_probes import probe_named
from rl_harness.analysis.probes.affine import AffineProbe
from rl_harness.analysis.probes.bootstrap import Estimate, bootstrap_weights, estimates
from rl_harness.analysis.probes.evaluate import ProbeReport
from rl_harness.analysis.replay import (
    Preprocess,
    replay_rollouts,
    replay_rollouts_named,
    rollout_observations,
)
from rl_harness.analysis.rollouts import (
    OBS,
    STATE_IN,
    STATE_OUT,
    ActionTransform,
    ModuleStepper,
    Rollouts,
    step_batch,
)
from rl_harness.seeding import stream_rng

if TYPE_CHECKING:
    from ray.rllib.core.rl_module.rl_module import RLModule

DEFAULT_STREAM = ("analysis", "interventions")
REPRESENTATION = "representation"  # the layer every module has: what its heads read
FINAL_NORM = "final_norm"  # its name among a transformer's residuals
RANK_TOL = 1e-8  # singular values below this fraction of the largest count as zero
SHIFT_TOL = 1e-9  # a policy shift at most this fraction of the optimal one does not move
BELIEF, RANDOM = "belief", "random_orthogonal"  # the two edits of each counterfactual
STATISTICS = ("correlation", "cosine", "fraction", "policy_shift_rms", "optimal_shift_rms")


# ---------------------------------------------------------------------------- edits


@dataclass(frozen=True)
class ProbeSubspace:
    """What an affine probe reads: `inverse` (k, d) maps a change of the reading to the
    least-norm change of the representation; `basis` (d, rank) is an orthonormal basis of
    the directions it reads (the column space of its weights)."""

    inverse: np.ndarray
    basis: np.ndarray
    rank: int


def probe_subspace(probe: AffineProbe, rank_tol: float = RANK_TOL) -> ProbeSubspace:
    """The pseudo-inverse of the probe's weights (d, k), singular values below
    `rank_tol` x the largest dropped (a belief probe's weights have rank k - 1)."""
    weights = np.asarray(probe.weights, dtype=np.float64)
    u, s, vt = np.linalg.svd(weights, full_matrices=False)
    if s.size == 0 or not s[0] > 0:
        raise ValueError("the probe's weights are all zero: it reads no direction to edit")
    keep = s > rank_tol * s[0]
    u, s, vt = u[:, keep], s[keep], vt[keep]
    return ProbeSubspace(inverse=(vt.T / s) @ u.T, basis=u, rank=int(keep.sum()))


def minimum_norm_edit(
    probe: AffineProbe,
    representations: np.ndarray,
    targets: np.ndarray,
    rank_tol: float = RANK_TOL,
) -> np.ndarray:
    """(n, d) least-norm changes of (n, d) representations after which the probe reads
    (n, k) targets (or their least-squares best where W's rank falls short, see the module
    docstring); each change lies in the probe's subspace."""
    h = np.asarray(representations, dtype=np.float64)
    goal = np.asarray(targets, dtype=np.float64)
    if goal.shape != (h.shape[0], probe.weights.shape[1]):
        raise ValueError(
            f"targets must be (n, k) = ({h.shape[0]}, {probe.weights.shape[1]}), got {goal.shape}"
        )
    return (goal - probe.predict(h)) @ probe_subspace(probe, rank_tol).inverse


def orthogonal_directions(
    probe: AffineProbe,
    shape: tuple[int, ...],
    rng: np.random.Generator,
    rank_tol: float = RANK_TOL,
) -> np.ndarray:
    """(*shape, d) random unit vectors orthogonal to the probe's subspace (Gaussian draws
    with that subspace projected out): the directions of the control edit."""
    basis = probe_subspace(probe, rank_tol).basis
    d = basis.shape[0]
    if basis.shape[1] >= d:
        raise ValueError(f"the probe reads all {d} directions: none is orthogonal to it")
    draws = rng.standard_normal((*shape, d))
    draws -= (draws @ basis) @ basis.T
    return draws / np.linalg.norm(draws, axis=-1, keepdims=True)


def corner_beliefs(targets: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Counterfactual beliefs (E, T, k): a uniformly drawn corner of the simplex per step."""
    shape = np.shape(targets)
    corners = rng.integers(0, shape[-1], size=shape[:-1])
    return np.eye(shape[-1])[corners]


def other_step_beliefs(targets: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Counterfactual beliefs (E, T, k): per step, the belief of a uniformly drawn step of
    another episode (so b' is a belief the process really reaches, unrelated to b)."""
    beliefs = np.asarray(targets, dtype=np.float64)
    episodes, steps = beliefs.shape[:2]
    if episodes < 2:
        raise ValueError("other steps' beliefs need at least 2 episodes")
    other = (np.arange(episodes)[:, None] + rng.integers(1, episodes, (episodes, steps))) % episodes
    return beliefs[other, rng.integers(0, steps, (episodes, steps))]


@dataclass(frozen=True)
class BeliefEdit:
    """One edit per recorded step of the episodes an intervention runs on (arrays aligned
    with `intervene`'s `episodes`): `targets` (E, T, k), what the probe reads after it, or
    `shift` (E, T, k), how far its reading moves. `directions` (E, T, d) unit vectors turn
    it into the control: the minimum-norm edit's length, along these directions."""

    targets: np.ndarray | None = None
    shift: np.ndarray | None = None
    directions: np.ndarray | None = None


# ---------------------------------------------------------------------------- intervene


@dataclass(frozen=True)
class PolicyOutputs:
    """The heads' outputs at every recorded step: action distribution inputs
    (E, T, A_in) and values (E, T)."""

    action_inputs: np.ndarray
    values: np.ndarray


@dataclass(frozen=True)
class Intervention:
    """`intervene`'s record: the unedited outputs and, per named edit, the edited ones."""

    layer: str
    episodes: np.ndarray  # (E,) indices into the rollouts
    before: PolicyOutputs
    after: dict[str, PolicyOutputs]
    probe_before: np.ndarray  # (E, T, k) the probe's reading of the unedited residual
    probe_after: dict[str, np.ndarray]  # (E, T, k) its reading of each edited one
    edit_norm: dict[str, np.ndarray]  # (E, T) |delta|
    representation_norm: np.ndarray  # (E, T) |h| at the layer, for scale
    carry_edit: bool


def _repeat_rows(tree: Any, times: int) -> Any:
    """Every tensor of a (nested) state tiled `times` along the batch: condition-major."""
    if isinstance(tree, Mapping):
        return {key: _repeat_rows(value, times) for key, value in tree.items()}
    return tree.repeat(times, *([1] * (tree.dim() - 1)))


def _check_edit(name: str, edit: BeliefEdit, shape: tuple[int, int], k: int, d: int) -> None:
    if (edit.targets is None) == (edit.shift is None):
        raise ValueError(f"edit {name!r} needs exactly one of targets and shift")
    goal = edit.targets if edit.targets is not None else edit.shift
    if np.shape(goal) != (*shape, k):
        raise ValueError(f"edit {name!r}: targets/shift must be (E, T, k) = {(*shape, k)}")
    if edit.directions is not None and np.shape(edit.directions) != (*shape, d):
        raise ValueError(f"edit {name!r}: directions must be (E, T, d) = {(*shape, d)}")


def _can_edit_layers(module: RLModule) -> bool:
    return callable(getattr(module, "encode_step_edited", None))


def _read(module: RLModule, batch: dict[str, Any], layer: str, by_layer: bool) -> tuple:
    """Unedited (residual at `layer` (N, d), representation the heads read (N, d), state
    out or None) of one step."""
    if by_layer:
        step = step_batch(batch) if module.is_stateful() else batch  # as `replay` reads it
        residuals, state_out = module.encode_step_residuals(step)
        if layer not in residuals:
            raise ValueError(f"unknown layer {layer!r}; the residuals are {', '.join(residuals)}")
        return residuals[layer], residuals[FINAL_NORM], state_out
    representation = module.encode(batch)
    state_out = None
    if module.is_stateful():
        representation = representation[:, 0] if representation.dim() == 3 else representation
        state_out = module.forward_inference(batch)[STATE_OUT]
    return representation, representation, state_out


@dataclass(frozen=True)
class _StepEdits:
    """The edits of one batch of m rows at one step, condition-major (C * m rows), as
    tensors: the probe (weights (d, k), bias (k,), pseudo-inverse (k, d)), each row's goal
    (targets or shift), whether it reads the probe, and its control direction if any."""

    weights: torch.Tensor
    bias: torch.Tensor
    inverse: torch.Tensor
    goal: torch.Tensor  # (C * m, k)
    reads: torch.Tensor  # (C * m, 1) 1.0: goal is a target reading; 0.0: a shift
    unit: torch.Tensor | None  # (C * m, d) control directions (zeros for belief edits)
    directed: torch.Tensor  # (C * m, 1) bool: the row is a control edit

    def delta(self, h: torch.Tensor) -> torch.Tensor:
        """(C * m, d) float64 edits of residuals h: the least-norm change to the goal, or
        for control rows that change's length along the row's direction."""
        change = self.goal - self.reads * (h.double() @ self.weights + self.bias)
        delta = change @ self.inverse
        if self.unit is None:
            return delta
        length = delta.norm(dim=-1, keepdim=True)
        return torch.where(self.directed, length * self.unit, delta)

    def apply(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.delta(h).to(h.dtype)


@dataclass(frozen=True)
class _Plan:
    """What `intervene` does at every step (arrays over all chosen episodes)."""

    layer: str
    by_layer: bool
    carry_edit: bool
    goals: np.ndarray
    reads: np.ndarray
    directed: np.ndarray
    directions: np.ndarray | None
    probe: AffineProbe
    subspace: ProbeSubspace


def intervene(
    module: RLModule,
    rollouts: Rollouts,
    probe: AffineProbe,
    edits: Mapping[str, BeliefEdit],
    *,
    layer: str = REPRESENTATION,
    episodes: np.ndarray | None = None,
    preprocess: Preprocess | None = None,
    carry_edit: bool = False,
    batch_size: int | None = None,
    rank_tol: float = RANK_TOL,
) -> Intervention:
    """Replay `episodes` of `rollouts` (default all) through `module`; at every recorded
    step, read the heads' outputs unedited and with the residual at `layer` edited by each
    of `edits` (all edits of a step in one batched pass). `probe` reads that residual
    (fitted on it, e.g. `probe_layers(...).evaluations[layer].probe`).

    `layer`: "representation" (any module: what the heads read) or, for a module with
    `encode_step_edited`, one of its residuals. The state carried to the next step is the
    unedited one; with `carry_edit`, each edit's rows carry their own edited state instead
    (and later edits are computed on that history). `preprocess` must be the rollouts'
    own. Rows are stepped `batch_size` at a time (default: the rollouts' num_envs).
    """
    if not edits:
        raise ValueError("intervene needs at least one named edit")
    if not callable(getattr(module, "forward_heads", None)):
        raise TypeError(
            f"{type(module).__name__} has no forward_heads(representation): interventions "
            "run the heads from an edited representation (ActorCriticRLModule has it)"
        )
    by_layer = _can_edit_layers(module)
    if not by_layer and layer != REPRESENTATION:
        raise ValueError(
            f"{type(module).__name__} has no encode_step_edited: only layer "
            f"{REPRESENTATION!r} (what the heads read) can be edited, not {layer!r}"
        )
    if carry_edit and not by_layer:
        raise ValueError("carry_edit needs a module with encode_step_edited")
    chosen = np.arange(rollouts.n_episodes) if episodes is None else np.asarray(episodes)
    if chosen.ndim != 1 or chosen.size == 0 or not np.issubdtype(chosen.dtype, np.integer):
        raise ValueError(f"episodes must be a non-empty 1-D int array, got {episodes!r}")
    if chosen.min() < 0 or chosen.max() >= rollouts.n_episodes:
        raise ValueError(f"episodes must index the {rollouts.n_episodes} episodes of the rollouts")
    shape = (len(chosen), rollouts.episode_steps)
    d, k = np.shape(probe.weights)
    for key, edit in edits.items():
        _check_edit(key, edit, shape, k, d)
    size = batch_size or rollouts.num_envs or len(chosen)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    names = list(edits)
    plan = _Plan(
        layer=FINAL_NORM if by_layer and layer == REPRESENTATION else layer,
        by_layer=by_layer,
        carry_edit=carry_edit,
        # (C, E, T, k) goals, (C,) reads / directed, (C, E, T, d) directions or None.
        goals=np.stack(
            [e.targets if e.targets is not None else e.shift for e in edits.values()]
        ).astype(np.float64),
        reads=np.array([e.targets is not None for e in edits.values()]),
        directed=np.array([e.directions is not None for e in edits.values()]),
        directions=(
            np.stack(
                [
                    np.zeros((*shape, d)) if e.directions is None else e.directions
                    for e in edits.values()
                ]
            )
            if any(e.directions is not None for e in edits.values())
            else None
        ),
        probe=probe,
        subspace=probe_subspace(probe, rank_tol),
    )
    observations, warmup = rollout_observations(rollouts)
    parts = []
    was_training = module.training
    module.eval()
    try:
        with torch.inference_mode():
            for first in range(0, len(chosen), size):
                rows = np.arange(first, min(first + size, len(chosen)))
                obs = observations[chosen[rows]]
                parts.append(_intervene_rows(module, obs, warmup, rows, plan, preprocess))
    finally:
        module.train(was_training)
    before = {key: np.concatenate([p[0][key] for p in parts]) for key in parts[0][0]}
    after = {key: np.concatenate([p[1][key] for p in parts], axis=1) for key in parts[0][1]}
    return Intervention(
        layer=layer,
        episodes=chosen,
        before=PolicyOutputs(before["inputs"], before["values"]),
        after={
            key: PolicyOutputs(after["inputs"][c], after["values"][c])
            for c, key in enumerate(names)
        },
        probe_before=before["probe"],
        probe_after={key: after["probe"][c] for c, key in enumerate(names)},
        edit_norm={key: after["edit_norm"][c] for c, key in enumerate(names)},
        representation_norm=before["norm"],
        carry_edit=carry_edit,
    )


def _intervene_rows(
    module: RLModule,
    observations: np.ndarray,
    warmup: int,
    rows: np.ndarray,
    plan: _Plan,
    preprocess: Preprocess | None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """One batch of m rows (their warm-up then recorded observations (m, W + T, ...)):
    ({inputs (m, T, A_in), values, probe, norm}, {inputs (C, m, T, A_in), values, probe,
    edit_norm}) for the unedited and the edited passes."""
    m, conditions = len(rows), len(plan.reads)
    stepper = ModuleStepper(module, m)
    device, stateful = stepper.device, stepper.stateful

    def tensor(values: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(values, device=device)

    weights = tensor(np.asarray(plan.probe.weights, dtype=np.float64))
    bias = tensor(np.asarray(plan.probe.bias, dtype=np.float64))
    inverse = tensor(plan.subspace.inverse)
    reads = tensor(np.repeat(plan.reads, m).astype(np.float64))[:, None]
    directed = tensor(np.repeat(plan.directed, m))[:, None]
    state, edited_state = stepper.state, None
    before: list[dict[str, np.ndarray]] = []
    after: list[dict[str, np.ndarray]] = []
    for t in range(observations.shape[1]):
        step_obs = observations[:, t]
        x = tensor(np.ascontiguousarray(preprocess(step_obs) if preprocess else step_obs))
        batch: dict[str, Any] = {OBS: x[:, None] if stateful else x}
        if stateful:
            batch[STATE_IN] = state
        residual, representation, state_out = _read(module, batch, plan.layer, plan.by_layer)
        if t >= warmup:
            s = t - warmup
            unit = None
            if plan.directions is not None:
                unit = tensor(plan.directions[:, rows, s].reshape(conditions * m, -1))
            edits = _StepEdits(
                weights=weights,
                bias=bias,
                inverse=inverse,
                goal=tensor(plan.goals[:, rows, s].reshape(conditions * m, -1)),
                reads=reads,
                unit=unit,
                directed=directed,
            )
            many: dict[str, Any] = {OBS: _repeat_rows(batch[OBS], conditions)}
            if stateful:
                carried = plan.carry_edit and edited_state is not None
                many[STATE_IN] = edited_state if carried else _repeat_rows(state, conditions)
            if plan.by_layer:
                residuals, edited_rep, edited_out = module.encode_step_edited(
                    step_batch(many) if stateful else many, plan.layer, edits.apply
                )
                if plan.carry_edit:
                    edited_state = edited_out
            else:
                residuals = residual.repeat(conditions, 1)
                edited_rep = edits.apply(residuals)
            delta = edits.delta(residuals)
            edited = (residuals + delta.to(residuals.dtype)).double()
            inputs, values = module.forward_heads(representation)
            edited_inputs, edited_values = module.forward_heads(edited_rep)
            h = residual.double()
            before.append(
                {
                    "inputs": inputs,
                    "values": values,
                    "probe": h @ weights + bias,
                    "norm": h.norm(dim=-1),
                }
            )
            after.append(
                {
                    "inputs": edited_inputs.reshape(conditions, m, -1),
                    "values": edited_values.reshape(conditions, m),
                    "probe": (edited @ weights + bias).reshape(conditions, m, -1),
                    "edit_norm": delta.norm(dim=-1).reshape(conditions, m),
                }
            )
        state = state_out

    def stacked(steps: list[dict[str, torch.Tensor]], axis: int) -> dict[str, np.ndarray]:
        return {
            key: torch.stack([step[key] for step in steps], dim=axis).cpu().numpy()
            for key in steps[0]
        }

    return stacked(before, 1), stacked(after, 2)


def policy_actions(
    module: RLModule,
    action_inputs: np.ndarray,
    action_transform: ActionTransform | None = None,
) -> np.ndarray:
    """(..., A) the policy's action for (..., A_in) distribution inputs: for a Box action
    space the distribution's mean (its deterministic action) through `action_transform`
    (the rollouts' own, e.g. `rllib_action_transform(space)`: env units); for a Discrete one
    the action probabilities."""
    import gymnasium as gym

    inputs = np.asarray(action_inputs)
    flat = torch.as_tensor(inputs.reshape(-1, inputs.shape[-1]))
    space = module.action_space
    if isinstance(space, gym.spaces.Discrete):
        actions = torch.softmax(flat.double(), dim=-1).numpy()
    elif isinstance(space, gym.spaces.Box):
        dist = module.get_inference_action_dist_cls().from_logits(flat)
        actions = dist.to_deterministic().sample().double().numpy()
        if action_transform is not None:
            actions = np.asarray(action_transform(actions), dtype=np.float64)
    else:
        raise TypeError(f"interventions read Discrete or Box actions, got {space}")
    return actions.reshape(*inputs.shape[:-1], -1)


# ---------------------------------------------------------------------------- scores


def shift_sums(policy_shift: np.ndarray, optimal_shift: np.ndarray) -> np.ndarray:
    """Per-episode sums (E, 6, A) of (E, T, A) shifts p and o: count, sum p, sum o,
    sum p^2, sum o^2, sum p o (per action coordinate)."""
    p = np.asarray(policy_shift, dtype=np.float64)
    o = np.asarray(optimal_shift, dtype=np.float64)
    if p.ndim != 3 or p.shape != o.shape or min(p.shape) == 0:
        raise ValueError(
            f"policy and optimal shifts must both be non-empty (E, T, A), got {p.shape} and "
            f"{o.shape}"
        )
    if not (np.all(np.isfinite(p)) and np.all(np.isfinite(o))):
        raise ValueError("the shifts hold NaN or infinite values")
    count = np.full((p.shape[0], p.shape[2]), float(p.shape[1]))
    parts = (count, p.sum(1), o.sum(1), (p * p).sum(1), (o * o).sum(1), (p * o).sum(1))
    return np.stack(parts, axis=1)


def shift_statistics(sums: np.ndarray) -> dict[str, np.ndarray]:
    """The STATISTICS of summed (..., 6, A) shift sums (NaN where undefined)."""
    n, sp, so, spp, soo, spo = np.moveaxis(np.asarray(sums, dtype=np.float64), -2, 0)
    steps = n[..., 0]
    cov = (spo - sp * so / n).sum(-1)
    var_p = np.maximum(spp - sp**2 / n, 0.0).sum(-1)
    var_o = np.maximum(soo - so**2 / n, 0.0).sum(-1)
    p2, o2, po = spp.sum(-1), soo.sum(-1), spo.sum(-1)
    moves = p2 > SHIFT_TOL**2 * o2
    with np.errstate(divide="ignore", invalid="ignore"):
        correlation = np.where(
            moves & (var_p > 0) & (var_o > 0), cov / np.sqrt(var_p * var_o), np.nan
        )
        cosine = np.where(moves & (o2 > 0), po / np.sqrt(p2 * o2), np.nan)
        fraction = np.where(o2 > 0, po / o2, np.nan)
    return {
        "correlation": correlation,
        "cosine": cosine,
        "fraction": fraction,
        "policy_shift_rms": np.sqrt(p2 / steps),
        "optimal_shift_rms": np.sqrt(o2 / steps),
    }


def _estimate(point: np.ndarray, samples: np.ndarray, confidence: float) -> Estimate | None:
    if not np.isfinite(point):
        return None
    return estimates(np.asarray([point]), np.asarray(samples)[:, None], confidence)[0]


@dataclass(frozen=True)
class ShiftScores:
    """The policy's action shift against the optimal one (see the module docstring), with
    percentile intervals over episode resamples; None where undefined (`undefined` says
    why)."""

    correlation: Estimate | None
    cosine: Estimate | None
    fraction: Estimate | None
    policy_shift_rms: Estimate | None
    optimal_shift_rms: Estimate | None
    n_episodes: int
    n_steps: int
    undefined: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in self.__dict__.items():
            out[key] = value.to_dict() if isinstance(value, Estimate) else value
        return out


def shift_scores(
    policy_shift: np.ndarray,
    optimal_shift: np.ndarray,
    *,
    weights: np.ndarray,
    confidence: float = 0.95,
) -> ShiftScores:
    """Scores of (E, T, A) shifts with intervals over the episode resamples `weights`
    (R, E) (`bootstrap_weights`)."""
    sums = shift_sums(policy_shift, optimal_shift)
    counts = _weights(weights, sums.shape[0])
    point = shift_statistics(sums.sum(0))
    samples = shift_statistics(np.einsum("re,eka->rka", counts, sums))
    undefined = {}
    if not np.isfinite(point["fraction"]):
        undefined["fraction"] = "the optimal policy does not move"
    if not np.isfinite(point["correlation"]):
        undefined["correlation"] = (
            "the policy (or the optimal policy) does not move: its shift is at most "
            f"{SHIFT_TOL:g} of the optimal one, or constant"
        )
    if not np.isfinite(point["cosine"]):
        undefined["cosine"] = "the policy (or the optimal policy) does not move"
    return ShiftScores(
        **{key: _estimate(point[key], samples[key], confidence) for key in STATISTICS},
        n_episodes=int(sums.shape[0]),
        n_steps=int(sums[:, 0, 0].sum()),
        undefined=undefined,
    )


def shift_difference(
    a: tuple[np.ndarray, np.ndarray],
    b: tuple[np.ndarray, np.ndarray],
    *,
    weights: np.ndarray,
    confidence: float = 0.95,
) -> dict[str, Estimate | None]:
    """A - B of each statistic for two (policy shift, optimal shift) pairs on the same
    episodes, each resample scoring both (paired: the interval is of the difference)."""
    sums_a, sums_b = shift_sums(*a), shift_sums(*b)
    if sums_a.shape[0] != sums_b.shape[0]:
        raise ValueError(f"{sums_a.shape[0]} and {sums_b.shape[0]} episodes: not paired")
    counts = _weights(weights, sums_a.shape[0])
    point_a, point_b = shift_statistics(sums_a.sum(0)), shift_statistics(sums_b.sum(0))
    samples_a = shift_statistics(np.einsum("re,eka->rka", counts, sums_a))
    samples_b = shift_statistics(np.einsum("re,eka->rka", counts, sums_b))
    return {
        key: _estimate(point_a[key] - point_b[key], samples_a[key] - samples_b[key], confidence)
        for key in STATISTICS
    }


def clipped_fraction(
    raw_actions: np.ndarray,
    action_transform: ActionTransform | None,
    pre_clip_transform: ActionTransform | None,
) -> float:
    """The fraction of (..., A) pre-transform Box actions' coordinates that
    `action_transform` saturates: where its output differs from `pre_clip_transform`'s (the
    same map without clipping); a missing transform is the identity."""
    raw = np.asarray(raw_actions, dtype=np.float64)
    flat = raw.reshape(-1, raw.shape[-1])
    post = flat if action_transform is None else action_transform(flat)
    pre = flat if pre_clip_transform is None else pre_clip_transform(flat)
    post, pre = np.asarray(post, np.float64), np.asarray(pre, np.float64)
    return float(np.mean(~np.isclose(post, pre, rtol=1e-5, atol=1e-6)))


def _weights(weights: np.ndarray, episodes: int) -> np.ndarray:
    counts = np.asarray(weights, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[1] != episodes:
        raise ValueError(f"weights must be (n_resamples, {episodes}), got {counts.shape}")
    return counts


# ---------------------------------------------------------------------------- the test


@dataclass(frozen=True)
class EditScores:
    """One counterfactual at one layer of one module: the belief edit and its
    random-direction control scored against the optimal shift, and their paired
    difference; sizes say how large the edits were."""

    belief: ShiftScores
    random_orthogonal: ShiftScores
    belief_minus_random: dict[str, Estimate | None]
    edit_norm_mean: float  # mean |delta| of the belief edit (the control's is the same)
    representation_norm_mean: float  # mean |h| at the layer
    probe_miss_rms: float  # RMS of (probe reading after the belief edit - b'): ~0 if reached
    value_shift_mean: float  # mean change of the value head under the belief edit
    # Box actions only (None for Discrete): the belief edit's and the control's shift of the
    # pre-transform action mean (in env units through `pre_clip_transform`), scored alike;
    # and the fraction of action coordinates the transform clips: {"unedited", "belief",
    # "random_orthogonal"}.
    pre_clip: dict[str, ShiftScores] | None = None
    clipped_fraction: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            BELIEF: self.belief.to_dict(),
            RANDOM: self.random_orthogonal.to_dict(),
            "belief_minus_random": _estimates_dict(self.belief_minus_random),
            "edit_norm_mean": self.edit_norm_mean,
            "representation_norm_mean": self.representation_norm_mean,
            "probe_miss_rms": self.probe_miss_rms,
            "value_shift_mean": self.value_shift_mean,
            "pre_clip": None
            if self.pre_clip is None
            else {kind: scores.to_dict() for kind, scores in self.pre_clip.items()},
            "clipped_fraction": self.clipped_fraction,
        }


@dataclass(frozen=True)
class LayerInterventions:
    """A module's probe at one layer (fitted on the rollouts' train episodes) and the
    scores of every counterfactual's edits on the held-out ones."""

    layer: str
    probe: ProbeReport
    probe_rank: int
    edits: dict[str, EditScores]

    def to_dict(self) -> dict[str, Any]:
        r2 = self.probe.r2_pooled
        return {
            "layer": self.layer,
            "probe_r2_pooled": None if r2 is None else r2.to_dict(),
            "probe_rank": self.probe_rank,
            "n_features": self.probe.n_features,
            "edits": {name: scores.to_dict() for name, scores in self.edits.items()},
        }


def _estimates_dict(values: Mapping[str, Estimate | None]) -> dict[str, Any]:
    return {key: None if value is None else value.to_dict() for key, value in values.items()}


@dataclass(frozen=True)
class InterventionReport:
    """`belief_interventions`' result. `modules[label][layer]`: LayerInterventions;
    `differences["agent_minus_control"][layer][counterfactual]`: paired differences of the
    belief edit's statistics; `shifts[(label, layer, counterfactual, edit)]`: the (policy,
    optimal) shift arrays (E, T, A) behind each score (`plot_action_shifts` draws them)."""

    layers: list[str]
    counterfactuals: list[str]
    modules: dict[str, dict[str, LayerInterventions]]
    differences: dict[str, dict[str, dict[str, dict[str, Estimate | None]]]]
    test_episodes: list[int]
    episode_steps: int
    n_bootstrap: int
    confidence: float
    seed: int
    stream: list[str]
    carry_edit: bool
    shifts: dict[tuple[str, str, str, str], tuple[np.ndarray, np.ndarray]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (Estimates as {value, low, high}, undefined scores as None)."""
        return {
            "layers": self.layers,
            "counterfactuals": self.counterfactuals,
            "modules": {
                label: {layer: item.to_dict() for layer, item in layers.items()}
                for label, layers in self.modules.items()
            },
            "differences": {
                name: {
                    layer: {cf: _estimates_dict(values) for cf, values in per_cf.items()}
                    for layer, per_cf in per_layer.items()
                }
                for name, per_layer in self.differences.items()
            },
            "test_episodes": self.test_episodes,
            "n_test_episodes": len(self.test_episodes),
            "episode_steps": self.episode_steps,
            "n_bootstrap": self.n_bootstrap,
            "confidence": self.confidence,
            "seed": self.seed,
            "stream": self.stream,
            "carry_edit": self.carry_edit,
        }


def _is_box(space: Any) -> bool:
    import gymnasium as gym

    return isinstance(space, gym.spaces.Box)


def _layer_features(
    module: RLModule, rollouts: Rollouts, layers: Sequence[str], preprocess: Preprocess | None
) -> dict[str, np.ndarray]:
    """{layer: (E, T, d)} for the requested layers, from one replay."""
    if all(layer == REPRESENTATION for layer in layers) and not _can_edit_layers(module):
        return {REPRESENTATION: replay_rollouts(module, rollouts, preprocess=preprocess)}
    if not _can_edit_layers(module):
        raise ValueError(
            f"{type(module).__name__} has no encode_step_edited: only layer "
            f"{REPRESENTATION!r} can be edited"
        )
    named = replay_rollouts_named(module, rollouts, preprocess=preprocess)
    out = {}
    for layer in layers:
        name = FINAL_NORM if layer == REPRESENTATION else layer
        if name not in named:
            raise ValueError(f"unknown layer {layer!r}; the residuals are {', '.join(named)}")
        out[layer] = named[name]
    return out


def belief_interventions(
    module: RLModule,
    rollouts: Rollouts,
    *,
    layers: Sequence[str],
    optimal_policy: Callable[[np.ndarray], np.ndarray],
    counterfactuals: Mapping[str, np.ndarray],
    seed: int,
    control: RLModule | None = None,
    action_transform: ActionTransform | None = None,
    pre_clip_transform: ActionTransform | None = None,
    preprocess: Preprocess | None = None,
    ridge: float = 0.0,
    test_fraction: float = 0.25,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    max_test_episodes: int | None = None,
    carry_edit: bool = False,
    stream: Sequence[str] = DEFAULT_STREAM,
    progress: Callable[[str], None] | None = None,
) -> InterventionReport:
    """Does `module` act on the belief its probes read? For each layer: fit a probe of
    `rollouts.targets` (the beliefs b) on the train episodes, edit the held-out episodes'
    representation so the probe reads each counterfactual's b' (E, T, k) (and, as a control,
    by the same length along a random direction orthogonal to the probe), and score the
    policy's action shift against `optimal_policy(b') - optimal_policy(b)`
    (`optimal_policy`: (n, k) beliefs -> (n, A) actions, in `policy_actions`' units).

    For Box actions also the shift before the transform's clipping (`pre_clip_transform`:
    `action_transform` without its clipping, mapping the distribution's mean to env units,
    e.g. `rllib_action_transform(space, unclipped=True)`; None: the mean's own units) and the
    fraction of clipped action coordinates (`EditScores.pre_clip`, `clipped_fraction`).

    `control` (e.g. an untrained module of the same architecture) goes through the same
    steps with its own probes fitted on the same rollouts and split. The split, resamples
    and random directions come from named streams of `seed`: `(*stream, "probe", ...)` (as
    `evaluate_probe`'s), `(*stream, "bootstrap")`, `(*stream, "random_direction", layer,
    counterfactual)`. `max_test_episodes` caps the held-out episodes edited (the first ones).
    """
    if not layers:
        raise ValueError("belief_interventions needs at least one layer")
    if not counterfactuals:
        raise ValueError("belief_interventions needs at least one set of counterfactual beliefs")
    targets = np.asarray(rollouts.targets, dtype=np.float64)
    for name, beliefs in counterfactuals.items():
        if np.shape(beliefs) != targets.shape:
            raise ValueError(
                f"counterfactual {name!r} is {np.shape(beliefs)}, the targets {targets.shape}"
            )
    stream = tuple(stream)
    say = progress or (lambda message: None)
    modules = {"agent": module} | ({} if control is None else {"control": control})
    probes_of = {}
    for label, member in modules.items():
        say(f"interventions: replaying the rollouts through the {label}, probing {list(layers)}")
        features = _layer_features(member, rollouts, layers, preprocess)
        probes_of[label] = probe_named(
            features,
            targets,
            seed=seed,
            stream=(*stream, "probe"),
            ridge=ridge,
            test_fraction=test_fraction,
            n_bootstrap=n_bootstrap,
            confidence=confidence,
        )
    first = probes_of["agent"].evaluations[layers[0]]
    test = np.asarray(first.test_episodes)
    if max_test_episodes is not None:
        test = test[:max_test_episodes]
    truth = targets[test]
    steps = truth.shape[1]

    def optimal(beliefs: np.ndarray) -> np.ndarray:
        actions = np.asarray(optimal_policy(beliefs.reshape(-1, beliefs.shape[-1])), np.float64)
        return actions.reshape(*beliefs.shape[:-1], -1)

    base = optimal(truth)
    optimal_shift = {
        name: optimal(np.asarray(cf)[test]) - base for name, cf in counterfactuals.items()
    }
    weights = bootstrap_weights(len(test), n_bootstrap, stream_rng(seed, *stream, "bootstrap"))
    common = dict(weights=weights, confidence=confidence)

    results: dict[str, dict[str, LayerInterventions]] = {}
    shifts: dict[tuple[str, str, str, str], tuple[np.ndarray, np.ndarray]] = {}
    for label, member in modules.items():
        results[label] = {}
        for layer in layers:
            evaluation = probes_of[label].evaluations[layer]
            edits: dict[str, BeliefEdit] = {}
            for name, cf in counterfactuals.items():
                goal = np.asarray(cf, dtype=np.float64)[test]
                rng = stream_rng(seed, *stream, "random_direction", layer, name)
                edits[f"{name}/{BELIEF}"] = BeliefEdit(targets=goal)
                edits[f"{name}/{RANDOM}"] = BeliefEdit(
                    targets=goal,
                    directions=orthogonal_directions(evaluation.probe, (len(test), steps), rng),
                )
            say(f"interventions: {label} at {layer}, {len(edits)} edits on {len(test)} episodes")
            done = intervene(
                member,
                rollouts,
                evaluation.probe,
                edits,
                layer=layer,
                episodes=test,
                preprocess=preprocess,
                carry_edit=carry_edit,
            )
            before = policy_actions(member, done.before.action_inputs, action_transform)
            box = _is_box(member.action_space)
            raw_before = policy_actions(member, done.before.action_inputs) if box else None

            def unclipped(raw: np.ndarray) -> np.ndarray:
                if pre_clip_transform is None:
                    return raw
                flat = raw.reshape(-1, raw.shape[-1])
                return np.asarray(pre_clip_transform(flat), np.float64).reshape(raw.shape)

            scores = {}
            for name in counterfactuals:
                pairs, pre_pairs, clipped = {}, {}, {}
                if raw_before is not None:
                    clipped["unedited"] = clipped_fraction(
                        raw_before, action_transform, pre_clip_transform
                    )
                for kind in (BELIEF, RANDOM):
                    after = done.after[f"{name}/{kind}"]
                    moved = policy_actions(member, after.action_inputs, action_transform) - before
                    pairs[kind] = (moved, optimal_shift[name])
                    shifts[(label, layer, name, kind)] = pairs[kind]
                    if raw_before is not None:
                        raw_after = policy_actions(member, after.action_inputs)
                        pre_pairs[kind] = (
                            unclipped(raw_after) - unclipped(raw_before),
                            optimal_shift[name],
                        )
                        clipped[kind] = clipped_fraction(
                            raw_after, action_transform, pre_clip_transform
                        )
                key = f"{name}/{BELIEF}"
                miss = done.probe_after[key] - np.asarray(counterfactuals[name])[test]
                scores[name] = EditScores(
                    belief=shift_scores(*pairs[BELIEF], **common),
                    random_orthogonal=shift_scores(*pairs[RANDOM], **common),
                    belief_minus_random=shift_difference(pairs[BELIEF], pairs[RANDOM], **common),
                    edit_norm_mean=float(done.edit_norm[key].mean()),
                    representation_norm_mean=float(done.representation_norm.mean()),
                    probe_miss_rms=float(np.sqrt((miss**2).sum(-1).mean())),
                    value_shift_mean=float((done.after[key].values - done.before.values).mean()),
                    pre_clip={
                        kind: shift_scores(*pair, **common) for kind, pair in pre_pairs.items()
                    }
                    if box
                    else None,
                    clipped_fraction=clipped if box else None,
                )
            results[label][layer] = LayerInterventions(
                layer=layer,
                probe=evaluation.report,
                probe_rank=probe_subspace(evaluation.probe).rank,
                edits=scores,
            )
    differences: dict[str, dict[str, dict[str, dict[str, Estimate | None]]]] = {}
    if control is not None:
        differences["agent_minus_control"] = {
            layer: {
                name: shift_difference(
                    shifts[("agent", layer, name, BELIEF)],
                    shifts[("control", layer, name, BELIEF)],
                    **common,
                )
                for name in counterfactuals
            }
            for layer in layers
        }
    return InterventionReport(
        layers=list(layers),
        counterfactuals=list(counterfactuals),
        modules=results,
        differences=differences,
        test_episodes=[int(e) for e in test],
        episode_steps=int(steps),
        n_bootstrap=int(n_bootstrap),
        confidence=float(confidence),
        seed=int(seed),
        stream=list(stream),
        carry_edit=carry_edit,
        shifts=shifts,
    )


# ---------------------------------------------------------------------------- figure


def plot_action_shifts(
    path: Path,
    report: InterventionReport,
    *,
    title: str,
    layers: Sequence[str] | None = None,
    max_points: int = 3000,
) -> dict[str, int]:
    """A PNG with a row per layer (default: all of the report's) and a column per
    counterfactual: the policy's action shift against the optimal one (every action
    coordinate of every edited step, at most `max_points` per series, evenly spaced) for
    the agent's belief edit, its random-direction control and the control module's belief
    edit; the dashed diagonal is the optimal response. Returns {"<layer> <counterfactual>:
    <series>": points drawn} for callers to check."""
    from matplotlib.figure import Figure  # no pyplot: no backend switch, nothing to close

    rows = list(report.layers if layers is None else layers)
    unknown = [layer for layer in rows if layer not in report.layers]
    if unknown or not rows:
        raise ValueError(f"layers {unknown or rows} are not in the report ({report.layers})")
    series = [("agent", BELIEF, "C0", "agent: belief edit")]
    series.append(("agent", RANDOM, "0.55", "agent: random orthogonal edit"))
    if "control" in report.modules:
        series.append(("control", BELIEF, "C1", "control module: belief edit"))
    names = report.counterfactuals
    fig = Figure(figsize=(5.0 * len(names), 4.4 * len(rows)))
    axes = fig.subplots(len(rows), len(names), squeeze=False)
    drawn: dict[str, int] = {}
    for row, layer in zip(axes, rows, strict=True):
        for ax, name in zip(row, names, strict=True):
            low, high = 0.0, 0.0
            for label, kind, color, text in series:
                policy, optimal = report.shifts[(label, layer, name, kind)]
                x, y = optimal.reshape(-1), policy.reshape(-1)
                keep = np.unique(np.linspace(0, x.size - 1, min(x.size, max_points)).astype(int))
                score = report.modules[label][layer].edits[name].to_dict()[kind]["fraction"]
                suffix = "" if score is None else f" (fraction {score['value']:.2f})"
                ax.scatter(x[keep], y[keep], s=3, color=color, alpha=0.5, lw=0, label=text + suffix)
                drawn[f"{layer} {name}: {text}"] = int(keep.size)
                low = min(low, float(x.min()), float(y.min()))
                high = max(high, float(x.max()), float(y.max()))
            ax.plot([low, high], [low, high], color="k", lw=0.8, ls="--", label="optimal response")
            ax.set_xlabel("optimal action shift (b -> b')")
            ax.set_ylabel("policy's action shift (edited - unedited)")
            ax.set_title(f"{name} at {layer}", fontsize="medium")
            ax.grid(alpha=0.3)
            ax.legend(fontsize="x-small", loc="upper left")
    fig.suptitle(title, fontsize="medium")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return drawn
