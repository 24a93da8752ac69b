"""Optional Backblaze B2 mirror of a run's artifacts/ (S3 API, boto3), hashes in results/."""

from rl_harness.harness.storage.client import make_s3_client
from rl_harness.harness.storage.config import (
    B2Config,
    StorageConfigError,
    load_b2_config,
    required_b2_config,
    resolve_upload_config,
)
from rl_harness.harness.storage.download import (
    DownloadPlan,
    DownloadReport,
    NothingToDownload,
    download_files,
    plan_download,
)
from rl_harness.harness.storage.layout import INDEX_FILE
from rl_harness.harness.storage.upload import (
    RunUpload,
    RunUploadError,
    mirror_run_artifacts,
    plan_run_upload,
    upload_run,
)

__all__ = [
    "INDEX_FILE",
    "B2Config",
    "DownloadPlan",
    "DownloadReport",
    "NothingToDownload",
    "RunUpload",
    "RunUploadError",
    "StorageConfigError",
    "download_files",
    "load_b2_config",
    "make_s3_client",
    "mirror_run_artifacts",
    "plan_download",
    "plan_run_upload",
    "required_b2_config",
    "resolve_upload_config",
    "upload_run",
]
