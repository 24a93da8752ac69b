"""Memory versus a baseline window: how well do the last k steps' inputs predict the target?

A probe that reads the decision belief from an agent's representation shows memory only if
it beats what a baseline window of the agent's own input (its last k steps; not the env's
observation window nor the transformer's attention context: see docs/probes.md) already
determines. The belief is a function of the visible tokens *and the agent's executed
actions*, so the baseline window reads both: at each step the last k per-step input vectors
(e.g. the visible token one-hot and the previous executed action), newest first
(`probes.window_features`, warm-up steps as history so recorded steps see full windows).

The baseline is nonlinear: a small MLP (`WindowRegressor`: GELU hidden layers, squared
error, Adam with a cosine learning-rate decay, inputs standardized on the train steps),
fitted on the agent probe's *train* episodes and scored on its *test* episodes, so both
predict the same held-out steps. Deterministic: initial weights from torch seeded by the
named stream `(*stream, "k<k>", "init")`, minibatch order from `(*stream, "k<k>", "batches")`
(same data, code, torch build and thread count give the same numbers).

`compare_with_windows(agent, sequence, ...)` fits k = 1..K and reports, per k, the window's
R² (global and within each branching) and the paired bootstrap of agent-minus-window on the
agent's own resamples (`probes.paired_difference`), plus how many steps of history the
agent's representation is worth (`history_worth`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rl_harness.analysis.probes.paired import HeldOutScores, held_out_scores, paired_difference
from rl_harness.analysis.probes.windows import window_features
from rl_harness.seeding import stream_seed

if TYPE_CHECKING:
    from rl_harness.analysis.probes.evaluate import ProbeEvaluation

DEFAULT_STREAM = ("analysis", "window_baseline")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class WindowRegressor:
    """The window baseline's MLP and its training."""

    hidden: tuple[int, ...] = (128, 128)
    epochs: int = 20
    batch_size: int = 2048
    learning_rate: float = 5e-3

    def __post_init__(self) -> None:
        if not self.hidden or any(h < 1 for h in self.hidden):
            raise ValueError(f"hidden must be positive layer widths, got {self.hidden!r}")
        if self.epochs < 1 or self.batch_size < 1 or not self.learning_rate > 0:
            raise ValueError("epochs, batch_size and learning_rate must be positive")


@dataclass(frozen=True)
class WindowFit:
    """One fitted window baseline: its predictions on the test episodes."""

    k: int
    test_predictions: np.ndarray  # (n_test_episodes, T, n_targets)
    train_r2_pooled: float  # on the train steps it was fitted to
    n_inputs: int


