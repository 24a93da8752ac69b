"""A memory yardstick and like-for-like baselines for a belief probe's R².

A within-branch R² of 0.9 says little until it is set against what a known amount of memory
gives on the same steps. Everything here scores on an agent probe's own split and bootstrap
resamples (`ProbeEvaluation`: its train episodes fit, its test episodes score, its
resamples give paired agent-minus-baseline intervals, `ProbeEvaluation.scoring`), with the
same branchings and, unless given, the seed and ridge of its `ProbeSettings`:

- `memory_yardstick`: the caller's beliefs of an exact Bayes filter that sees only the last
  m steps (filter memory m; `rl_harness.envs.hmm.window_beliefs`, one array per m), each
  read by the same affine probe the agent gets (fitted on the train episodes to the exact
  targets; the agent's `ProbeSettings.ridge` unless another is given). Its
  `equivalent_memory` says how many steps of exact filtering the agent's R² is worth: the
  smallest m whose filter reaches it, and a linear interpolation between the two m that
  bracket it (a reading aid: R² is not linear in m).
- `random_feature_probe`: untrained random ReLU features of a baseline window (inputs
  standardized on the train steps, weights N(0, 1 / n_inputs), biases N(0, 1), from the named
  stream `(*stream, "width<w>")`), read by an affine probe on the agent's split (give it a
  small ridge: a wide fit is ill-conditioned near 0): what a wide untrained nonlinear map of
  the input gives without any training.
- `mlp_probe`: the baseline windows' MLP (`windows.WindowRegressor`) fitted to any
  per-step features, e.g. the agent's representation, so the agent is read by the same
  nonlinear probe the windows get (like for like).
- `untrained_like(module, seed)`: a module of the same class, spaces and model config with
  fresh weights from a seed (several seeds give the spread of untrained controls).
- `within_branch_variance_fraction`: the share of the targets' variance left within
  branches: how much of the belief a within-branch R² is about.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rl_harness.analysis.probes.affine import fit_affine_by_qr
from rl_harness.analysis.probes.branches import branch_sums, within_scores
from rl_harness.analysis.probes.paired import HeldOutScores, held_out_scores, paired_difference
from rl_harness.analysis.windows import WindowRegressor, _fit_predict
from rl_harness.seeding import stream_rng, stream_seed

if TYPE_CHECKING:
    from ray.rllib.core.rl_module.rl_module import RLModule

    from rl_harness.analysis.probes.evaluate import ProbeEvaluation

DEFAULT_STREAM = ("analysis", "yardstick")


def _per_step(name: str, values: np.ndarray, episodes_steps: tuple[int, int]) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 3 or array.shape[:2] != episodes_steps:
        raise ValueError(
            f"{name} must be ({episodes_steps[0]}, {episodes_steps[1]}, d), got {array.shape}"
        )
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} holds NaN or infinite values")
    return array


def affine_test_predictions(
    features: np.ndarray, targets: np.ndarray, agent: ProbeEvaluation, ridge: float
) -> np.ndarray:
    """(n_test, T, k): an affine probe from `features` (E, T, d) to `targets` (E, T, k)
    fitted on the agent's train episodes (`fit_affine_by_qr`: each is fitted once, and a wide
    random map's fit costs about half the SVD's), predicting its test episodes."""
    y = np.asarray(targets, dtype=np.float64)
    x = _per_step("features", features, y.shape[:2])
    train, test = agent.train_episodes, agent.test_episodes
    probe = fit_affine_by_qr(
        x[train].reshape(-1, x.shape[2]), y[train].reshape(-1, y.shape[2]), ridge
    )
    return probe.predict(x[test].reshape(-1, x.shape[2])).reshape(len(test), y.shape[1], -1)


@dataclass(frozen=True)
class Baseline:
    """One predictor's held-out R² on the agent's steps, and the agent's minus it (paired)."""

    name: str
    scores: HeldOutScores
    agent_minus: HeldOutScores
    details: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "scores": self.scores.to_dict(),
            "agent_minus": self.agent_minus.to_dict(),
            **dict(self.details),
        }


def _baseline(
    name: str,
    targets: np.ndarray,
    agent: ProbeEvaluation,
    predictions: np.ndarray,
    common: Mapping[str, Any],
    details: Mapping[str, Any],
) -> Baseline:
    held_out = np.asarray(targets, dtype=np.float64)[agent.test_episodes]
    return Baseline(
        name=name,
        scores=held_out_scores(held_out, predictions, **common),
        agent_minus=paired_difference(held_out, agent.test_predictions, predictions, **common),
        details=details,
    )


