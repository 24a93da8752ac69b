"""Where the edit happens: recorded rollouts replayed through a module, each recorded step
read unedited and once per edit with the residual at one layer edited.

The rollouts are stepped as `replay.py` steps them (`ModuleStepper.read_tensors`: the same
batches, the same extractor, the same carried state), so the carried state is the unedited
one and every step starts from what the agent actually had. Beside that unedited read, each
recorded step runs once more per edit (all edits of a step in one batched pass):

- a module with `encode_step_edited(batch, layer, edit)` (`ResidualEditAPI`, e.g.
  StatefulTransformerActorCritic): any residual ("embed", "block_1".."block_L",
  "final_norm"); the later blocks, final norm and heads run from the edited residual; the
  K/V cache carried to the next step is the unedited one unless `carry_edit=True` (then each
  edit's rows carry their own edited cache, and edits at later steps are computed on that
  edited history);
- any module with `forward_heads` (`PolicyHeadsAPI`: every ActorCriticRLModule, e.g. MLP,
  GRU, window transformer): layer "representation", the vector the heads read (`encode`);
  the heads run from the edited one.

`require_intervention_api` states what a module needs for given layers; `intervene` and
`belief_interventions` call it before any work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from rl_harness.analysis.interventions.edits import (
    RANK_TOL,
    BeliefEdit,
    ProbeSubspace,
    probe_subspace,
)
from rl_harness.analysis.module_api import PolicyHeadsAPI, ResidualEditAPI, require_api
from rl_harness.analysis.probes.affine import AffineProbe
from rl_harness.analysis.replay import (
    Preprocess,
    replay_rollouts,
    replay_rollouts_named,
    residual_representations,
    rollout_observations,
)
from rl_harness.analysis.rollouts import (
    OBS,
    STATE_IN,
    ModuleStepper,
    Rollouts,
    encode_representation,
    eval_mode,
    step_batch,
)

if TYPE_CHECKING:
    from ray.rllib.core.rl_module.rl_module import RLModule

REPRESENTATION = "representation"  # the layer every module has: what its heads read
FINAL_NORM = "final_norm"  # its name among a transformer's residuals


def edits_residuals(module: object) -> bool:
    """Whether `module` can be edited at any residual (`ResidualEditAPI`), not only at
    "representation"."""
    return isinstance(module, ResidualEditAPI)


def require_intervention_api(
    module: object, layers: Sequence[str], *, carry_edit: bool = False
) -> None:
    """Raise TypeError, naming the missing method, unless `module` can be edited at every
    one of `layers`: `forward_heads` always; `encode_step_edited` and
    `encode_step_residuals` for a layer other than "representation" or for `carry_edit`."""
    require_api(module, PolicyHeadsAPI, purpose="an intervention (the heads read the edit)")
    residual_layers = [layer for layer in layers if layer != REPRESENTATION]
    if residual_layers:
        require_api(
            module,
            ResidualEditAPI,
            purpose=f"editing layer {residual_layers[0]!r} (without it only layer "
            f"{REPRESENTATION!r}, what the heads read, can be edited)",
        )
    if carry_edit:
        require_api(module, ResidualEditAPI, purpose="carry_edit")


def layer_features(
    module: RLModule, rollouts: Rollouts, layers: Sequence[str], preprocess: Preprocess | None
) -> dict[str, np.ndarray]:
    """{layer: (E, T, d)} for the requested layers, from one replay: what the probes that
    `intervene` edits are fitted on ("representation" of a module with residuals is its
    "final_norm")."""
    if not edits_residuals(module):
        require_intervention_api(module, layers)
        return {REPRESENTATION: replay_rollouts(module, rollouts, preprocess=preprocess)}
    named = replay_rollouts_named(module, rollouts, preprocess=preprocess)
    out = {}
    for layer in layers:
        name = FINAL_NORM if layer == REPRESENTATION else layer
        if name not in named:
            raise ValueError(f"unknown layer {layer!r}; the residuals are {', '.join(named)}")
        out[layer] = named[name]
    return out


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


def _goal(edit: BeliefEdit) -> np.ndarray:
    """The edit's targets or its shift (_check_edit made sure it has exactly one)."""
    goal = edit.targets if edit.targets is not None else edit.shift
    assert goal is not None
    return goal


