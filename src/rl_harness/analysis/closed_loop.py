"""Closed-loop analysis: each checkpoint on its own rollouts, input counterfactuals, input
ablations whose corruption stays in the carried context, agreement with a reference policy.

`probe_checkpoints` (checkpoint_probes.py) replays one fixed rollout through every
checkpoint: the representation changes only with the weights, but the early checkpoints
are scored on histories they would never produce. `probe_checkpoints_closed_loop` scores
each checkpoint on the rollouts it plays itself (a `collect(module) -> Rollouts` the caller
builds from `collect_rollouts`), beside the fixed replay, not instead of it.

Counterfactuals (`input_counterfactual`): at every recorded step, the newest observation
is edited (e.g. the previous-action one-hot swapped for another action) while the carried
state stays the one the clean history built; a fitted probe decodes both readings and the
decoded belief shift is compared with the exact one (injected: the env layer knows the
belief math). Ablations (`ablate_rollouts` for replay, `ablation_preprocess` for closed
loop) corrupt some observation columns at *every* step ("mask": zeros; "shuffle": the
values of other steps of the same episode on replay, of other copies at the same step in
closed loop), so a stateful module's carried context holds the corrupted inputs too.
`action_agreement` is the share of steps where the module's greedy action equals a
reference policy's, and the mean probability its sampling policy gives that action.

Nothing here names an env: columns are slices of the flat observation (the HMM env's
`env.layout.actions`), exact beliefs and reference actions come from the caller.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch

from rl_harness.analysis.checkpoint_probes import CheckpointProbe, log_checkpoint_probe
from rl_harness.analysis.probes.affine import AffineProbe
from rl_harness.analysis.probes.evaluate import evaluate_probe
from rl_harness.analysis.probes.settings import ProbeSettings, require_settings
from rl_harness.analysis.replay import Preprocess, replay_rollouts, rollout_observations
from rl_harness.analysis.rollouts import (
    ACTION_DIST_INPUTS,
    STATE_OUT,
    ModuleStepper,
    RepresentationExtractor,
    Rollouts,
    encode_representation,
)
from rl_harness.seeding import stream_rng

if TYPE_CHECKING:
    from ray.rllib.core.rl_module.rl_module import RLModule

Ablation = Literal["mask", "shuffle"]
ABLATIONS = ("mask", "shuffle")


def score_values(value: Any, path: str = "score") -> Any:
    """A score's value made JSON-ready: a number (NumPy scalars included) as a float, a
    sequence or array as a list, a mapping (str keys) as a dict, each checked all the way
    down. TypeError naming the path of the first value that is none of these."""
    if isinstance(value, bool):
        raise TypeError(f"{path} is a bool; give a number (e.g. float(flag))")
    if isinstance(value, int | float | np.integer | np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        if not np.issubdtype(value.dtype, np.number):
            raise TypeError(f"{path} is an array of {value.dtype}, not of numbers")
        return value.astype(np.float64).tolist()
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{path} has a key {key!r} that is not a str")
            out[key] = score_values(item, f"{path}/{key}")
        return out
    if isinstance(value, list | tuple):
        return [score_values(item, f"{path}[{i}]") for i, item in enumerate(value)]
    raise TypeError(
        f"{path} is a {type(value).__name__}; a score holds numbers, lists and mappings of them"
    )


def _scored(
    score: Callable[[Rollouts], Mapping[str, Any]] | None, rollouts: Rollouts
) -> dict[str, Any]:
    if score is None:
        return {}
    values = score(rollouts)
    if not isinstance(values, Mapping):
        raise TypeError(f"score must return a mapping of names to values, got {type(values)}")
    scores: dict[str, Any] = score_values(values)
    return scores


def _branch_codes(
    branch_tokens: Callable[[Rollouts], np.ndarray] | None, rollouts: Rollouts
) -> np.ndarray | None:
    if branch_tokens is None:
        return None
    codes = np.asarray(branch_tokens(rollouts))
    steps = rollouts.targets.shape[:2]
    if codes.shape[:2] != steps:
        raise ValueError(
            f"branch_tokens must give codes of the rollouts' (episodes, steps) {steps}, got "
            f"shape {codes.shape}"
        )
    return codes


@dataclass(frozen=True, kw_only=True)
class ClosedLoopProbe(CheckpointProbe):
    """One checkpoint probed on its own rollouts (the fields of CheckpointProbe, its full
    `report` included), with the rollouts' reward per step; `extra` holds the caller's scores
    of those rollouts (numbers, lists and mappings of them, e.g. its Bayes-optimal accuracy
    or action fractions per state)."""

    reward_per_step: float
    extra: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return super().to_dict() | {
            "reward_per_step": self.reward_per_step,
            "extra": dict(self.extra),
        }


def check_closed_loop(
    module: RLModule,
    collect: Callable[[RLModule], Rollouts],
    *,
    branch_tokens: Callable[[Rollouts], np.ndarray] | None = None,
    score: Callable[[Rollouts], Mapping[str, Any]] | None = None,
    target_names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Call BEFORE training, with the untrained module (e.g. the config's
    `get_rl_module_spec().build()`): plays `collect(module)` once and checks what
    `probe_checkpoints_closed_loop` will need of the same arguments after training (that
    collect returns Rollouts, the branch codes' shape, the target names' count, the score's
    values: numbers, lists and mappings of them), so a mistake fails in seconds rather than
    after the whole run. Returns the untrained module's scores (JSON-ready)."""
    rollouts = collect(module)
    if not isinstance(rollouts, Rollouts):
        raise TypeError(f"collect must return Rollouts, got {type(rollouts).__name__}")
    _branch_codes(branch_tokens, rollouts)
    if target_names is not None and len(target_names) != rollouts.targets.shape[-1]:
        raise ValueError(
            f"{len(target_names)} target names for {rollouts.targets.shape[-1]} targets"
        )
    return _scored(score, rollouts)


