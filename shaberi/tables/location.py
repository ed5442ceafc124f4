"""Where a results root lives: a local folder (a ``Path``) or an object-storage prefix (``s3://bucket/prefix``,
``gs://…``: a ``UPath`` over fsspec, from the ``cluster`` extra).

Both have the same layout and are read the same way; what differs is how a file becomes visible whole. On a
disk: a temp name, fsync, then rename. On object storage there is no rename, and none is needed: a PUT is
atomic, readers see the old object or the new one, never half of it. Credentials and endpoint come from the
environment as boto3/s3fs read them (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL`` …); nothing here stores them.

DuckDB reads a remote root through the same fsspec filesystem (``attach``): DuckDB's own httpfs extension is
downloaded from extensions.duckdb.org at run time, which many clusters (and CI) cannot reach. Every path DuckDB is
given to read passes through ``glob_literal``, so that a root named ``res [1]`` or ``a*b`` is that folder only.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import functools
import hashlib
import logging
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeAlias

from ..errors import UsageError

if TYPE_CHECKING:  # duckdb costs ~45 ms to import: not for a command that only parses its options
    import duckdb

__all__ = ["READER_SCHEME", "REMOTE_SCHEMES", "Root", "as_root", "attach", "glob_in", "glob_literal", "is_remote",
           "local_state", "move_whole", "open_for_read", "publish", "published", "put_new", "reader_name", "remove",
           "unglob", "write_bytes", "write_whole"]

REMOTE_SCHEMES = ("s3://", "gs://", "gcs://")
# The storage clients log each retry with its traceback on stderr; the error is said once, in one line.
for _name in ("gcsfs", "s3fs", "aiobotocore", "botocore"):
    logging.getLogger(_name).addHandler(logging.NullHandler())
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")  # two letters at least: C:\ is a Windows drive
Root: TypeAlias = Any  # a pathlib.Path, or a upath.UPath (same methods: /, exists, open; glob_in, remove for these)


def as_root(value: str | os.PathLike[str] | Root) -> Root:
    """A results root from what a user typed: ``s3://…`` / ``gs://…`` become a UPath, anything else a Path."""
    if not isinstance(value, str | os.PathLike) or isinstance(value, Path):
        return value
    text = os.fspath(value)
    if not text.strip():
        raise UsageError("--results-dir is empty: give a folder (e.g. results) or s3://bucket/prefix")
    if not text.startswith(REMOTE_SCHEMES):
        if _SCHEME.match(text):  # ftp://x/y would become the local folders ftp:/x/y
            raise UsageError(f"--results-dir {text}: not a folder, and {text.split(':', 1)[0]}:// is no storage "
                             "Shaberi writes to; give a folder, or s3://bucket/prefix (gs:// too)")
        return Path(text)
    if not text.split("://", 1)[1].split("/")[0]:  # s3:// alone would become the local folder s3:
        raise UsageError(f"--results-dir {text}: name the bucket (and a prefix): {text.split('://')[0]}://bucket/prefix")
    _reachable(_endpoint(text))  # before the client: gcsfs looks for credentials over the network too
    try:
        from upath import UPath
        # No listings cache: another process (a sweep's worker) adds parts while this one reads. The endpoint
        # named, so that a filesystem cached for another endpoint is not reused (boto reads it once).
        options: dict[str, Any] = {"use_listings_cache": False}
        if text.startswith("s3://") and os.environ.get("AWS_ENDPOINT_URL"):
            options["endpoint_url"] = os.environ["AWS_ENDPOINT_URL"]
        path = UPath(text.rstrip("/"), **options)
        path.fs  # noqa: B018  # imports the filesystem's package (s3fs, gcsfs): missing -> ImportError now
    except ImportError as exc:
        raise UsageError(f"--results-dir {text}: object storage needs the cluster extra "
                         f"(pip install 'shaberi[cluster]'): {exc}") from None
    return path


def _endpoint(text: str) -> str:
    """The URL a remote root's client connects to (an emulator's or a test server's, when one is named)."""
    if text.startswith("s3://"):
        return os.environ.get("AWS_ENDPOINT_URL") or "https://s3.amazonaws.com"
    return os.environ.get("STORAGE_EMULATOR_HOST") or "https://storage.googleapis.com"