@dataclass(frozen=True)
class MemoryYardstick:
    """The agent's held-out R² beside exact filters of the last m steps, on the same steps."""

    agent: HeldOutScores
    rows: list[Baseline]  # one per m, named "m<m>", details {"m": m}
    ridge: float
    # Branches of the last branch_k tokens: filters with m <= branch_k are constant within a
    # branch (their within-branch R² is about 0 or below, an offset of branch means, not
    # memory), so within-branch readings start at m = branch_k, the no-memory anchor.
    branch_k: int | None = None

    def equivalent_memory(self) -> dict[str, dict[str, float | int | None]]:
        """Per score ("global" and each branching): `reaches_agent_at_m` (the smallest m whose
        filter's point R² is >= the agent's; None: no m up to the largest does),
        `interpolated_m` (linear in R² between the m below and that m; None when no m
        reaches the agent or the smallest m already does), `agent_not_above_filter_at_m`
        (the smallest m where the agent-minus-filter interval's low end is <= 0)."""

        def pick(get: Any, first_m: int = 0) -> dict[str, float | int | None]:
            agent = get(self.agent)
            values = {
                int(row.details["m"]): (None if get(row.scores) is None else get(row.scores).value)
                for row in self.rows
                if int(row.details["m"]) >= first_m
            }
            reach, interpolated = equivalent_m(None if agent is None else agent.value, values)
            tie = next(
                (
                    int(row.details["m"])
                    for row in self.rows
                    if get(row.agent_minus) is not None and get(row.agent_minus).low <= 0
                ),
                None,
            )
            return {
                "reaches_agent_at_m": reach,
                "interpolated_m": interpolated,
                "agent_not_above_filter_at_m": tie,
            }

        out = {"global": pick(lambda s: s.r2_pooled)}
        for name in self.agent.within_branch:
            out[name] = pick(lambda s, name=name: s.within_branch.get(name), self.branch_k or 0)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "ms": [row.details["m"] for row in self.rows],
            "agent": self.agent.to_dict(),
            "filters": [row.to_dict() for row in self.rows],
            "equivalent_memory": self.equivalent_memory(),
            "ridge": self.ridge,
            "branch_k": self.branch_k,
        }


def equivalent_m(
    agent: float | None, values_by_m: Mapping[int, float | None]
) -> tuple[int | None, float | None]:
    """(the smallest m whose R² is >= `agent`, the m interpolated linearly in R² between the
    m below it and it). (None, None) when no m reaches the agent; the interpolation is None
    when the smallest m already does (the agent is worth at most that m) or the two are
    equal. A reading aid: R² is not linear in m."""
    if agent is None:
        return None, None
    ms = sorted(values_by_m)
    for index, m in enumerate(ms):
        value = values_by_m[m]
        if value is not None and value >= agent:
            below = values_by_m[ms[index - 1]] if index else None
            if below is None or value <= below:
                return m, None
            return m, ms[index - 1] + (agent - below) / (value - below) * (m - ms[index - 1])
    return None, None


def memory_yardstick(
    agent: ProbeEvaluation,
    beliefs_by_m: Mapping[int, np.ndarray],
    targets: np.ndarray,
    *,
    branchings: Mapping[str, np.ndarray] | None = None,
    ridge: float | None = None,
    branch_k: int | None = None,
) -> MemoryYardstick:
    """Score each filter memory m's beliefs (E, T, S) against `targets` (E, T, k) with the
    agent's protocol: an affine probe fitted on its train episodes (ridge: the agent's
    `ProbeSettings.ridge` unless given), R² on its test episodes (global and within each
    branching (E, T) labels), paired differences on its bootstrap resamples. `branch_k`:
    the branchings' branch depth (within-branch readings of the equivalent memory start at
    m = branch_k)."""
    if not beliefs_by_m:
        raise ValueError("beliefs_by_m holds no filter memory m")
    ridge = agent.settings.ridge if ridge is None else ridge
    common = agent.scoring(branchings)
    held_out = np.asarray(targets, dtype=np.float64)[agent.test_episodes]
    rows = [
        _baseline(
            f"m{m}",
            targets,
            agent,
            affine_test_predictions(beliefs_by_m[m], targets, agent, ridge),
            common,
            {"m": int(m)},
        )
        for m in sorted(beliefs_by_m)
    ]
    agent_scores = held_out_scores(held_out, agent.test_predictions, **common)
    return MemoryYardstick(agent_scores, rows, float(ridge), branch_k)


def random_relu_features(
    inputs: np.ndarray, train: np.ndarray, width: int, rng: np.random.Generator
) -> np.ndarray:
    """(E, T, width) = ReLU(z W + c): z the inputs standardized by the train episodes' steps
    (constant inputs left at 0), W ~ N(0, 1 / n_inputs), c ~ N(0, 1)."""
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"width must be an int >= 1, got {width!r}")
    x = np.asarray(inputs, dtype=np.float64)
    flat = x[train].reshape(-1, x.shape[2])
    mean, scale = flat.mean(axis=0), flat.std(axis=0)
    z = (x - mean) / np.where(scale > 0, scale, 1.0)
    weights = rng.normal(0.0, 1.0 / np.sqrt(x.shape[2]), size=(x.shape[2], width))
    bias = rng.normal(0.0, 1.0, size=width)
    result: np.ndarray = np.maximum(z @ weights + bias, 0.0)
    return result


