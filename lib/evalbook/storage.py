"""The report root: a local folder or `s3://bucket/prefix`, and publishing finished runs to S3.

A run always executes into a local folder. When the report root is remote, `publish_run` then
uploads the finished run folder and, last, its report, under the same layout
(`<root>/<env>/eval-runs/<yyyy>/<mm>/<dd>/<run_id>/...` and `<run_id>.json` beside it).

Why the upload is complete or absent with nothing but `s3:PutObject`: S3 stores an object only
once the whole body of a PutObject request has arrived and matched its length and checksum (we
always send Content-MD5, and botocore adds a CRC32 unless configured off); an interrupted or
corrupted PUT leaves no object at all. So each file goes up in one PutObject request, never as a
multipart upload, and the report goes up last: it is the run's commit marker, and a reader that
sees it sees a complete run folder (S3 reads are strongly consistent after a write). Writing to
a temporary key and then copying or renaming it would need `s3:GetObject` on the temporary key
and `s3:DeleteObject` to remove it, and a multipart upload would leave parts behind on failure
that only `s3:AbortMultipartUpload` removes, so neither is used. A file above S3's single-PUT
limit of 5 GiB is refused with a StorageError before anything is sent. The writer never lists,
reads, creates or deletes anything: a missing bucket is an error, never created.

Credentials, region and endpoint come only from the standard AWS chain (AWS_ACCESS_KEY_ID,
AWS_PROFILE, ~/.aws/config, ...); botocore itself reads an S3-compatible endpoint from
AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, and retries follow AWS_MAX_ATTEMPTS/AWS_RETRY_MODE.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import mimetypes
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import botocore.exceptions
import botocore.session
import fsspec
import s3fs

from evalbook.errors import EvalbookError, UnusableInput
from evalbook.layout import RUNNING_MARKER, run_of_key

SINGLE_PUT_LIMIT = 5 * 2**30  # the largest body S3 takes in one PutObject
S3_SCHEMES = ("s3", "s3a")
# write_atomically's in-flight files: `.<name>.<random>.tmp`
TEMPORARY_FILE = re.compile(r"\..+\.tmp")  # whole names only (fullmatch)

logger = logging.getLogger(__name__)


NO_CREDENTIALS = ("no AWS credentials found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                  "AWS_PROFILE with ~/.aws/config (evalbook takes no credentials as parameters)")


class StorageError(EvalbookError, RuntimeError):
    """A report root that cannot be read or written; the message names the URL and the cause."""


class StorageReadError(UnusableInput, StorageError):
    """A file or object that cannot be read (missing, denied, unreachable). Reading never
    writes, so unlike a refused upload it leaves nothing behind."""


def is_remote(root: str | os.PathLike | None) -> bool:
    """True for a URL with a scheme (`s3://bucket/prefix`, `gs://...`), False for a local path, a
    `file://` URL (the scheme in any case) and None. The one test of it in evalbook."""
    if root is None:
        return False
    scheme, separator, _ = os.fspath(root).partition("://")
    return bool(separator) and scheme.lower() != "file"


def join(root: str | os.PathLike, *parts: str) -> str:
    """`root` followed by `parts`: joined with `/` for a URL, with os.path.join for a folder."""
    if not is_remote(root):
        return os.path.join(os.fspath(root), *parts)
    pieces = [part.strip("/") for part in parts if part.strip("/")]
    return "/".join([os.fspath(root).rstrip("/"), *pieces])


def _s3_location(url: str) -> tuple[str, str]:
    """The bucket and key of an `s3://bucket/key` URL; StorageError for anything else."""
    address = urlsplit(url)
    if address.scheme.lower() not in S3_SCHEMES:
        raise StorageError(f"{url}: only s3:// URLs are supported as a remote report root")
    key = address.path.lstrip("/")
    if not address.netloc or not key or key.endswith("/"):
        raise StorageError(f"{url}: an object URL needs a bucket and a key (s3://bucket/key)")
    return address.netloc, key


def _s3_filesystem() -> s3fs.S3FileSystem:
    """A fresh s3fs client configured by the standard AWS chain alone.

    A fresh instance (no instance cache) picks up the current credentials and endpoint. Retries
    are left to botocore's configured policy, so s3fs's own loop makes one attempt; one request
    at a time keeps a read to a single GetObject.
    """
    filesystem = s3fs.S3FileSystem(skip_instance_cache=True, max_concurrency=1)
    filesystem.retries = 1
    return filesystem


def shared_filesystem(location: str) -> tuple[Any, str]:
    """An fsspec filesystem for a folder that Ray's processes share, and the folder in its terms.

    `s3://bucket/prefix` gives an s3fs client configured by the standard AWS chain, which each
    process that unpickles it (a Ray worker) resolves again from its own environment, so no
    credential travels with it. A local path or `file://` URL gives the local filesystem and the
    absolute path.
    """
    if is_remote(location):
        address = urlsplit(location)
        if address.scheme.lower() not in S3_SCHEMES or not address.netloc:
            raise StorageError(f"{location}: a shared folder is s3://bucket/prefix or a local path")
        return s3fs.S3FileSystem(skip_instance_cache=True), f"{address.netloc}{address.path}".rstrip("/")
    return fsspec.filesystem("file"), os.path.abspath(local_path(location))


def local_path(location: str) -> str:
    """The path a local location names: itself, or the path of a `file://` URL."""
    return unquote(urlsplit(location).path) if location.lower().startswith("file://") else location


def _endpoint(filesystem: s3fs.S3FileSystem) -> str:
    try:
        return filesystem.s3.meta.endpoint_url
    except Exception:  # noqa: BLE001 - only used to word an error that is already being raised
        return "the configured S3 endpoint"


def _client_error(error: BaseException) -> botocore.exceptions.ClientError | None:
    """The S3 error response behind `error` (s3fs wraps it in an OSError), if there is one."""
    while error is not None:
        if isinstance(error, botocore.exceptions.ClientError):
            return error
        error = error.__cause__
    return None


def _error_code(error: BaseException) -> tuple[str, str] | None:
    """The S3 error code and message behind `error`, or None when S3 sent no error response."""
    response = _client_error(error)
    if response is None:
        return None
    details = response.response.get("Error", {})
    return details.get("Code", ""), details.get("Message", str(response))


def _unanswered(error: Exception, what: str, filesystem: s3fs.S3FileSystem) -> StorageError | None:
    """The StorageError for a request about `what` that S3 never answered: no credentials, no
    connection, or a failure without an S3 error response. None when S3 answered."""
    if isinstance(error, botocore.exceptions.NoCredentialsError):
        return StorageError(f"cannot {what}: {NO_CREDENTIALS}")
    if isinstance(error, botocore.exceptions.EndpointConnectionError):
        return StorageError(f"cannot {what}: could not connect to the S3 endpoint "
                            f"{_endpoint(filesystem)} ({error})")
    if _error_code(error) is None:
        return StorageError(f"cannot {what} at {_endpoint(filesystem)}: {type(error).__name__}: {error}")
    return None


def _storage_error(error: Exception, action: str, url: str,
                   filesystem: s3fs.S3FileSystem) -> StorageError:
    """A StorageError that says what went wrong with `action` ('PutObject'/'GetObject') on `url`."""
    bucket, key = _s3_location(url)
    verb = "write" if action == "PutObject" else "read"
    unanswered = _unanswered(error, f"{verb} {url}", filesystem)
    if unanswered is not None:
        return unanswered
    code, message = _error_code(error)
    if code == "NoSuchBucket":
        return StorageError(f"cannot {verb} key {key!r} in bucket {bucket!r}: the bucket does not "
                            f"exist at {_endpoint(filesystem)}; evalbook never creates buckets, so "
                            "create it or correct the URL")
    if code == "NoSuchKey":
        return StorageError(f"cannot read {url}: there is no such object")
    if code in ("AccessDenied", "AllAccessDisabled"):
        return StorageError(f"access denied to {verb} {url}: this needs s3:{action} on "
                            f"arn:aws:s3:::{bucket}/{key} ({code}: {message})")
    return StorageError(f"cannot {verb} {url} at {_endpoint(filesystem)}: {code}: {message}")


def _put(filesystem: s3fs.S3FileSystem, local: Path, url: str) -> None:
    """Send `local` to `url` in exactly one PutObject request, with its Content-MD5: afterwards
    the object is complete, or, on a StorageError, untouched. The local file is only read."""
    bucket, key = _s3_location(url)
    try:
        size = local.stat().st_size
        if size > SINGLE_PUT_LIMIT:
            raise StorageError(f"cannot upload {local} to {url}: it holds {size} bytes, and a single "
                               "S3 PUT takes at most 5 GiB; evalbook does not use multipart "
                               "uploads, whose leftover parts need s3:AbortMultipartUpload")
        body = local.read_bytes()
    except OSError as error:
        raise StorageError(f"cannot upload {local} to {url}: {error.strerror or error}") from error
    digest = base64.b64encode(hashlib.md5(body, usedforsecurity=False).digest()).decode("ascii")
    extra = {}
    content_type, _ = mimetypes.guess_type(local.name)
    if content_type is not None:
        extra["ContentType"] = content_type
    try:
        filesystem.call_s3("put_object", Bucket=bucket, Key=key, Body=body, ContentMD5=digest,
                           **extra)
    except Exception as error:  # noqa: BLE001 - every failure becomes a StorageError naming the URL
        raise _storage_error(error, "PutObject", url, filesystem) from error


def _files_to_publish(run_dir: Path) -> list[Path]:
    """Every file under `run_dir`, sorted; write_atomically's leftover temporary files are left
    out and logged, since they are never part of a finished run."""
    files, temporary = [], []
    for path in sorted(run_dir.rglob("*")):
        if path.is_file():
            (temporary if TEMPORARY_FILE.fullmatch(path.name) else files).append(path)
    for path in temporary:
        logger.warning("not publishing %s: a temporary file of an interrupted write", path)
    if temporary:
        logger.warning("skipped %d temporary file(s) under %s", len(temporary), run_dir)
    return files


def _relative_key(path: Path, local_root: Path) -> tuple[str, ...]:
    try:
        return path.resolve().relative_to(local_root.resolve()).parts
    except ValueError:
        raise StorageError(f"{path} is not under the local outputs root {local_root}") from None


def publish_run(run_dir: Path, report_path: Path | None, local_root: Path,
                remote_root: str) -> list[str]:
    """Upload a finished run folder, then its report, from `local_root` to `remote_root`.

    Every file under `run_dir` goes up, in sorted order, to `remote_root` followed by its path
    relative to `local_root`; then `report_path`, when there is one, goes up last as the run's
    commit marker. Returns the uploaded URLs in upload order. The first refused upload raises a
    StorageError and nothing after it is sent, so a run whose folder did not go up completely
    never gets its report. The local files are only read.
    """
    run_dir, local_root = Path(run_dir), Path(local_root)
    if not is_remote(remote_root):
        raise StorageError(f"{remote_root} is not a remote report root; runs are published only "
                           "to s3://bucket/prefix")
    if not run_dir.is_dir():
        raise StorageError(f"cannot publish {run_dir}: it is not a folder")
    if (run_dir / RUNNING_MARKER).exists():
        raise StorageError(f"cannot publish {run_dir}: the run is still running ({RUNNING_MARKER})")
    files = _files_to_publish(run_dir)
    if report_path is not None:
        report_path = Path(report_path)
        if not report_path.is_file():
            raise StorageError(f"cannot publish the report {report_path}: it is not a file")
        if report_path.resolve().is_relative_to(run_dir.resolve()):
            raise StorageError(f"the report {report_path} must lie beside the run folder "
                               f"{run_dir}, not inside it, to be uploaded last")
        files.append(report_path)
    targets = [(path, join(remote_root, *_relative_key(path, local_root))) for path in files]
    for _, url in targets:
        _s3_location(url)  # a malformed root is refused before anything is sent

    filesystem = _s3_filesystem()
    uploaded = []
    for path, url in targets:
        _put(filesystem, path, url)
        uploaded.append(url)
        logger.info("published %s", url)
    return uploaded


def _root_location(remote_root: str) -> tuple[str, str]:
    """The bucket and key prefix (empty, or ending in `/`) of `s3://bucket[/prefix]`."""
    address = urlsplit(remote_root)
    if address.scheme.lower() not in S3_SCHEMES or not address.netloc:
        raise StorageError(f"{remote_root}: a remote outputs root is s3://bucket/prefix")
    prefix = address.path.strip("/")
    return address.netloc, f"{prefix}/" if prefix else ""


def _has_credentials() -> bool:
    """True when the standard AWS chain yields credentials (environment, profile, role)."""
    return botocore.session.Session().get_credentials() is not None


def _runs_with_id(filesystem: s3fs.S3FileSystem, bucket: str, prefix: str, run_id: str) -> list[str]:
    """`<prefix><env>/eval-runs/<yyyy>/<mm>/<dd>/<run_id>` of every run folder or report named
    `run_id` under the prefix, on any date and in any env."""
    found, token = [], None
    while True:
        page = filesystem.call_s3("list_objects_v2", Bucket=bucket, Prefix=prefix,
                                  **({"ContinuationToken": token} if token else {}))
        runs = (run_of_key(item["Key"][len(prefix):], run_id) for item in page.get("Contents", []))
        found += [prefix + run for run in dict.fromkeys(runs) if run]
        token = page.get("NextContinuationToken")
        if found or not token:
            return found


def check_remote_root(remote_root: str, run_id: str, run_id_given: bool) -> str | None:
    """Before a run writes anything: check that `remote_root` can be used and holds no run
    `run_id`, on any date and in any env.

    It needs AWS credentials and `s3:ListBucket` on the bucket for the prefix (one ListObjectsV2
    request per 1,000 objects under it). Raises StorageError when there are no credentials, the
    bucket is missing, the endpoint is unreachable, the credentials are refused, or the run id
    exists. When listing is denied, a run id given by the user cannot be shown to be new and is
    refused; a fresh uuid4 goes ahead, and the returned note says what could not be checked.
    """
    bucket, prefix = _root_location(remote_root)
    if not _has_credentials():
        raise StorageError(f"cannot write {remote_root}: {NO_CREDENTIALS}")
    filesystem = _s3_filesystem()
    listing = f"s3://{bucket}/{prefix}"
    try:
        existing = _runs_with_id(filesystem, bucket, prefix, run_id)
    except Exception as error:  # noqa: BLE001 - every failure becomes a StorageError or a note
        code, _ = _error_code(error) or ("", "")
        if code not in ("AccessDenied", "AllAccessDisabled"):
            raise _listing_error(error, listing, filesystem) from error
        unchecked = (f"whether run {run_id} already exists under {remote_root} could not be "
                     f"checked: listing {listing} was denied (it needs s3:ListBucket on "
                     f"arn:aws:s3:::{bucket} for the prefix {prefix or '(none)'!r})")
        if run_id_given:
            raise StorageError(f"{unchecked}; run_id was given, so it is refused rather than risk a "
                               "second run with the same id. Grant s3:ListBucket, or leave run_id "
                               "null for a fresh uuid4") from error
        return f"{unchecked}; the run has a fresh uuid4, so a clash is not expected"
    if existing:
        raise StorageError(f"run {run_id} already exists at s3://{bucket}/{existing[0]}; run ids "
                           "are write-once across every date and env")
    return None


def _listing_error(error: Exception, listing: str, filesystem: s3fs.S3FileSystem) -> StorageError:
    """A StorageError saying why listing `listing` (`s3://bucket/prefix/`) failed."""
    bucket = urlsplit(listing).netloc
    unanswered = _unanswered(error, f"list {listing}", filesystem)
    if unanswered is not None:
        return unanswered
    code, message = _error_code(error)
    if code == "NoSuchBucket":
        return StorageError(f"the bucket {bucket!r} does not exist at {_endpoint(filesystem)}; "
                            "evalbook never creates buckets, so create it or correct outputs_root")
    return StorageError(f"cannot list {listing} at {_endpoint(filesystem)}: {code}: {message}")


def find_objects(remote_root: str, pattern: str) -> list[str]:
    """The s3:// URLs of the objects under `remote_root` whose keys below it match the glob
    `pattern` (`*` within one folder), by URL; StorageReadError when the root cannot be listed."""
    bucket, prefix = _root_location(remote_root)
    filesystem = _s3_filesystem()
    base = f"{bucket}/{prefix}".rstrip("/")
    try:
        found = filesystem.glob(f"{base}/{pattern}")
    except Exception as error:  # noqa: BLE001 - every failure becomes a StorageReadError naming the root
        raise StorageReadError(str(_listing_error(error, remote_root, filesystem))) from error
    return sorted(f"s3://{key}" for key in found)


def read_bytes(location: str | os.PathLike) -> bytes:
    """The whole content of a local file (a path or a file:// URL) or of the object at an
    s3:// URL, read with one GetObject request; StorageReadError naming it when it cannot be read."""
    text = os.fspath(location)
    if not is_remote(text):
        path = Path(local_path(text))
        try:
            return path.read_bytes()
        except OSError as error:
            raise StorageReadError(f"cannot read {path}: {error.strerror or error}") from error
    try:
        _s3_location(text)
    except StorageError as error:
        raise StorageReadError(str(error)) from None
    filesystem = _s3_filesystem()
    try:
        return filesystem.cat_file(text)
    except Exception as error:  # noqa: BLE001 - every failure becomes a StorageReadError naming the URL
        raise StorageReadError(str(_storage_error(error, "GetObject", text, filesystem))) from error
