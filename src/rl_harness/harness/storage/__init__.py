"""Optional Backblaze B2 mirror of a run's artifacts/ (S3 API, boto3), hashes in results/."""

from rl_harness.harness.storage.client import make_s3_client
from rl_harness.harness.storage.config import (
    B2Config,
    StorageConfigError,
    load_b2_config,
    resolve_upload_config,
)
from rl_harness.harness.storage.download import DownloadReport, download_files
from rl_harness.harness.storage.layout import INDEX_FILE
from rl_harness.harness.storage.upload import mirror_run_artifacts

__all__ = [
    "INDEX_FILE",
    "B2Config",
    "DownloadReport",
    "StorageConfigError",
    "download_files",
    "load_b2_config",
    "make_s3_client",
    "mirror_run_artifacts",
    "resolve_upload_config",
]