def random_feature_probe(
    inputs: np.ndarray,
    targets: np.ndarray,
    agent: ProbeEvaluation,
    *,
    widths: Sequence[int],
    seed: int | None = None,
    branchings: Mapping[str, np.ndarray] | None = None,
    ridge: float | None = None,
    stream: Sequence[str] = DEFAULT_STREAM,
) -> list[Baseline]:
    """For each width: the agent's affine probe protocol on untrained random ReLU features
    (`random_relu_features`) of `inputs` (E, T, d), e.g. a baseline window of the agent's
    inputs. Width w draws from the named stream `(*stream, "width<w>")` of `seed`; `seed`
    and `ridge` default to the agent's `ProbeSettings` (give a wide map a small ridge)."""
    seed = agent.settings.seed if seed is None else seed
    ridge = agent.settings.ridge if ridge is None else ridge
    y = np.asarray(targets, dtype=np.float64)
    x = _per_step("inputs", inputs, y.shape[:2])
    common = agent.scoring(branchings)
    rows = []
    for width in widths:
        rng = stream_rng(seed, *stream, f"width{width}")
        features = random_relu_features(x, agent.train_episodes, width, rng)
        predictions = affine_test_predictions(features, y, agent, ridge)
        details = {
            "width": int(width),
            "n_inputs": int(x.shape[2]),
            "stream": [*stream, f"width{width}"],
        }
        rows.append(_baseline(f"random_relu_{width}", y, agent, predictions, common, details))
    return rows


def mlp_probe(
    features: np.ndarray,
    targets: np.ndarray,
    agent: ProbeEvaluation,
    *,
    seed: int | None = None,
    name: str = "mlp",
    branchings: Mapping[str, np.ndarray] | None = None,
    regressor: WindowRegressor | None = None,
    stream: Sequence[str] = (*DEFAULT_STREAM, "mlp"),
) -> Baseline:
    """The baseline windows' MLP (`WindowRegressor`, inputs standardized on the train steps)
    from `features` (E, T, d) to `targets`, fitted on the agent's train episodes, scored on
    its test episodes. Initial weights from `(*stream, name, "init")`, minibatch order from
    `(*stream, name, "batches")` of `seed` (default: the agent's `ProbeSettings.seed`)."""
    seed = agent.settings.seed if seed is None else seed
    y = np.asarray(targets, dtype=np.float64)
    x = _per_step("features", features, y.shape[:2])
    regressor = regressor or WindowRegressor()
    train, test = agent.train_episodes, agent.test_episodes
    train_pred, test_pred = _fit_predict(
        x[train].reshape(-1, x.shape[2]),
        y[train].reshape(-1, y.shape[2]),
        x[test].reshape(-1, x.shape[2]),
        regressor,
        stream_seed(seed, *stream, name, "init"),
        stream_seed(seed, *stream, name, "batches"),
    )
    y_train = y[train].reshape(-1, y.shape[2])
    sst = ((y_train - y_train.mean(axis=0)) ** 2).sum()
    details = {
        "regressor": regressor.__dict__ | {"hidden": list(regressor.hidden)},
        "n_inputs": int(x.shape[2]),
        "train_r2_pooled": float(1.0 - ((y_train - train_pred) ** 2).sum() / sst)
        if sst > 0
        else None,
        "stream": [*stream, name],
    }
    predictions = test_pred.reshape(len(test), y.shape[1], y.shape[2])
    return _baseline(name, y, agent, predictions, agent.scoring(branchings), details)


def within_branch_variance_fraction(targets: np.ndarray, labels: np.ndarray) -> float:
    """Sum over targets of the squared deviations from each branch's mean, over the same
    from the overall mean: the share of the variance a within-branch R² is about (branches
    of one step hold none; `within_scores`' SST). `targets` (E, T, k), `labels` (E, T)."""
    y = np.asarray(targets, dtype=np.float64)
    if y.ndim != 3 or np.size(labels) != y.shape[0] * y.shape[1]:
        raise ValueError(f"labels cover {np.shape(labels)}, targets {y.shape}")
    flat = y.reshape(-1, y.shape[-1])
    total = ((flat - flat.mean(axis=0)) ** 2).sum()
    per_step = np.reshape(labels, y.shape[:2])
    within = within_scores(branch_sums(y, y, per_step).total()).sst.sum()
    return float(within / total) if total > 0 else float("nan")


def untrained_like(module: RLModule, seed: int) -> RLModule:
    """A fresh module of `module`'s class, spaces and model config (so its initialisation
    scheme too), its weights drawn by torch seeded with `seed` (the global RNG restored)."""
    import torch
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    config = module.model_config or {}
    spec = RLModuleSpec(
        module_class=type(module),
        observation_space=module.observation_space,
        action_space=module.action_space,
        # A copy of a dict config; RLlib's DefaultModelConfig dataclass is frozen already.
        model_config=dict(config) if isinstance(config, dict) else config,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return spec.build()


def spread(values: Sequence[float | None]) -> dict[str, Any]:
    """{n, mean, min, max, values} of the defined values (None where none is)."""
    defined = np.array([v for v in values if v is not None], dtype=np.float64)
    if not defined.size:
        return {"n": 0, "mean": None, "min": None, "max": None, "values": list(values)}
    return {
        "n": int(defined.size),
        "mean": float(defined.mean()),
        "min": float(defined.min()),
        "max": float(defined.max()),
        "values": list(values),
    }