def _check_edit(name: str, edit: BeliefEdit, shape: tuple[int, int], k: int, d: int) -> None:
    if (edit.targets is None) == (edit.shift is None):
        raise ValueError(f"edit {name!r} needs exactly one of targets and shift")
    goal = _goal(edit)
    if np.shape(goal) != (*shape, k):
        raise ValueError(f"edit {name!r}: targets/shift must be (E, T, k) = {(*shape, k)}")
    if edit.directions is not None and np.shape(edit.directions) != (*shape, d):
        raise ValueError(f"edit {name!r}: directions must be (E, T, d) = {(*shape, d)}")


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

    `layer`: "representation" (any module with `forward_heads`: what the heads read) or,
    for a module with `encode_step_edited`, one of its residuals. The state carried to the
    next step is the unedited one; with `carry_edit`, each edit's rows carry their own edited
    state instead (and later edits are computed on that history). `preprocess` must be the
    rollouts' own. Rows are stepped `batch_size` at a time (default: the rollouts' num_envs).
    """
    if not edits:
        raise ValueError("intervene needs at least one named edit")
    require_intervention_api(module, [layer], carry_edit=carry_edit)
    by_layer = edits_residuals(module)
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
        goals=np.stack([_goal(e) for e in edits.values()]).astype(np.float64),
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
    with eval_mode(module), torch.inference_mode():
        for first in range(0, len(chosen), size):
            rows = np.arange(first, min(first + size, len(chosen)))
            obs = observations[chosen[rows]]
            parts.append(_intervene_rows(module, obs, warmup, rows, plan, preprocess))
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
    # The unedited read is replay's: every residual, or the representation `encode` gives.
    read = residual_representations if plan.by_layer else encode_representation
    stepper = ModuleStepper(module, m, representation=read)
    device, stateful = stepper.device, stepper.stateful
    # intervene checked these APIs (require_intervention_api) before any row ran.
    heads = cast(PolicyHeadsAPI, module)
    editable = cast(ResidualEditAPI, module) if plan.by_layer else None

    def tensor(values: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(values, device=device)

    weights = tensor(np.asarray(plan.probe.weights, dtype=np.float64))
    bias = tensor(np.asarray(plan.probe.bias, dtype=np.float64))
    inverse = tensor(plan.subspace.inverse)
    reads = tensor(np.repeat(plan.reads, m).astype(np.float64))[:, None]
    directed = tensor(np.repeat(plan.directed, m))[:, None]
    edited_state = None
    before: list[dict[str, torch.Tensor]] = []
    after: list[dict[str, torch.Tensor]] = []
    for t in range(observations.shape[1]):
        step_obs = observations[:, t]
        batch, features = stepper.read_tensors(preprocess(step_obs) if preprocess else step_obs)
        if t < warmup:
            continue
        if plan.by_layer:
            if plan.layer not in features:
                raise ValueError(
                    f"unknown layer {plan.layer!r}; the residuals are {', '.join(features)}"
                )
            residual, representation = features[plan.layer], features[FINAL_NORM]
        else:
            representation = features[:, 0] if stateful and features.dim() == 3 else features
            residual = representation
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
            many[STATE_IN] = edited_state if carried else _repeat_rows(batch[STATE_IN], conditions)
        if editable is not None:  # plan.by_layer
            residuals, edited_rep, edited_out = editable.encode_step_edited(
                step_batch(many) if stateful else many, plan.layer, edits.apply
            )
            if plan.carry_edit:
                edited_state = edited_out
        else:
            residuals = residual.repeat(conditions, 1)
            edited_rep = edits.apply(residuals)
        delta = edits.delta(residuals)
        edited = (residuals + delta.to(residuals.dtype)).double()
        inputs, values = heads.forward_heads(representation)
        edited_inputs, edited_values = heads.forward_heads(edited_rep)
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

    def stacked(steps: list[dict[str, torch.Tensor]], axis: int) -> dict[str, np.ndarray]:
        return {
            key: torch.stack([step[key] for step in steps], dim=axis).cpu().numpy()
            for key in steps[0]
        }

    return stacked(before, 1), stacked(after, 2)