def probe_checkpoints_closed_loop(
    checkpoints: Sequence[tuple[int, Path | str]],
    collect: Callable[[RLModule], Rollouts],
    settings: ProbeSettings | None = None,
    *,
    branch_tokens: Callable[[Rollouts], np.ndarray] | None = None,
    score: Callable[[Rollouts], Mapping[str, Any]] | None = None,
    target_names: Sequence[str] | None = None,
    module_id: str | None = None,
    progress: Callable[[str], None] | None = None,
    **loose: object,
) -> list[ClosedLoopProbe]:
    """For each (env_steps, checkpoint), oldest first: load its module, let it play
    `collect(module)` (the same seeds every time: only the policy differs) and probe its
    representations for its own targets (`evaluate_probe` under `settings`, a
    `ProbeSettings`, required; `branch_tokens(rollouts)` gives the within-branch codes).
    `score(rollouts)` may return numbers, lists and nested mappings (`score_values`); check
    the arguments before training with `check_closed_loop`. Each checkpoint logs one
    progress line. Save `[p.to_dict() for p in ...]` as a JSON list
    and compare the last one with `rl-harness compare --metric FILE.json:probes[-1]/r2_pooled`."""
    from rl_harness.analysis.checkpoints import DEFAULT_MODULE_ID, load_module

    settings = require_settings(settings, loose, "probe_checkpoints_closed_loop")
    out = []
    ordered = sorted(checkpoints, key=lambda pair: pair[0])
    for index, (steps, checkpoint) in enumerate(ordered, start=1):
        began = time.perf_counter()
        module = load_module(Path(checkpoint), module_id or DEFAULT_MODULE_ID)
        rollouts = collect(module)
        report = evaluate_probe(
            rollouts.representations,
            rollouts.targets,
            settings,
            target_names=target_names,
            branch_tokens=_branch_codes(branch_tokens, rollouts),
        ).report
        within = report.within_branch
        out.append(
            ClosedLoopProbe(
                env_steps=int(steps),
                checkpoint=str(checkpoint),
                reward_per_step=rollouts.mean_reward_per_step(),
                r2_pooled=report.r2_pooled,
                within_branch_r2_pooled=None if within is None else within.r2_pooled,
                report=report,
                extra=_scored(score, rollouts),
            )
        )
        log_checkpoint_probe(out[-1], index, len(ordered), time.perf_counter() - began, progress)
    return out


# ---------------------------------------------------------------------- counterfactuals


