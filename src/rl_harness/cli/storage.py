"""`rl-harness upload RUN_DIR` and `rl-harness download RUN_DIR|URI [--dest DIR]`
(harness/storage/: the B2 mirror of artifacts/). boto3 loads only when a command runs."""

from __future__ import annotations

import sys
from pathlib import Path

from rl_harness.cli.args import EXIT_FAILED, EXIT_OK, EXIT_USAGE, OneLineParser, fail, parse
from rl_harness.harness.layout import MANIFEST_NAME, conventional_artifacts_dir
from rl_harness.harness.manifest import manifest_path, read_manifest, write_manifest
from rl_harness.harness.redaction import redact_env

_NOT_CONFIGURED = (
    "B2 is not configured: set B2_BUCKET, B2_ENDPOINT, B2_APPLICATION_KEY_ID and "
    "B2_APPLICATION_KEY (or name an env file in {env_file}); see docs/artifact_storage.md"
)


def _fail(prog: str, message: str, code: int = EXIT_USAGE, secrets: tuple[str, ...] = ()) -> int:
    return fail(message, prog=prog, code=code, secrets=secrets)


def _config(prog: str):
    """The B2 config, or the exit code after one error line."""
    from rl_harness.harness.storage.config import (
        ENV_FILE_VAR,
        StorageConfigError,
        load_b2_config,
    )

    try:
        config = load_b2_config()
    except StorageConfigError as error:
        return _fail(prog, str(error))
    if config is None:
        return _fail(prog, _NOT_CONFIGURED.format(env_file=ENV_FILE_VAR))
    return config


def upload_main(argv: list[str]) -> int:
    """Mirror (or finish mirroring) a finished run's artifacts; updates its manifest."""
    from rl_harness.harness.storage.upload import mirror_run_artifacts

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
    prog, run_dir = parser.prog, args.run_dir.expanduser().resolve()
    manifest_file = manifest_path(run_dir)
    if not manifest_file.is_file():
        return _fail(prog, f"{run_dir} holds no {MANIFEST_NAME}; pass results/<run-id>/")
    manifest = read_manifest(run_dir)
    try:
        run_id = manifest["run_id"]
        relative_dir = manifest["experiment"]["relative_dir"]
        local = manifest["artifacts"]["local"]
    except (KeyError, TypeError) as error:
        return _fail(prog, f"{manifest_file} lacks {error}")
    config = _config(prog)
    if isinstance(config, int):
        return config
    if manifest.get("status") == "running":
        print(
            f"{prog}: warning: the manifest says the run is still running; if it is, "
            "its end will overwrite artifacts.remote",
            file=sys.stderr,
        )
    artifacts_dir = Path(local) if local else None
    if artifacts_dir is None or not artifacts_dir.is_dir():  # e.g. copied from another host
        artifacts_dir = conventional_artifacts_dir(run_dir.parent / run_id)
    summary = mirror_run_artifacts(
        config,
        artifacts_dir=artifacts_dir,
        results_dir=run_dir,
        remote_run_path=f"{relative_dir}/{run_id}",
    )
    manifest = read_manifest(run_dir)  # fresh, in case it changed while we uploaded
    manifest.setdefault("artifacts", {})["remote"] = summary
    write_manifest(run_dir, manifest, secrets=config.secrets())
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
        download_files,
        wanted_from_index,
        wanted_from_uri,
    )

    problems: list[str] = []
    client = None
    try:
        if args.target.startswith("s3://"):
            from rl_harness.harness.storage.client import make_s3_client

            client = make_s3_client(config)
            wanted = wanted_from_uri(client, args.target)
            if not wanted:
                return _fail(prog, f"nothing found under {args.target}", EXIT_FAILED)
            dest = args.dest or Path(args.target.rstrip("/").rsplit("/", 1)[-1])
        else:
            run_dir = Path(args.target).expanduser().resolve()
            wanted, problems = wanted_from_index(run_dir)
            dest = args.dest or conventional_artifacts_dir(run_dir)
    except (OSError, ValueError, KeyError) as error:
        return _fail(prog, f"{type(error).__name__}: {error}", secrets=config.secrets())
    except Exception as error:  # listing the bucket failed
        return _fail(prog, f"{type(error).__name__}: {error}", EXIT_FAILED, config.secrets())
    report = download_files(config, wanted, dest, client=client)
    problems += report.problems
    print(
        f"[storage] {len(report.downloaded)} downloaded, {len(report.already_present)} "
        f"already present and verified, {len(problems)} problems -> {report.dest}"
    )
    if problems:
        for problem in problems:
            print(f"{prog}: {redact_env(problem, extra=config.secrets())}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
