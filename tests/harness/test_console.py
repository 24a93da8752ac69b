"""The console of a CLI run: no Ray start-up noise (kept under the run's artifacts instead),
progress lines with env steps/s, an ETA and a bar on a terminal, and a closing summary of
the result's headline numbers. Library output is `logging`; importing plots keeps the
matplotlib backend."""

from __future__ import annotations

import logging
import os
import pty
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from rl_harness.harness.console import Progress, configure_logging, duration_text
from rl_harness.harness.context import make_context

CLI = Path(sys.executable).parent / "rl-harness"
RECIPE = """
from ray.rllib.algorithms.ppo import PPOConfig
from rl_harness import run_algorithm

def run(context):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [8]})
    )
    result = run_algorithm(config, context, stop=3)
    return {"iterations": result.iterations, "label": "tiny", "return_last": 12.5}
"""
# What Ray printed around our lines before (issue 27), and the shape of any Ray log line.
NOISE = (
    "Token authentication",
    "Started a local Ray instance",
    "new API stack",
    "RLModule(config=",
    "gputil",
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
RAY_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\s+(INFO|WARNING|ERROR)")


def _run_on_a_terminal(leaf: Path, *args: str) -> tuple[int, str, str]:
    """The CLI with stdout on a pseudo-terminal (as in a shell), stderr on a pipe."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [str(CLI), str(leaf), "--run-id", "console", "--no-upload-artifacts", *args],
        stdout=secondary,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(primary, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(primary)
    err = proc.stderr.read()
    proc.wait(timeout=300)
    text = b"".join(chunks).decode().replace("\r\n", "\n")
    return proc.returncode, ANSI.sub("", text), err  # Ray resets the colours at exit


def test_cli_console_is_progress_and_summary_without_ray_noise(tmp_path: Path):
    leaf = tmp_path / "leaf" / "experiment.py"
    leaf.parent.mkdir()
    leaf.write_text(textwrap.dedent(RECIPE))
    code, out, err = _run_on_a_terminal(leaf)
    assert code == 0, out + err
    lines = out.strip().splitlines()
    for stream in (out, err):
        for line in stream.splitlines():
            assert not RAY_LOG_LINE.match(line), line
            assert not any(noise in line for noise in NOISE), line
    progress = [line for line in lines if " iter " in line]
    assert len(progress) == 3
    for index, line in enumerate(progress, start=1):
        assert line.startswith("[console] [") and f"iter {index}/3" in line
        assert re.search(r"\| [\d,]+ steps/s \|", line) and re.search(r"\| ETA [\d.hms]+$", line)
    assert progress[-1].startswith("[console] [" + "#" * 20 + "]")  # the bar, full at the end
    assert re.fullmatch(r"\[console\] completed in \S+: .*results/console", lines[-2])
    assert lines[-1] == "[console] result: iterations 3 | return_last 12.5"
    # Ray's notices are kept with the run, beside Ray's own session logs
    kept = leaf.parent / "artifacts" / "console" / "ray_logs"
    driver_log = (kept / "driver.log").read_text()
    assert "Started a local Ray instance" in driver_log and "new API stack" in driver_log
    assert (kept / "session" / "raylet.out").is_file()


def test_progress_line_parts():
    progress = Progress("run", iteration_target=4, bar=False)
    row = {
        "training_iteration": 1,
        "num_env_steps_sampled_lifetime": 500,
        "env_runners/num_env_steps_sampled": 500,
        "time_this_iter_s": 2.0,
    }
    line = progress.line(row)
    assert line == "[run] iter 1/4 | steps 500 | 250 steps/s | 2.0s | ETA 6.0s"
    by_steps = Progress("run", steps_target=2000, bar=True).line(row)
    assert by_steps.startswith("[run] [#####...............] iter 1 |")
    assert by_steps.endswith("| ETA 6.0s")  # 1500 steps to go at 250 steps/s
    assert [duration_text(s) for s in (0.44, 42, 185, 3725)] == ["0.4s", "42s", "3m05s", "1h02m"]


def test_library_progress_goes_through_logging(ray_session, tmp_path, caplog, monkeypatch):
    from ray.rllib.algorithms.ppo import PPOConfig

    from rl_harness import run_algorithm

    library = logging.getLogger("rl_harness")
    monkeypatch.setattr(library, "handlers", [])
    monkeypatch.setattr(library, "propagate", True)
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [8]})
    )
    with caplog.at_level(logging.INFO, logger="rl_harness"):
        run_algorithm(config, make_context(tmp_path, run_id="nb"), stop=1)
    (record,) = [r for r in caplog.records if "iter 1/1" in r.getMessage()]
    assert record.name == "rl_harness.harness.runners" and record.levelno == logging.INFO
    assert "steps/s" in record.getMessage()


def test_configure_logging_shows_info_on_stdout_warnings_on_stderr(capsys, monkeypatch):
    library = logging.getLogger("rl_harness")
    monkeypatch.setattr(library, "handlers", [])
    monkeypatch.setattr(library, "propagate", True)
    configure_logging()
    configure_logging()  # again: one handler, not two
    logging.getLogger("rl_harness.harness.runners").info("progress")
    logging.getLogger("rl_harness.harness.mirrors").warning("careful")
    logging.getLogger("rl_harness.harness.runners").debug("hidden")
    printed = capsys.readouterr()
    assert (printed.out, printed.err) == ("progress\n", "careful\n")
    library.setLevel(logging.WARNING)  # how a notebook silences progress
    logging.getLogger("rl_harness.harness.runners").info("progress")
    assert capsys.readouterr().out == ""


def test_importing_plots_keeps_the_matplotlib_backend():
    code = (
        "import matplotlib\n"
        "matplotlib.use('pdf')\n"
        "import rl_harness.analysis.plots\n"
        "import rl_harness.analysis.comparison\n"
        "print(matplotlib.get_backend())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "pdf"


def test_quiet_ray_filters_notices_keeps_them_and_undoes_itself():
    import io
    import warnings

    import ray  # noqa: F401  (Ray's loggers and their console handlers exist once imported)

    from rl_harness.harness import console

    rllib = logging.getLogger("ray.rllib.algorithms.algorithm_config")
    shown = io.StringIO()  # a console handler of Ray's own kind, on `ray.rllib`
    handler = logging.StreamHandler(shown)
    logging.getLogger("ray.rllib").addHandler(handler)
    filters_before = list(warnings.filters)
    try:
        console.quiet_ray(True)
        assert console.ray_log_to_driver() is False
        assert os.environ["RAY_AIR_NEW_OUTPUT"] == "0"  # Tune's boxed reporter off
        rllib.warning("You are running PPO on the new API stack! This is the new default ...")
        rllib.warning("a real problem")
        kept = console.release_quiet_ray()
        assert shown.getvalue() == "a real problem\n"
        assert [line.split(" -- ")[-1] for line in kept] == [
            "You are running PPO on the new API stack! This is the new default ...",
            "a real problem",
        ]
        assert console.ray_log_to_driver() is True and warnings.filters == filters_before
        rllib.warning("You are running PPO on the new API stack! again")
        assert "again" in shown.getvalue()  # unfiltered after the run
    finally:
        console.release_quiet_ray()
        logging.getLogger("ray.rllib").removeHandler(handler)