@dataclass(frozen=True)
class CounterfactualReport:
    """Decoded against exact belief shifts over the steps that were edited.

    `cosine`: of the stacked shift vectors; `slope`: least-squares gain of decoded on exact
    (1 = the representation moves as far as the belief does); `r2`: of the decoded shift
    as a prediction of the exact one; `exact_norm` / `decoded_norm`: mean Euclidean sizes.
    """

    n_steps: int
    cosine: float
    slope: float
    r2: float
    exact_norm: float
    decoded_norm: float

    def to_dict(self) -> dict[str, float]:
        return {
            "n_steps": self.n_steps,
            "cosine": self.cosine,
            "slope": self.slope,
            "r2": self.r2,
            "exact_norm": self.exact_norm,
            "decoded_norm": self.decoded_norm,
        }


def counterfactual_representations(
    module: RLModule,
    rollouts: Rollouts,
    edited: np.ndarray,
    *,
    representation: RepresentationExtractor = encode_representation,
    preprocess: Preprocess | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(clean, edited) (E, T, d) representations: step t of `edited` (E, T, *obs_shape) is
    read from the state the clean history up to t built, and the clean step t then carries
    on, so only the newest input differs."""
    observations, warmup = rollout_observations(rollouts)
    n = observations.shape[0]
    if edited.shape != rollouts.observations.shape:
        raise ValueError(
            f"edited observations {edited.shape} differ from the rollouts' "
            f"{rollouts.observations.shape}"
        )
    if not isinstance(module, torch.nn.Module):  # eval()/train() below are torch's
        raise TypeError(f"expected a torch RLModule, got {type(module).__name__}")
    stepper = ModuleStepper(module, n, representation=representation)
    prep = preprocess or (lambda obs: obs)
    clean, changed = [], []
    was_training = module.training
    module.eval()
    try:
        for t in range(observations.shape[1]):
            if t >= warmup:
                saved = stepper.state
                changed.append(stepper.read(prep(edited[:, t - warmup])))
                stepper.state = saved
            features = stepper.read(prep(observations[:, t]))
            if t >= warmup:
                clean.append(features)
    finally:
        module.train(was_training)
    return np.stack(clean, axis=1), np.stack(changed, axis=1)


def shift_report(decoded: np.ndarray, exact: np.ndarray, mask: np.ndarray) -> CounterfactualReport:
    """Compare decoded and exact shifts (..., k) over the steps where `mask` is True."""
    d = np.asarray(decoded, dtype=np.float64)[mask]
    e = np.asarray(exact, dtype=np.float64)[mask]
    if d.shape[0] == 0:
        raise ValueError("no edited steps to compare")
    cosine = float((d * e).sum() / (np.linalg.norm(d) * np.linalg.norm(e)))
    slope = float((d * e).sum() / (e * e).sum())
    residual = ((d - e) ** 2).sum()
    total = ((e - e.mean(axis=0)) ** 2).sum()
    return CounterfactualReport(
        n_steps=int(d.shape[0]),
        cosine=cosine,
        slope=slope,
        r2=float(1.0 - residual / total),
        exact_norm=float(np.linalg.norm(e, axis=-1).mean()),
        decoded_norm=float(np.linalg.norm(d, axis=-1).mean()),
    )


def input_counterfactual(
    module: RLModule,
    rollouts: Rollouts,
    probe: AffineProbe,
    edited: np.ndarray,
    exact_shift: np.ndarray,
    mask: np.ndarray,
    *,
    representation: RepresentationExtractor = encode_representation,
    preprocess: Preprocess | None = None,
) -> CounterfactualReport:
    """Edit the newest observation (`edited`, e.g. `swap_one_hot`), decode both readings
    with `probe` and compare probe(edited) - probe(clean) with `exact_shift` (E, T, k),
    the true change of the target, over the steps in `mask` (E, T)."""
    clean, changed = counterfactual_representations(
        module, rollouts, edited, representation=representation, preprocess=preprocess
    )
    shape = clean.shape
    decoded = probe.predict(changed.reshape(-1, shape[-1])) - probe.predict(
        clean.reshape(-1, shape[-1])
    )
    return shift_report(decoded.reshape(*shape[:2], -1), exact_shift, mask)


def swap_one_hot(
    observations: np.ndarray, columns: slice, shift: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(edited observations, new codes (E, T), mask (E, T)): the one-hot block in `columns`
    (e.g. the newest previous action) moved from code c to (c + shift) mod width; steps
    whose block is all zeros (no action yet) are left alone and masked out."""
    edited = np.array(observations, copy=True)
    block = edited[..., columns]
    present = block.sum(axis=-1) > 0
    codes = block.argmax(axis=-1)
    new = (codes + shift) % block.shape[-1]
    swapped = np.eye(block.shape[-1], dtype=block.dtype)[new]
    edited[..., columns] = np.where(present[..., None], swapped, block)
    return edited, np.where(present, new, -1), present


# ---------------------------------------------------------------------- ablations


def _check_mode(mode: str) -> None:
    if mode not in ABLATIONS:
        raise ValueError(f"ablation must be one of {ABLATIONS}, got {mode!r}")


def ablate_rollouts(
    rollouts: Rollouts,
    columns: slice,
    mode: Ablation,
    *,
    seed: int,
    stream: Sequence[str] = ("analysis", "ablation"),
) -> Rollouts:
    """The rollouts with `columns` of every observation (warm-up included) zeroed ("mask")
    or permuted among the steps of the same episode ("shuffle", from the named stream):
    replayed, a stateful module's context holds only corrupted inputs."""
    _check_mode(mode)
    observations, warmup = rollout_observations(rollouts)
    corrupted = np.array(observations, copy=True)
    if mode == "mask":
        corrupted[..., columns] = 0
    else:
        rng = stream_rng(seed, *stream, "shuffle")
        steps = np.tile(np.arange(corrupted.shape[1]), (corrupted.shape[0], 1))
        order = rng.permuted(steps, axis=1)
        rows = np.arange(corrupted.shape[0])[:, None]
        corrupted[..., columns] = observations[rows, order][..., columns]
    return replace(
        rollouts,
        observations=corrupted[:, warmup:],
        warmup_observations=corrupted[:, :warmup],
    )


def ablation_preprocess(
    columns: slice,
    mode: Ablation,
    *,
    seed: int,
    stream: Sequence[str] = ("analysis", "ablation"),
) -> Preprocess:
    """A `preprocess` for `collect_rollouts`: the module reads `columns` zeroed ("mask") or
    taken from another copy at the same step ("shuffle", a fresh permutation per step from
    the named stream), while the env runs on the actions it takes (closed loop)."""
    _check_mode(mode)
    rng = stream_rng(seed, *stream, "closed_loop_shuffle")

    def corrupt(obs: np.ndarray) -> np.ndarray:
        out = np.array(obs, copy=True)
        if mode == "mask":
            out[:, columns] = 0
        else:
            out[:, columns] = obs[rng.permutation(obs.shape[0])][:, columns]
        return out

    return corrupt


# ---------------------------------------------------------------------- agreement


def _logits(module: RLModule, batch: dict[str, Any]) -> Any:
    out = module.forward_inference(batch)
    logits = out[ACTION_DIST_INPUTS]
    if module.is_stateful():
        return logits, out[STATE_OUT]
    return logits


def action_agreement(
    module: RLModule,
    rollouts: Rollouts,
    reference_actions: np.ndarray,
    *,
    preprocess: Preprocess | None = None,
) -> dict[str, float]:
    """Agreement of a Discrete-action module with reference actions (E, T) on the recorded
    steps (replayed with the state carried): "greedy" (share of steps where its most likely
    action is the reference one) and "sampled" (mean probability its policy puts on it)."""
    with torch.inference_mode():
        logits = replay_rollouts(module, rollouts, representation=_logits, preprocess=preprocess)
    reference = np.asarray(reference_actions, dtype=np.int64)
    if reference.shape != logits.shape[:2]:
        raise ValueError(f"reference actions {reference.shape} differ from {logits.shape[:2]}")
    shifted = logits - logits.max(axis=-1, keepdims=True)
    probabilities = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    chosen = np.take_along_axis(probabilities, reference[..., None], axis=-1)[..., 0]
    return {
        "greedy": float((logits.argmax(axis=-1) == reference).mean()),
        "sampled": float(chosen.mean()),
    }
