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

import hashlib
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


@dataclass(frozen=True)
class FitTask:
    """One MLP fit of `fit_predict_many`: its data and its seeds (see `_fit_predict`)."""

    x_train: np.ndarray  # (n, m) inputs of the train steps
    y_train: np.ndarray  # (n, t) targets of the train steps
    x_test: np.ndarray  # (n_test, m) inputs to predict (as many rows in every task)
    init_seed: int
    batch_seed: int
    n_extra: int = 0
    extra_seed: int | None = None


def _initial_weights(
    width: int, n_out: int, regressor: WindowRegressor, task: FitTask
) -> list[tuple[Any, Any]]:
    """[(weight (out, in), bias (out,))] per layer: the draws torch.nn.Linear makes, in the
    order the per-model network built them (seeded by `task.init_seed`), the extra columns'
    first-layer weights from `task.extra_seed` at the base fan-in's scale."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(task.init_seed)
        layers = []
        fan_in = width - task.n_extra
        for hidden in regressor.hidden:
            layers.append(torch.nn.Linear(fan_in, hidden))
            fan_in = hidden
        layers.append(torch.nn.Linear(fan_in, n_out))
    out = [(layer.weight.detach().clone(), layer.bias.detach().clone()) for layer in layers]
    if task.n_extra:
        if task.extra_seed is None:
            raise ValueError("a fit with n_extra extra inputs needs extra_seed")
        first, bias = out[0]
        bound = 1.0 / np.sqrt(first.shape[1])  # PyTorch's default scale, the base's fan-in
        extra = torch.empty(first.shape[0], task.n_extra)
        extra.uniform_(-bound, bound, generator=torch.Generator().manual_seed(task.extra_seed))
        out[0] = (torch.cat([first, extra], dim=1), bias)
    return out


class FitMemo:
    """Fits already made, by content: `fit_predict_many(..., memo=)` reads a fit asked for
    again (the same data, seeds and regressor) instead of training it again.

    One analysis fits some models twice: the incremental test's window alone (a) is the
    baseline window of the same k on the same inputs and streams (`compare_with_windows`).
    A model's numbers do not depend on which others share its loop (bit for bit:
    tests/analysis/test_window_batched_fit.py), so the read fit is the refit's, bit for bit.
    The key is a hash of every array (dtype, shape, bytes), the seeds and the regressor;
    the predictions are kept read-only (about 3 MB per fit at the CPU budget): make one per
    analysis and drop it after."""

    def __init__(self) -> None:
        self._fits: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.reads = 0  # fits read instead of trained

    def __len__(self) -> int:
        return len(self._fits)

    @staticmethod
    def key(task: FitTask, regressor: WindowRegressor) -> str:
        digest = hashlib.blake2b(digest_size=32)
        for values in (task.x_train, task.y_train, task.x_test):
            array = np.ascontiguousarray(values)
            digest.update(f"{array.dtype.str}{array.shape}".encode())
            digest.update(array.tobytes())
        # The extra columns' seed draws nothing when there are none.
        extra = task.extra_seed if task.n_extra else None
        seeds = (task.init_seed, task.batch_seed, task.n_extra, extra)
        digest.update(repr((seeds, asdict(regressor))).encode())
        return digest.hexdigest()

    def get(self, key: str) -> tuple[np.ndarray, np.ndarray] | None:
        return self._fits.get(key)

    def put(self, key: str, fit: tuple[np.ndarray, np.ndarray]) -> None:
        for values in fit:
            values.setflags(write=False)  # shared by every caller that reads it
        self._fits[key] = fit


def fit_predict_many(
    tasks: Sequence[FitTask], regressor: WindowRegressor, memo: FitMemo | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """[(train predictions, test predictions)] of one MLP per task, all trained together;
    with `memo`, a task fitted before (same content) is read from it and only the others
    are trained (`FitMemo`), and every new fit is kept there."""
    if memo is None:
        return _train_together(tasks, regressor)
    keys = [FitMemo.key(task, regressor) for task in tasks]
    known = [memo.get(key) for key in keys]
    missing = [index for index, fit in enumerate(known) if fit is None]
    trained = _train_together([tasks[index] for index in missing], regressor)
    for index, fit in zip(missing, trained, strict=True):
        memo.put(keys[index], fit)
        known[index] = fit
    memo.reads += len(tasks) - len(missing)
    return [fit for fit in known if fit is not None]


def _train_together(
    tasks: Sequence[FitTask], regressor: WindowRegressor
) -> list[tuple[np.ndarray, np.ndarray]]:
    """[(train predictions, test predictions)] of one MLP per task, all trained together.

    Each model's maths is its own fit's: its inputs standardized on its train steps, its
    targets centred, its initial weights (`_initial_weights`), its minibatch order (from its
    `batch_seed`), Adam with a cosine decay over the same steps. One optimizer loop steps
    them all: each model's first layer reads its own inputs (any width), the layers after it
    are stacked (weights (M, out, in), batched matrix products), and the loss is the sum of
    the models' own mean squared errors, so each model's gradient is its own fit's (Adam is
    elementwise). A model's numbers do not depend on which others share its loop; they equal
    fitting it with torch.nn.Linear layers up to float rounding (the batched kernels sum in
    another order). Every task needs the same number of train steps."""
    import torch

    if not tasks:
        return []
    rows = {task.x_train.shape[0] for task in tasks}
    if len(rows) != 1:
        raise ValueError(f"the fits trained together need equal train steps, got {sorted(rows)}")
    n = rows.pop()
    n_out = tasks[0].y_train.shape[1]
    if any(task.y_train.shape != (n, n_out) for task in tasks):
        raise ValueError("the fits trained together need (n, n_targets) targets alike")
    if len({task.x_test.shape[0] for task in tasks}) != 1:
        raise ValueError("the fits trained together need equal test steps")

    def tensor(values: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(values, dtype=torch.float32)

    moments = []
    for task in tasks:
        scale = task.x_train.std(axis=0)
        # Constant inputs (e.g. always-present flags) keep a scale of 1.
        moments.append((task.x_train.mean(axis=0), np.where(scale > 0, scale, 1.0)))
    y_means = [task.y_train.mean(axis=0) for task in tasks]
    xs = [tensor((t.x_train - m) / s) for t, (m, s) in zip(tasks, moments, strict=True)]
    ys = torch.stack([tensor(t.y_train - m) for t, m in zip(tasks, y_means, strict=True)])
    initial = [_initial_weights(t.x_train.shape[1], n_out, regressor, t) for t in tasks]
    # The first layer per model (its own width); the layers after it stacked.
    first = [(model[0][0].requires_grad_(), model[0][1].requires_grad_()) for model in initial]
    stacked = []
    for layer in range(1, len(regressor.hidden) + 1):
        stacked.append(torch.stack([model[layer][0] for model in initial]).requires_grad_())
        stacked.append(torch.stack([model[layer][1] for model in initial]).requires_grad_())

    def forward(inputs: Sequence[torch.Tensor]) -> torch.Tensor:  # M x (B, w_m) -> (M, B, out)
        x = torch.stack([torch.addmm(b, x, w.t()) for x, (w, b) in zip(inputs, first, strict=True)])
        for layer in range(0, len(stacked), 2):
            x = torch.nn.functional.gelu(x)
            weight, bias = stacked[layer], stacked[layer + 1]
            x = torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))
        return x

    batch = min(regressor.batch_size, n)
    per_epoch = max(1, n // batch)
    params = [p for pair in first for p in pair] + stacked
    optimizer = torch.optim.Adam(params, lr=regressor.learning_rate)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, regressor.epochs * per_epoch)
    generators = [torch.Generator().manual_seed(task.batch_seed) for task in tasks]
    # Rows are gathered with index_select (the same values as x[rows], a quarter of its time
    # at these sizes); the targets of model m are rows m * n + i of the flattened stack.
    flat_ys = ys.reshape(-1, n_out)
    offsets = (torch.arange(len(tasks)) * n)[:, None]
    for _ in range(regressor.epochs):
        orders = torch.stack([torch.randperm(n, generator=g) for g in generators])
        for step in range(per_epoch):
            picked = orders[:, step * batch : (step + 1) * batch]  # (M, B): each its own rows
            inputs = [torch.index_select(x, 0, rows) for x, rows in zip(xs, picked, strict=True)]
            targets = torch.index_select(flat_ys, 0, (picked + offsets).reshape(-1))
            error = forward(inputs) - targets.reshape(picked.shape[0], picked.shape[1], n_out)
            loss = (error**2).mean(dim=(1, 2)).sum()  # each model's own mean, summed
            optimizer.zero_grad()
            torch.autograd.backward(loss)  # loss.backward(), which torch leaves unannotated
            optimizer.step()
            schedule.step()
    with torch.inference_mode():
        train_pred = forward(xs).double().numpy()
        tests = [tensor((t.x_test - m) / s) for t, (m, s) in zip(tasks, moments, strict=True)]
        test_pred = forward(tests).double().numpy()
    return [(train_pred[i] + y_means[i], test_pred[i] + y_means[i]) for i in range(len(tasks))]


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
    fit only through what the extra columns carry (incremental R², `incremental.py`). One
    model of `fit_predict_many`."""
    task = FitTask(x_train, y_train, x_test, init_seed, batch_seed, n_extra, extra_seed)
    return fit_predict_many([task], regressor)[0]


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
    memo: FitMemo | None = None,
) -> list[WindowFit]:
    """For each k in `ks`: an MLP from the last k steps of `sequence` (E, T, m) (with
    `history` (E, W, m) before it) to `targets` (E, T, n), fitted on the `train` episodes,
    predicting the `test` episodes (`memo`: fits made before are read, `FitMemo`)."""
    regressor = regressor or WindowRegressor()
    y = np.asarray(targets, dtype=np.float64)
    seq = np.asarray(sequence, dtype=np.float64)
    if y.ndim != 3 or seq.ndim != 3 or y.shape[:2] != seq.shape[:2]:
        raise ValueError(f"sequence {seq.shape} and targets {y.shape} must be (E, T, .) alike")
    train, test = np.asarray(train), np.asarray(test)
    stream = tuple(stream)
    n_targets = y.shape[2]
    y_train = y[train].reshape(-1, n_targets)
    features = [(int(k), window_features(seq, int(k), history)) for k in ks]
    tasks = [
        FitTask(
            values[train].reshape(-1, values.shape[2]),
            y_train,
            values[test].reshape(-1, values.shape[2]),
            stream_seed(seed, *stream, f"k{k}", "init"),
            stream_seed(seed, *stream, f"k{k}", "batches"),
        )
        for k, values in features
    ]
    if progress is not None:
        names = ", ".join(str(k) for k, _ in features)
        progress(f"window baselines k = {names}: {len(tasks)} MLPs trained together")
    sst = ((y_train - y_train.mean(axis=0)) ** 2).sum()
    fits = []
    for (k, values), (train_pred, test_pred) in zip(
        features, fit_predict_many(tasks, regressor, memo), strict=True
    ):
        width = values.shape[2]
        train_r2 = float(1.0 - ((y_train - train_pred) ** 2).sum() / sst) if sst > 0 else np.nan
        fits.append(
            WindowFit(
                k=k,
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

            def within(scores: HeldOutScores, name: str = name) -> Any:
                return scores.within_branch.get(name)

            out[name] = pick(within)
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
    memo: FitMemo | None = None,
) -> WindowTable:
    """Baseline windows k in `ks` against the agent's probe `agent` (its split, its test
    predictions and its bootstrap resamples; `seed` defaults to its `ProbeSettings.seed`).
    `sequence` (E, T, m) is the window's input for all episodes (never the target itself:
    for an env that shows the belief, pass only the token and action parts), `targets`
    (E, T, n) the probe's targets, `branchings` {name: (E, T) labels} the branches to score
    within; `memo` keeps the fits for a later call that asks for the same (`FitMemo`)."""
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
        memo=memo,
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
