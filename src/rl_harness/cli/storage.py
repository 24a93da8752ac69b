"""`rl-harness upload RUN_DIR` and `rl-harness download RUN_DIR|URI [--dest DIR]`
(harness/storage/: the B2 mirror of artifacts/). boto3 loads only when a command runs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rl_harness.cli.args import EXIT_FAILED, EXIT_OK, EXIT_USAGE, OneLineParser, fail, parse
from rl_harness.harness.redaction import redact_env

if TYPE_CHECKING:  # boto3 loads only when a command runs
    from rl_harness.harness.storage.config import B2Config


def _fail(prog: str, message: str, code: int = EXIT_USAGE, secrets: tuple[str, ...] = ()) -> int:
    return fail(message, prog=prog, code=code, secrets=secrets)


def _config(prog: str) -> B2Config | int:
    """The B2 config, or the exit code after one error line."""
    from rl_harness.harness.storage.config import StorageConfigError, required_b2_config

    try:
        return required_b2_config()
    except StorageConfigError as error:
        return _fail(prog, str(error))


def upload_main(argv: list[str]) -> int:
    """Mirror (or finish mirroring) a finished run's artifacts; updates its manifest."""
    from rl_harness.harness.storage.upload import RunUploadError, plan_run_upload, upload_run

    parser = OneLineParser(
        prog="rl-harness upload",
        description="Upload a run's artifacts to B2, skipping files already there "
        "with the same sha256; rewrites remote_artifacts.json and the manifest's "
        "artifacts.remote.",
    )
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="results/<run-id>/")
    args = parse(parser, argv)
    if isinstance(args, int):
        return args
    prog = parser.prog
    try:
        upload = plan_run_upload(args.run_dir)
    except RunUploadError as error:
        return _fail(prog, str(error))
    config = _config(prog)
    if isinstance(config, int):
        return config
    if upload.still_running:
        print(
            f"{prog}: warning: the manifest says the run is still running; if it is, "
            "its end will overwrite artifacts.remote",
            file=sys.stderr,
        )
    summary = upload_run(config, upload)
    if summary["status"] != "completed":
        return _fail(prog, summary["error"] or "upload failed", EXIT_FAILED, config.secrets())
    return EXIT_OK


def download_main(argv: list[str]) -> int:
    """Fetch a run's mirrored artifacts (or everything under a URI) and verify each sha256."""
    parser = OneLineParser(
        prog="rl-harness download",
        description="Download mirrored artifacts and verify their sha256. RUN_DIR "
        "(results/<run-id>/) uses its remote_artifacts.json and defaults --dest to "
        "<leaf>/artifacts/<run-id>/; an s3://bucket/prefix/ URI checks each object's "
        "sha256 metadata and defaults --dest to ./<last part of the URI>.",
    )
    parser.add_argument("target", metavar="RUN_DIR|URI")
    parser.add_argument("--dest", type=Path, metavar="DIR", help="where files land")
    args = parse(parser, argv)
    if isinstance(args, int):
        return args
    prog = parser.prog
    config = _config(prog)
    if isinstance(config, int):
        return config
    from rl_harness.harness.storage.download import (
        NothingToDownload,
        download_files,
        plan_download,
    )

    try:
        plan = plan_download(config, args.target, args.dest)
    except NothingToDownload as error:
        return _fail(prog, str(error), EXIT_FAILED)
    except (OSError, ValueError, KeyError) as error:
        return _fail(prog, f"{type(error).__name__}: {error}", secrets=config.secrets())
    except Exception as error:  # listing the bucket failed
        return _fail(prog, f"{type(error).__name__}: {error}", EXIT_FAILED, config.secrets())
    report = download_files(config, plan.wanted, plan.dest, client=plan.client)
    problems = plan.problems + report.problems
    print(
        f"[storage] {len(report.downloaded)} downloaded, {len(report.already_present)} "
        f"already present and verified, {len(problems)} problems -> {report.dest}"
    )
    if problems:
        for problem in problems:
            print(f"{prog}: {redact_env(problem, extra=config.secrets())}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
