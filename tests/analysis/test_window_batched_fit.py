"""Window MLPs trained together (issue 53 item 2): `fit_predict_many` stacks several models'
weights and steps them with one optimizer. Each model must come out as its own fit: the
per-model network the library fitted before (torch.nn.Sequential, its own Adam; copied below
as the reference) on the same data and seeds, to float rounding; a model's seeds or data
must move only that model (nothing mixes across the stack)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from rl_harness.analysis.windows import FitMemo, FitTask, WindowRegressor, fit_predict_many

REGRESSOR = WindowRegressor(hidden=(16, 12), epochs=6, batch_size=64, learning_rate=5e-3)
TOLERANCE = dict(rtol=2e-4, atol=2e-5)


def per_model_fit(task: FitTask, regressor: WindowRegressor) -> tuple[np.ndarray, np.ndarray]:
    """The library's one-model fit as it was at c0c881e (windows._fit_predict)."""
    mean = task.x_train.mean(axis=0)
    scale = task.x_train.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    y_mean = task.y_train.mean(axis=0)
    xs = torch.as_tensor((task.x_train - mean) / scale, dtype=torch.float32)
    ys = torch.as_tensor(task.y_train - y_mean, dtype=torch.float32)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(task.init_seed)
        layers: list[torch.nn.Module] = []
        width = xs.shape[1] - task.n_extra
        for hidden in regressor.hidden:
            layers += [torch.nn.Linear(width, hidden), torch.nn.GELU()]
            width = hidden
        net = torch.nn.Sequential(*layers, torch.nn.Linear(width, ys.shape[1]))
        if task.n_extra:
            base = net[0]
            first = torch.nn.Linear(base.in_features + task.n_extra, base.out_features)
            bound = 1.0 / np.sqrt(base.in_features)
            extra = torch.empty(base.out_features, task.n_extra)
            extra.uniform_(-bound, bound, generator=torch.Generator().manual_seed(task.extra_seed))
            with torch.no_grad():
                first.weight.copy_(torch.cat([base.weight, extra], dim=1))
                first.bias.copy_(base.bias)
            net[0] = first
    n = xs.shape[0]
    batch = min(regressor.batch_size, n)
    per_epoch = max(1, n // batch)
    optimizer = torch.optim.Adam(net.parameters(), lr=regressor.learning_rate)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, regressor.epochs * per_epoch)
    generator = torch.Generator().manual_seed(task.batch_seed)
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
        x_test = torch.as_tensor((task.x_test - mean) / scale, dtype=torch.float32)
        return (
            net(xs).double().numpy() + y_mean,
            net(x_test).double().numpy() + y_mean,
        )


def tasks() -> list[FitTask]:
    """Three fits of different widths on one set of train steps (as one call's windows k and
    the incremental fits with extra read-out columns): a nonlinear target of the inputs."""
    rng = np.random.default_rng(0)
    n, n_test = 640, 200
    out = []
    for index, (width, n_extra) in enumerate([(4, 0), (9, 0), (9, 3)]):
        x = rng.normal(size=(n + n_test, width)) * rng.uniform(0.5, 3.0, size=width) + 1.0
        x[:, 0] = 1.0  # a constant column: its scale is taken as 1
        y = np.stack([np.tanh(x[:, 1] * x[:, -1]), np.sin(x[:, -2]), x[:, 1] - x[:, -1]], -1)
        out.append(
            FitTask(
                x[:n],
                y[:n],
                x[n:],
                init_seed=100 + (index if index < 2 else 1),  # the third shares the second's
                batch_seed=200 + (index if index < 2 else 1),
                n_extra=n_extra,
                extra_seed=300 + index if n_extra else None,
            )
        )
    return out


def test_models_trained_together_equal_each_fitted_alone():
    together = fit_predict_many(tasks(), REGRESSOR)
    assert len(together) == 3
    for task, (train_pred, test_pred) in zip(tasks(), together, strict=True):
        train_ref, test_ref = per_model_fit(task, REGRESSOR)
        np.testing.assert_allclose(train_pred, train_ref, **TOLERANCE)
        np.testing.assert_allclose(test_pred, test_ref, **TOLERANCE)
        # It learned something (not the mean): the comparison has teeth.
        assert np.corrcoef(train_pred[:, 2], task.y_train[:, 2])[0, 1] > 0.5
    # A model's numbers do not depend on which others share the loop: alone, it is its slot
    # of the stack bit for bit (so the incremental test's window (a) is the baseline's).
    for index in range(3):
        alone = fit_predict_many(tasks()[index : index + 1], REGRESSOR)[0]
        np.testing.assert_array_equal(alone[0], together[index][0])
        np.testing.assert_array_equal(alone[1], together[index][1])


def test_a_models_seeds_and_data_move_only_that_model():
    base = fit_predict_many(tasks(), REGRESSOR)
    changed = tasks()
    changed[0] = dataclasses.replace(changed[0], batch_seed=999, init_seed=998)
    changed[2] = dataclasses.replace(changed[2], y_train=changed[2].y_train[::-1].copy())
    moved = fit_predict_many(changed, REGRESSOR)
    np.testing.assert_array_equal(moved[1][1], base[1][1])  # untouched, bit for bit
    for index in (0, 2):
        assert np.abs(moved[index][1] - base[index][1]).max() > 1e-2
    # The changed model is the changed task's own fit.
    np.testing.assert_allclose(moved[0][1], per_model_fit(changed[0], REGRESSOR)[1], **TOLERANCE)


def test_fits_of_different_train_sizes_are_refused():
    first, second = tasks()[:2]
    short = dataclasses.replace(second, x_train=second.x_train[:-1], y_train=second.y_train[:-1])
    try:
        fit_predict_many([first, short], REGRESSOR)
    except ValueError as error:
        assert "equal train steps" in str(error)
    else:
        raise AssertionError("fits with different train sizes were trained together")


def test_a_memo_reads_a_fit_made_before_bit_for_bit_and_trains_only_the_rest():
    memo = FitMemo()
    first = fit_predict_many(tasks()[:2], REGRESSOR, memo)
    assert len(memo) == 2 and memo.reads == 0
    # The same two asked again beside a new one: both read, only the third trained.
    again = fit_predict_many(tasks(), REGRESSOR, memo)
    assert memo.reads == 2 and len(memo) == 3
    plain = fit_predict_many(tasks(), REGRESSOR)
    for index in range(3):
        for side in (0, 1):
            np.testing.assert_array_equal(again[index][side], plain[index][side])
    assert again[0][1] is first[0][1]  # read, not refitted
    with pytest.raises(ValueError, match="read-only"):
        again[0][1][0, 0] = 1.0  # shared by every caller: nobody writes into it
    # Any change of content is another fit: data, a seed, the regressor.
    changed = dataclasses.replace(tasks()[0], y_train=tasks()[0].y_train + 1e-9)
    fit_predict_many([changed], REGRESSOR, memo)
    fit_predict_many([dataclasses.replace(tasks()[0], init_seed=5)], REGRESSOR, memo)
    fit_predict_many(tasks()[:1], dataclasses.replace(REGRESSOR, epochs=2), memo)
    assert memo.reads == 2 and len(memo) == 6
    # A fit without extra columns is the same fit whatever its (unused) extra seed.
    fit_predict_many([dataclasses.replace(tasks()[0], extra_seed=77)], REGRESSOR, memo)
    assert memo.reads == 3