@functools.cache
def _reachable(url: str) -> None:
    """One TCP connection to the storage's endpoint, once per process: offline, the storage clients retry for
    a minute (gcsfs: 6 tries, 1 to 16 s apart) before they fail; here it is one line within seconds. Through a
    proxy (``HTTPS_PROXY``) the client, not this, knows the way."""
    import socket
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(url if "://" in url else f"http://{url}")
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    loopback = host in ("localhost", "::1") or host.startswith("127.")  # no proxy stands in the way there
    if not loopback and urllib.request.getproxies().get(parts.scheme) and not urllib.request.proxy_bypass(host):
        return
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as exc:
        from ..errors import ObjectStorageError

        raise ObjectStorageError(f"object storage: cannot reach {host}:{port} ({exc.strerror or exc}); "
                                 "check the network (or AWS_ENDPOINT_URL, STORAGE_EMULATOR_HOST)") from None


def is_remote(root: Root) -> bool:
    return not isinstance(root, Path)


def attach(con: duckdb.DuckDBPyConnection, root: Root, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Let ``con`` read the files under ``root`` (a remote root's filesystem registered once per connection).
    ``read_only``: through a filesystem that opens files for reading and nothing else, a local root's too (named
    ``reader_name``'s way): DuckDB's own local filesystem can then be switched off, so that no statement, however
    it got past the check of statements, can write a file (``shaberi sql``)."""
    if is_remote(root):
        fs = root.fs
        protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
        if not protocols & set(con.list_filesystems()):
            con.register_filesystem(_literal_globbing(type(fs), read_only)(**fs.storage_options))
    # a local root's parts, and for any root the views' entries on this machine (memo.py)
    if read_only and READER_SCHEME.removesuffix("://") not in con.list_filesystems():
        con.register_filesystem(_literal_globbing(_local_reader(), True)())
    return con


READER_SCHEME = "shaberi-read://"  # a local root's files, as a read-only connection's views name them


def reader_name(path: Root, read_only: bool) -> str:
    """``path`` as DuckDB's readers must be given it (``glob_literal``); a local one, for a read-only connection,
    through the read-only filesystem ``attach`` registered."""
    if read_only and not is_remote(path):
        return READER_SCHEME + glob_literal(os.path.abspath(path))
    return glob_literal(path)


_GLOB = re.compile(r"[\[*?]")
_ESCAPED = re.compile(r"\[([\[*?])\]")


class _LiteralGlob:
    """A remote root's filesystem as DuckDB is given it (DuckDB globs every path it reads). fsspec lists the whole
    tree under the folder above a name ``glob_literal`` escaped, once for every part; here the folders before the
    first real pattern are taken as they are."""

    def glob(self, path: str, **kwargs: Any) -> Any:
        if kwargs or "**" in path or not _ESCAPED.search(path):
            return super().glob(path, **kwargs)  # type: ignore[misc]
        names = self._strip_protocol(path).split("/")  # type: ignore[attr-defined]
        first = next((i for i, n in enumerate(names) if _GLOB.search(_ESCAPED.sub("", n))), len(names))
        literal = "/".join(map(unglob, names[:first]))
        if first == len(names):
            return [literal] if self.exists(literal) else []  # type: ignore[attr-defined]
        return [literal + "/" + "/".join(f) for f in _find(self, literal, names[first:])]


class _ReadOnly:
    """A filesystem that reads: every way fsspec (and DuckDB through it) writes, moves or deletes raises."""

    def open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        _reading(path, mode)
        return super().open(path, mode, *args, **kwargs)  # type: ignore[misc]

    def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        _reading(path, mode)
        return super()._open(path, mode, *args, **kwargs)  # type: ignore[misc]


def _reading(path: str, mode: str) -> None:
    if mode != "rb":
        raise PermissionError(f"{path}: this connection only reads")


def _refused(name: str) -> Callable[..., Any]:
    def refused(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise PermissionError(f"{name}: this connection only reads")
    return refused


for _write in ("_rm", "cp_file", "copy", "makedir", "makedirs", "mkdir", "move", "mv", "pipe", "pipe_file", "put",
               "put_file", "rename", "rm", "rm_file", "rmdir", "touch", "write_bytes", "write_text"):
    setattr(_ReadOnly, _write, _refused(_write))


@functools.cache
def _local_reader() -> type:
    from fsspec.implementations.local import LocalFileSystem  # type: ignore[import-untyped]  # only readers need it

    class LocalReader(LocalFileSystem):  # type: ignore[misc]
        """A local root's files under ``READER_SCHEME`` (DuckDB's own local filesystem switched off)."""

        protocol = (READER_SCHEME.removesuffix("://"),)

        @classmethod
        def _strip_protocol(cls, path: Any) -> Any:
            text = str(path)
            return super()._strip_protocol(text.removeprefix(READER_SCHEME))

    return LocalReader


class _OneReadAtATime:
    """A filesystem whose files DuckDB's threads may read at once. DuckDB reads a Python file as ``seek`` then
    ``read``, two Python calls between which another of its threads may seek the same file: a part's footer then
    reads as garbage (``TProtocolException``), 16 queries in 30 at 4 threads under load. Each thread keeps its
    own position here, and a read seeks and reads under the file's lock."""

    def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        opened = super()._open(path, mode, *args, **kwargs)  # type: ignore[misc]
        return _Positional(opened) if mode == "rb" else opened


class _Positional:
    def __init__(self, file: Any) -> None:
        self._file, self._lock = file, threading.Lock()
        self._at: dict[int, int] = {}  # position by OS thread
        self._thread = threading.get_ident

    def seek(self, offset: int, whence: int = 0) -> int:
        here = self._at.get(self._thread(), 0)
        if whence == 2:
            with self._lock:
                end = self._file.seek(0, 2)
        self._at[self._thread()] = offset + (0 if whence == 0 else here if whence == 1 else end)
        return self._at[self._thread()]

    def tell(self) -> int:
        return int(self._at.get(self._thread(), 0))

    def read(self, size: int = -1) -> bytes:
        at = self._at.get(self._thread(), 0)
        with self._lock:
            self._file.seek(at)
            data = self._file.read(size)
        self._at[self._thread()] = at + len(data)
        return bytes(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)

    def __enter__(self) -> _Positional:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()


_CLASSES: dict[tuple[type, bool], type] = {}


def _literal_globbing(fs_class: type, read_only: bool = False) -> type:
    if (fs_class, read_only) not in _CLASSES:
        bases = (_ReadOnly, _OneReadAtATime, _LiteralGlob, fs_class) if read_only else (
            _OneReadAtATime, _LiteralGlob, fs_class)
        prefix = "ReadOnlyLiteral" if read_only else "Literal"
        _CLASSES[fs_class, read_only] = type(f"{prefix}{fs_class.__name__}", bases, {})
    return _CLASSES[fs_class, read_only]


def _find(fs: Any, folder: str, names: list[str]) -> list[list[str]]:
    """The files under ``folder`` (taken as it is) whose path below it matches ``names``, one pattern per level. The
    first name's stem filters the listing on the server (``run_id=v1*``: only those runs' folders), as fsspec's glob
    has s3fs and gcsfs do."""
    prefix, stem = folder.rstrip("/") + "/", _GLOB.split(names[0])[0]
    keys = fs.find(prefix, maxdepth=len(names), **({"prefix": stem} if stem else {}))
    if not keys:  # s3fs's find says nothing for a bucket it may not read: ask in a way that says why
        with contextlib.suppress(FileNotFoundError):
            fs.ls(prefix, detail=False)
    found = (key[len(prefix):].split("/") for key in keys)
    return [f for f in found if len(f) == len(names) and all(map(fnmatch.fnmatchcase, f, names))]


def glob_literal(path: object) -> str:
    """``path`` as DuckDB's readers must be given it to read that path only. DuckDB globs every path it reads (a
    list's entries too), and reads the literal path only when the pattern matches nothing: ``res [1]/…`` would read
    ``res 1/…`` when there is one, ``a*b/…`` also ``aXb/…``, and a pattern under ``res [1]`` matches nothing at all.
    ``[``, ``*`` and ``?`` become one-character classes, its only escape. An ordinary path comes back as it is (and
    is read without a listing); an escaped one costs a listing of the folder above its first escaped name."""
    return _GLOB.sub(lambda m: f"[{m[0]}]", str(path))


def unglob(name: str) -> str:
    """What ``glob_literal`` was given, from what it made (a DuckDB error names a part as DuckDB was given it)."""
    return _ESCAPED.sub(r"\1", name)


def _scan(folder: Path, names: list[str]) -> list[Path]:
    """``folder.glob`` of a pattern of plain names, one per level, with ``os.scandir`` (pathlib's glob took a
    tenth of a second per table on a lake of hundreds of runs)."""
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = [e for e in entries if fnmatch.fnmatchcase(e.name, names[0])]
    if len(names) == 1:
        return [folder / e.name for e in found if e.is_file()]
    return [p for e in found if e.is_dir() for p in _scan(folder / e.name, names[1:])]


def glob_in(folder: Root, pattern: str) -> list[Root]:
    """``folder.glob(pattern)`` with ``folder`` itself taken literally. pathlib matches the pattern alone, but a UPath
    hands fsspec its whole path as one pattern, which ``[1]`` in the root's name makes match nothing: on object
    storage, the files under ``folder`` to the pattern's depth, matched name by name."""
    if not is_remote(folder):
        return _scan(folder, pattern.split("/"))
    return [folder.joinpath(*f) for f in _find(folder.fs, folder.path, pattern.split("/"))]


def remove(path: Root) -> None:
    """Delete the file ``path`` if it is there. A UPath's ``unlink`` hands fsspec the path as a pattern (``fs.rm``):
    ``[1]`` in the root's name would fail, ``a*`` delete the same file under every root it matches."""
    if not is_remote(path):
        path.unlink(missing_ok=True)
        return
    with contextlib.suppress(FileNotFoundError):
        path.fs.rm_file(path.path)


def local_state(root: Root) -> Path:
    """Where this machine keeps what must never leave it before it is stored whole: the root itself on a disk,
    ``$SHABERI_STATE_DIR`` (default ``~/.cache/shaberi``) ``/roots/<hash of the root>`` for a remote one, so
    a worker restarted on the same machine finds its journal."""
    if not is_remote(root):
        return Path(root)
    base = Path(os.environ.get("SHABERI_STATE_DIR") or Path.home() / ".cache" / "shaberi")
    return base / "roots" / hashlib.sha256(str(root).encode()).hexdigest()[:16]


@contextlib.contextmanager
def write_whole(final: Root) -> Iterator[str | IO[bytes]]:
    """A target to write ``final`` through, visible only once whole: a temp path (fsync, rename on exit) on a
    disk, an open object (one PUT on exit) on object storage. Nothing is left under ``final`` on an error."""
    if is_remote(final):
        fh = final.open("wb")
        try:
            yield fh
        except BaseException:
            fh.discard()  # an upload under way is aborted, and closing must not store what was written so far
            fh.closed = True  # (fsspec's close would: its ``__exit__`` commits whatever the error)
            raise
        fh.close()
        return
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.tmp")
    try:
        yield str(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def move_whole(staged: Path, final: Root) -> None:
    """``staged``, a whole local file, made ``final`` (and gone from where it was): renamed on a disk (the same
    one: ``Store.staging``), uploaded in one PUT to object storage."""
    if not is_remote(final):
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(staged, final)
            return
        except OSError as exc:
            if exc.errno != errno.EXDEV:  # else tables/ is another disk (a link): copied whole, below
                raise
    with write_whole(final) as target, open(staged, "rb") as source:
        if isinstance(target, str):
            with open(target, "wb") as copy:
                shutil.copyfileobj(source, copy)
        else:
            shutil.copyfileobj(source, target)
    staged.unlink()


def write_bytes(final: Root, data: bytes) -> None:
    """``final`` holding ``data``, visible only once whole (``write_whole``)."""
    with write_whole(final) as target:
        if isinstance(target, str):
            Path(target).write_bytes(data)
        else:
            target.write(data)


def publish(final: Root, write: Callable[[Path], object]) -> None:
    """Write ``final`` whole through a local file: ``write(path)`` fills a temp file (DuckDB's COPY needs a path),
    which is renamed (disk) or uploaded in one PUT (object storage)."""
    with published(final) as tmp:
        write(tmp)


@contextlib.contextmanager
def published(final: Root) -> Iterator[Path]:
    """``publish`` for a writer that fills the local temp file over time (a stream of records)."""
    if not is_remote(final):
        with write_whole(final) as tmp:
            yield Path(str(tmp))
        return
    import tempfile

    with tempfile.TemporaryDirectory(prefix="shaberi-") as folder:
        tmp = Path(folder) / final.name
        yield tmp
        final.fs.put_file(str(tmp), final.path)


def put_new(path: Root, data: bytes) -> bool:
    """Create ``path`` holding ``data`` only if nothing is there; False if something is. On object storage a
    conditional PUT (If-None-Match: *), on a disk O_EXCL: either way one of two racing writers wins."""
    if is_remote(path):
        try:
            path.fs.pipe_file(path.path, data, mode="create")
        except FileExistsError:
            return False
        return True
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return True


def open_for_read(path: Root) -> tuple[str, Any]:
    """(path, filesystem) for pyarrow: a local path and None, or the object's key and its fsspec filesystem."""
    return (path.path, path.fs) if is_remote(path) else (str(path), None)
