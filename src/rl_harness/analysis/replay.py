"""Replay recorded observation sequences through any module and read its representations.

A control is only comparable with the agent when it is probed on the agent's own data: the
same observations, hence the same targets, branches and train/test split. Rolling a control
out under its own policy scores it on different (often much easier or harder) data.
`replay_rollouts(control, agent_rollouts)` feeds the control exactly what the agent read
(the warm-up steps included, so its carried state is built the same way) and returns its
representation at every recorded step, aligned with `agent_rollouts.targets`.

Stepping is `ModuleStepper`'s, the code the rollouts themselves ran: stateful modules read
one observation at a time with STATE_IN carried from `get_initial_state()`, and a reset
(the start of each row, or a True in `resets`) puts a row's state back to the initial one.
Replaying a module's own rollouts therefore reproduces its recorded representations (bit
for bit when the rows are stepped in the same batches: `batch_size=rollouts.num_envs`).

Named representations: `replay_named_representations` with an extractor returning a
mapping (`residual_representations`: every block's residual stream of a module with
`encode_step_residuals`) gives every named representation from one pass.

The same stepping (`ModuleStepper.read_tensors`: the step's batch and the extractor's
tensors) runs `rl_harness.analysis.interventions.intervene`, which edits each step beside
its unedited read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from rl_harness.analysis.module_api import (
    ResidualStreamAPI,
    SequenceResidualAPI,
    prev_action_width,
    require_api,
)
from rl_harness.analysis.rollouts import (
    OBS,
    PREV_ACTIONS,
    STATE_IN,
    ModuleStepper,
    RepresentationExtractor,
    Rollouts,
    encode_representation,
    eval_mode,
    step_batch,
)

if TYPE_CHECKING:
    from ray.rllib.core.rl_module.rl_module import RLModule

Preprocess = Callable[[np.ndarray], np.ndarray]


def residual_representations(
    module: RLModule, batch: dict[str, Any]
) -> tuple[dict[str, torch.Tensor], Any]:
    """({name: (N, d)}, state_out): every named residual of a module with
    `encode_step_residuals(batch) -> ({name: (N, d)}, state_out)` (`ResidualStreamAPI`; a
    module without it fails on the first step, naming the method), read on the stepper's
    batch (one step without its time axis for a stateful module, as
    StatefulTransformerActorCritic takes it; the batch `encode` takes for a stateless one,
    as TransformerActorCritic). Names: "embed", "block_1".."block_L", "final_norm"."""
    if not isinstance(module, ResidualStreamAPI):
        require_api(module, ResidualStreamAPI, purpose="reading every residual (per-layer probes)")
    # require_api raised unless the module has `encode_step_residuals`.
    residuals, state_out = cast(ResidualStreamAPI, module).encode_step_residuals(
        step_batch(batch) if module.is_stateful() else batch
    )
    return dict(residuals), state_out


def _check_resets(resets: np.ndarray | None, shape: tuple[int, int]) -> np.ndarray:
    if resets is None:
        out = np.zeros(shape, dtype=bool)
    else:
        out = np.asarray(resets)
        if out.shape != shape or out.dtype != np.bool_:
            raise ValueError(
                f"resets must be a bool (n_sequences, T) = {shape} array, got "
                f"{out.dtype} {out.shape}"
            )
        out = out.copy()
    out[:, 0] = True  # every row starts an episode
    return out


def _reads_sequences(
    module: RLModule,
    representation: RepresentationExtractor,
    preprocess: Preprocess | None,
    starts: np.ndarray,
) -> bool:
    """Whether a replay can read many steps per call: a stateful module with
    `encode_sequence_residuals`, read through a default extractor (the representation
    `encode_step` gives is the "final_norm" residual), observations as recorded, and no
    episode starting inside a row."""
    return (
        representation in (encode_representation, residual_representations)
        and preprocess is None
        and module.is_stateful()
        and isinstance(module, SequenceResidualAPI)
        and not starts[:, 1:].any()
    )


def _replay_sequences(
    module: RLModule,
    obs: np.ndarray,
    representation: RepresentationExtractor,
    size: int,
    steps_per_call: int,
    actions: np.ndarray | None,
) -> dict[str, np.ndarray] | np.ndarray:
    """`_replay` reading `steps_per_call` steps per module call (SequenceResidualAPI), the
    state carried between calls: one call per chunk of steps instead of one per step. A
    module reading the previous action gets, at each step, the action of the step before
    (zeros at a row's first step), as `ModuleStepper` feeds it one step at a time."""
    named = representation is residual_representations
    chunks: list[Any] = []
    with eval_mode(module), torch.inference_mode():
        for first in range(0, obs.shape[0], size):
            part = obs[first : first + size]
            stepper = ModuleStepper(module, part.shape[0])  # the device and initial state
            prev = None
            if stepper.prev_width:
                assert actions is not None  # _reads_sequences: stepping raises without them
                taken = stepper.action_columns(np.asarray(actions)[first : first + size])
                taken = taken.reshape(*part.shape[:2], stepper.prev_width)
                prev = torch.zeros_like(taken)
                prev[:, 1:] = taken[:, :-1]
            state, pieces = stepper.state, []
            for t in range(0, part.shape[1], steps_per_call):
                window = np.ascontiguousarray(part[:, t : t + steps_per_call])
                batch = {OBS: torch.as_tensor(window, device=stepper.device), STATE_IN: state}
                if prev is not None:
                    batch[PREV_ACTIONS] = prev[:, t : t + steps_per_call].contiguous()
                residuals, state = module.encode_sequence_residuals(batch)  # type: ignore[attr-defined]
                wanted = residuals if named else {"final_norm": residuals["final_norm"]}
                pieces.append({k: v.float().cpu().numpy() for k, v in wanted.items()})
            chunks.append({k: np.concatenate([p[k] for p in pieces], axis=1) for k in pieces[0]})
    out = {name: np.concatenate([c[name] for c in chunks]) for name in chunks[0]}
    return out if named else out["final_norm"]


def _replay(
    module: RLModule,
    observations: np.ndarray,
    resets: np.ndarray | None,
    representation: RepresentationExtractor,
    preprocess: Preprocess | None,
    batch_size: int | None,
    steps_per_call: int = 1,
    actions: np.ndarray | None = None,
) -> dict[str, np.ndarray] | np.ndarray:
    obs = np.asarray(observations)
    if actions is not None and np.shape(actions)[:2] != obs.shape[:2]:
        raise ValueError(
            f"actions {np.shape(actions)[:2]} must cover the observations' {obs.shape[:2]} steps"
        )
    if obs.ndim < 2 or obs.shape[0] == 0 or obs.shape[1] == 0:
        raise ValueError(
            f"observations must be a non-empty (n_sequences, T, ...) array, got {obs.shape}"
        )
    rows, steps = obs.shape[:2]
    starts = _check_resets(resets, (rows, steps))
    size = rows if batch_size is None else batch_size
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if isinstance(steps_per_call, bool) or not isinstance(steps_per_call, int):
        raise ValueError(f"steps_per_call must be a positive int, got {steps_per_call!r}")
    if steps_per_call < 1:
        raise ValueError(f"steps_per_call must be a positive int, got {steps_per_call!r}")
    # Without the actions, a module reading the previous action is stepped, which refuses
    # (one line) at its second step rather than feed it zeros.
    fed = actions is not None or prev_action_width(module) == 0
    if steps_per_call > 1 and fed and _reads_sequences(module, representation, preprocess, starts):
        return _replay_sequences(module, obs, representation, size, steps_per_call, actions)
    chunks: list[Any] = []
    with eval_mode(module):
        for first in range(0, rows, size):
            part = obs[first : first + size]
            stepper = ModuleStepper(module, part.shape[0], representation=representation)
            per_step = []
            for t in range(steps):
                if t > 0:
                    stepper.reset_rows(starts[first : first + size, t])
                step_obs = part[:, t]
                features = stepper.read(preprocess(step_obs) if preprocess else step_obs)
                if actions is not None:
                    stepper.note_actions(np.asarray(actions)[first : first + size, t])
                per_step.append(features)
            if isinstance(per_step[0], Mapping):
                chunks.append(
                    {name: np.stack([f[name] for f in per_step], axis=1) for name in per_step[0]}
                )
            else:
                chunks.append(np.stack(per_step, axis=1))
    if isinstance(chunks[0], dict):
        return {name: np.concatenate([c[name] for c in chunks]) for name in chunks[0]}
    return np.concatenate(chunks)


def replay_observations(
    module: RLModule,
    observations: np.ndarray,
    *,
    resets: np.ndarray | None = None,
    representation: RepresentationExtractor = encode_representation,
    preprocess: Preprocess | None = None,
    batch_size: int | None = None,
    steps_per_call: int = 1,
    actions: np.ndarray | None = None,
) -> np.ndarray:
    """(n_sequences, T, d) representations of `module` reading (n_sequences, T, *obs_shape)
    observations (as the env returned them; `preprocess` is the recipe's transform).

    Each row starts from `get_initial_state()`; `resets` (n_sequences, T) bools start a new
    episode at a step (state back to the initial one before the step is read). Rows are
    stepped `batch_size` at a time (default: all together). `actions` (n_sequences, T, ...):
    the action taken after each step, which a module that reads the previous action
    (`PrevActionInputAPI`) needs (it refuses to step without them).

    `steps_per_call` > 1: a stateful module with `encode_sequence_residuals`
    (`SequenceResidualAPI`) read through a default extractor, without `preprocess` or resets
    inside a row, reads that many steps per call (the state carried between calls, and the
    previous actions shifted in as stepping feeds them): the same computation in far fewer,
    larger calls, equal to stepping up to float rounding (not bit for bit). Any other case is
    stepped one step at a time as with 1.
    """
    out = _replay(
        module,
        observations,
        resets,
        representation,
        preprocess,
        batch_size,
        steps_per_call,
        actions,
    )
    if isinstance(out, dict):
        raise TypeError(
            "the representation extractor returned a mapping: use replay_named_representations"
        )
    return out


def replay_named_representations(
    module: RLModule,
    observations: np.ndarray,
    *,
    resets: np.ndarray | None = None,
    representation: RepresentationExtractor = residual_representations,
    preprocess: Preprocess | None = None,
    batch_size: int | None = None,
    steps_per_call: int = 1,
    actions: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """{name: (n_sequences, T, d)} from an extractor returning a mapping (default: every
    residual, `residual_representations`); otherwise as `replay_observations`."""
    out = _replay(
        module,
        observations,
        resets,
        representation,
        preprocess,
        batch_size,
        steps_per_call,
        actions,
    )
    if not isinstance(out, dict):
        raise TypeError("the representation extractor returned one tensor: use replay_observations")
    return out


def rollout_observations(rollouts: Rollouts) -> tuple[np.ndarray, int]:
    """(warm-up then recorded observations (E, W + T, ...), W): what the rollout's module read."""
    warmup = rollouts.warmup_observations
    if warmup is None:
        return rollouts.observations, 0
    return np.concatenate([warmup, rollouts.observations], axis=1), int(warmup.shape[1])


def rollout_actions(rollouts: Rollouts) -> np.ndarray | None:
    """(warm-up then recorded actions (E, W + T, ...)) as the module's `prev_actions` read
    them, aligned with `rollout_observations`: its own actions before the action transform
    where one mapped them (`Rollouts.module_actions`), else the executed ones; None when
    warm-up steps were played but their actions not kept (older rollouts)."""
    if rollouts.module_actions is not None:
        return rollouts.module_actions
    warmup = rollouts.warmup_actions
    if warmup is None:
        has_warmup = (
            rollouts.warmup_observations is not None and rollouts.warmup_observations.shape[1]
        )
        return None if has_warmup else rollouts.actions
    return np.concatenate([warmup, rollouts.actions], axis=1)


def replay_rollouts(
    module: RLModule,
    rollouts: Rollouts,
    *,
    representation: RepresentationExtractor = encode_representation,
    preprocess: Preprocess | None = None,
    batch_size: int | None = None,
    steps_per_call: int = 1,
) -> np.ndarray:
    """`module`'s (E, T, d) representations on exactly the observations of `rollouts` (warm-up
    steps read but not returned), aligned with `rollouts.targets`. `preprocess` must be the
    one the rollouts used; `batch_size` defaults to the rollouts' `num_envs`;
    `steps_per_call` as in `replay_observations`."""
    observations, warmup = rollout_observations(rollouts)
    size = rollouts.num_envs if batch_size is None else batch_size
    features = replay_observations(
        module,
        observations,
        representation=representation,
        preprocess=preprocess,
        batch_size=size,
        actions=rollout_actions(rollouts),
        steps_per_call=steps_per_call,
    )
    return features[:, warmup:]


def replay_rollouts_named(
    module: RLModule,
    rollouts: Rollouts,
    *,
    representation: RepresentationExtractor = residual_representations,
    preprocess: Preprocess | None = None,
    batch_size: int | None = None,
    steps_per_call: int = 1,
) -> dict[str, np.ndarray]:
    """`replay_rollouts` for a mapping extractor: {name: (E, T, d)} from one pass."""
    observations, warmup = rollout_observations(rollouts)
    size = rollouts.num_envs if batch_size is None else batch_size
    named = replay_named_representations(
        module,
        observations,
        representation=representation,
        preprocess=preprocess,
        batch_size=size,
        steps_per_call=steps_per_call,
        actions=rollout_actions(rollouts),
    )
    return {name: values[:, warmup:] for name, values in named.items()}