def _fit_predict(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    regressor: WindowRegressor,
    init_seed: int,
    batch_seed: int,
    n_extra: int = 0,
    extra_seed: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(train predictions, test predictions) of an MLP fitted to (x_train, y_train).

    The last `n_extra` columns of x are extra inputs beside a base fit's: the network is
    initialised exactly as the base fit on the other columns (same `init_seed`, same draws),
    the extra columns' first-layer weights drawn at the same scale from `extra_seed`, and
    the minibatch order is the base fit's. So a fit with extra inputs differs from the base
    fit only through what the extra columns carry (incremental R², `incremental.py`)."""
    import torch

    mean = x_train.mean(axis=0)
    scale = x_train.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)  # constant inputs (e.g. always-present flags)
    y_mean = y_train.mean(axis=0)

    def tensor(values: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(values, dtype=torch.float32)

    xs, ys = tensor((x_train - mean) / scale), tensor(y_train - y_mean)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(init_seed)
        layers: list[torch.nn.Module] = []
        # The base fit's layers (the extra columns join the first layer below).
        width = xs.shape[1] - n_extra
        for hidden in regressor.hidden:
            layers += [torch.nn.Linear(width, hidden), torch.nn.GELU()]
            width = hidden
        net = torch.nn.Sequential(*layers, torch.nn.Linear(width, ys.shape[1]))
        if n_extra:  # (inside fork_rng: building the layer draws from the global stream)
            base = net[0]
            first = torch.nn.Linear(base.in_features + n_extra, base.out_features)
            bound = 1.0 / np.sqrt(base.in_features)  # PyTorch's default scale, base's fan-in
            extra = torch.empty(base.out_features, n_extra)
            extra.uniform_(-bound, bound, generator=torch.Generator().manual_seed(extra_seed))
            with torch.no_grad():
                first.weight.copy_(torch.cat([base.weight, extra], dim=1))
                first.bias.copy_(base.bias)
            net[0] = first
    n = xs.shape[0]
    batch = min(regressor.batch_size, n)
    per_epoch = max(1, n // batch)
    optimizer = torch.optim.Adam(net.parameters(), lr=regressor.learning_rate)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, regressor.epochs * per_epoch)
    generator = torch.Generator().manual_seed(batch_seed)
    for _ in range(regressor.epochs):
        order = torch.randperm(n, generator=generator)
        for step in range(per_epoch):
            rows = order[step * batch : (step + 1) * batch]
            loss = ((net(xs[rows]) - ys[rows]) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
    with torch.inference_mode():
        train_pred = net(xs).double().numpy() + y_mean
        test_pred = net(tensor((x_test - mean) / scale)).double().numpy() + y_mean
    return train_pred, test_pred


def fit_window_baselines(
    sequence: np.ndarray,
    targets: np.ndarray,
    *,
    train: np.ndarray,
    test: np.ndarray,
    ks: Sequence[int],
    seed: int,
    history: np.ndarray | None = None,
    regressor: WindowRegressor | None = None,
    stream: Sequence[str] = DEFAULT_STREAM,
    progress: Progress | None = None,
) -> list[WindowFit]:
    """For each k in `ks`: an MLP from the last k steps of `sequence` (E, T, m) (with
    `history` (E, W, m) before it) to `targets` (E, T, n), fitted on the `train` episodes,
    predicting the `test` episodes."""
    regressor = regressor or WindowRegressor()
    y = np.asarray(targets, dtype=np.float64)
    seq = np.asarray(sequence, dtype=np.float64)
    if y.ndim != 3 or seq.ndim != 3 or y.shape[:2] != seq.shape[:2]:
        raise ValueError(f"sequence {seq.shape} and targets {y.shape} must be (E, T, .) alike")
    train, test = np.asarray(train), np.asarray(test)
    stream = tuple(stream)
    fits = []
    n_targets = y.shape[2]
    for k in ks:
        features = window_features(seq, k, history)
        width = features.shape[2]
        train_pred, test_pred = _fit_predict(
            features[train].reshape(-1, width),
            y[train].reshape(-1, n_targets),
            features[test].reshape(-1, width),
            regressor,
            stream_seed(seed, *stream, f"k{k}", "init"),
            stream_seed(seed, *stream, f"k{k}", "batches"),
        )
        y_train = y[train].reshape(-1, n_targets)
        sst = ((y_train - y_train.mean(axis=0)) ** 2).sum()
        train_r2 = float(1.0 - ((y_train - train_pred) ** 2).sum() / sst) if sst > 0 else np.nan
        fits.append(
            WindowFit(
                k=int(k),
                test_predictions=test_pred.reshape(len(test), y.shape[1], n_targets),
                train_r2_pooled=train_r2,
                n_inputs=width,
            )
        )
        if progress is not None:
            progress(f"window baseline k={k}: fitted ({width} inputs, train R² {train_r2:.4f})")
    return fits


@dataclass(frozen=True)
class WindowComparison:
    """One window length: the baseline's held-out R² and the agent's minus it (paired)."""

    k: int
    window: HeldOutScores
    agent_minus_window: HeldOutScores
    train_r2_pooled: float
    n_inputs: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "window": self.window.to_dict(),
            "agent_minus_window": self.agent_minus_window.to_dict(),
            "train_r2_pooled": self.train_r2_pooled,
            "n_inputs": self.n_inputs,
        }


@dataclass(frozen=True)
class WindowTable:
    """The agent's held-out R² beside window baselines k = 1..K, on the same steps."""

    agent: HeldOutScores
    rows: list[WindowComparison]
    regressor: WindowRegressor
    seed: int
    stream: list[str]

    def history_worth(self) -> dict[str, dict[str, int | None]]:
        """Per score ("global" and each branching): the smallest k whose window reaches the
        agent's point R² (`window_reaches_agent_at_k`), and the smallest k at which the
        agent-minus-window interval's low end is <= 0 (`agent_not_above_window_at_k`);
        None: no window up to K does. The agent's representation is worth more than any
        window shorter than these."""

        def pick(get: Callable[[HeldOutScores], Any]) -> dict[str, int | None]:
            agent = get(self.agent)
            reach = next(
                (
                    row.k
                    for row in self.rows
                    if agent is not None
                    and get(row.window) is not None
                    and get(row.window).value >= agent.value
                ),
                None,
            )
            tie = next(
                (
                    row.k
                    for row in self.rows
                    if get(row.agent_minus_window) is not None
                    and get(row.agent_minus_window).low <= 0
                ),
                None,
            )
            return {"window_reaches_agent_at_k": reach, "agent_not_above_window_at_k": tie}

        out = {"global": pick(lambda s: s.r2_pooled)}
        for name in self.agent.within_branch:
            out[name] = pick(lambda s, name=name: s.within_branch.get(name))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "ks": [row.k for row in self.rows],
            "agent": self.agent.to_dict(),
            "windows": [row.to_dict() for row in self.rows],
            "history_worth": self.history_worth(),
            "regressor": asdict(self.regressor),
            "seed": self.seed,
            "stream": self.stream,
        }


def compare_with_windows(
    agent: ProbeEvaluation,
    sequence: np.ndarray,
    targets: np.ndarray,
    *,
    ks: Sequence[int],
    seed: int | None = None,
    history: np.ndarray | None = None,
    branchings: Mapping[str, np.ndarray] | None = None,
    regressor: WindowRegressor | None = None,
    stream: Sequence[str] = DEFAULT_STREAM,
    progress: Progress | None = None,
) -> WindowTable:
    """Baseline windows k in `ks` against the agent's probe `agent` (its split, its test
    predictions and its bootstrap resamples; `seed` defaults to its `ProbeSettings.seed`).
    `sequence` (E, T, m) is the window's input for all episodes (never the target itself:
    for an env that shows the belief, pass only the token and action parts), `targets`
    (E, T, n) the probe's targets, `branchings` {name: (E, T) labels} the branches to score
    within."""
    common = agent.scoring(branchings)
    seed = agent.settings.seed if seed is None else seed
    y = np.asarray(targets, dtype=np.float64)
    test = agent.test_episodes
    held_out = y[test]
    agent_scores = held_out_scores(held_out, agent.test_predictions, **common)
    regressor = regressor or WindowRegressor()
    fits = fit_window_baselines(
        sequence,
        y,
        train=agent.train_episodes,
        test=test,
        ks=ks,
        seed=seed,
        history=history,
        regressor=regressor,
        stream=stream,
        progress=progress,
    )
    rows = [
        WindowComparison(
            k=fit.k,
            window=held_out_scores(held_out, fit.test_predictions, **common),
            agent_minus_window=paired_difference(
                held_out, agent.test_predictions, fit.test_predictions, **common
            ),
            train_r2_pooled=fit.train_r2_pooled,
            n_inputs=fit.n_inputs,
        )
        for fit in fits
    ]
    return WindowTable(agent_scores, rows, regressor, int(seed), list(stream))
