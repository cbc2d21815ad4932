"""Writing files safely in directories other people may write to.

Every file memlab writes (a dataset's CSV and sidecar, a report, a figure
through :func:`atomic_write`) goes through this module:

- :func:`atomic_write` writes a temporary file created exclusively
  (``O_CREAT | O_EXCL | O_NOFOLLOW``, an unpredictable name) in the target's
  own directory, fsyncs it and renames it over the target. A symlink planted
  under a temporary name cannot be opened through; a symlink at the target
  itself is refused, never written through.
- :func:`open_append` opens an existing file to append to it, refusing a
  symlink (``O_NOFOLLOW``) and anything but a regular file.
- Every one of them, and the checks below, refuse a path with a symbolic
  link among its directories too (:func:`refuse_links`): ``DIR/etclink/x.csv``
  with ``etclink -> /etc`` is not written to ``/etc/x.csv``.
- :func:`check_output_file` refuses, before anything is measured, a target
  that is a directory, a FIFO, a device or a socket, or whose directory
  cannot take a new file (it probes by creating and removing a temporary
  file there).
- :func:`remove_stale_temporaries` removes the temporary files of a writer
  that was killed (SIGKILL, power loss) before its rename: only names of
  memlab's own making whose process no longer runs.
- :func:`file_name` and :func:`inside` keep names that come from scripts
  (a sweep's name) inside the output folder.

>>> import tempfile, os
>>> folder = tempfile.mkdtemp()
>>> atomic_write(os.path.join(folder, "a.txt"), "hello\\n")
>>> open(os.path.join(folder, "a.txt")).read()
'hello\\n'
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Mapping

__all__ = [
    "CACHE_DIR_ENV",
    "OutputError",
    "TEMPORARY_SUFFIX",
    "atomic_write",
    "cache_directory",
    "check_output_directory",
    "check_output_file",
    "check_output_file_in_new_directory",
    "check_readable_file",
    "file_name",
    "inside",
    "kind_of_file",
    "open_append",
    "refuse_links",
    "remove_stale_temporaries",
]

#: The environment variable that names memlab's per-machine cache folder.
CACHE_DIR_ENV = "MEMLAB_CACHE_DIR"


def cache_directory(environ: Mapping[str, str] | None = None) -> Path:
    """Where memlab keeps what it measured or built for this machine (the measured cache
    hierarchy, the matrix family's searched blocks, built user kernels): ``$MEMLAB_CACHE_DIR``,
    else ``$XDG_CACHE_HOME/memlab``, else ``~/.cache/memlab``.

    >>> str(cache_directory({"MEMLAB_CACHE_DIR": "/tmp/x"}))
    '/tmp/x'
    >>> str(cache_directory({"XDG_CACHE_HOME": "/tmp/y"}))
    '/tmp/y/memlab'
    """
    environ = os.environ if environ is None else environ
    if environ.get(CACHE_DIR_ENV):
        return Path(environ[CACHE_DIR_ENV]).expanduser()
    xdg = environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "memlab"


#: Temporary files are named ``.<target name>.<pid>.<random>.memlab-tmp``.
TEMPORARY_SUFFIX = ".memlab-tmp"
_TEMPORARY = re.compile(r"^\.(?P<target>.+)\.(?P<pid>\d+)\.[A-Za-z0-9_]+" + re.escape(TEMPORARY_SUFFIX) + "$")
#: The names older memlab versions used: ``<target>.tmp<pid>``.
_OLD_TEMPORARY = re.compile(r"^(?P<target>.+)\.tmp(?P<pid>\d+)$")


class OutputError(ValueError):
    """An output path memlab cannot or will not write: a bad argument (exit status 2)."""


def kind_of_file(mode: int) -> str:
    """What a file that is not a regular one is, in words, from its ``st_mode``.

    >>> kind_of_file(os.stat("/").st_mode)
    'a directory'
    """
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _linked_component(path: Path) -> Path | None:
    """The first component of ``path`` (as written: from ``/`` or from the working directory) that
    is a symbolic link, or None. Components past the first missing one cannot be links."""
    current = Path(path.anchor)
    for part in path.parts[1:] if path.anchor else path.parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except OSError:
            return None
        if stat.S_ISLNK(mode):
            return current
    return None


def refuse_links(path: str | os.PathLike, what: str = "output") -> Path:
    """Return ``path`` if none of its components is a symbolic link, else :class:`OutputError`.

    A link among the directories would send the file elsewhere (``--out
    DIR/etclink/x.csv`` with ``etclink -> /etc`` wrote ``/etc/x.csv`` as root),
    as would a link at the file itself: memlab writes only through real
    directories, so the path given is the path written.

    >>> import tempfile
    >>> top = tempfile.mkdtemp()
    >>> os.symlink("/etc", os.path.join(top, "etclink"))
    >>> refuse_links(os.path.join(top, "etclink", "x.csv"), "--out")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    memlab.files.OutputError: --out /.../etclink/x.csv: /.../etclink is a symbolic link (to /etc); ...
    """
    path = Path(path)
    link = _linked_component(path)
    if link is None:
        return path
    try:
        points_to = os.readlink(link)
    except OSError:
        points_to = "?"
    text = os.fspath(path)
    where = text if link == path else f"{text}: {os.fspath(link)}"
    raise OutputError(f"{what} {where} is a symbolic link (to {points_to}); memlab does not write through "
                      f"links (give the real path: {os.path.realpath(text)})")


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def _probe(directory: Path, what: str, text: str) -> None:
    """Create and remove a temporary file in ``directory``; OutputError when it cannot be."""
    try:
        fd, probe = tempfile.mkstemp(prefix=f".probe.{os.getpid()}.", suffix=TEMPORARY_SUFFIX, dir=directory)
    except OSError as error:
        raise OutputError(f"{what} {text} cannot be written: its directory {os.fspath(directory) or '.'} "
                          f"takes no new file ({error.strerror or error})") from None
    os.close(fd)
    os.unlink(probe)


def check_output_file(path: str | os.PathLike, what: str = "output") -> Path:
    """Return ``path`` if a file may be written there, else :class:`OutputError` saying why.

    Refused: an existing directory, FIFO, device or socket; a symbolic link
    (memlab never writes through one: in a directory others may write to, it
    could point anywhere); a missing or non-directory parent; a directory in
    which no file can be created (read-only, permissions, ``/proc``), which
    is probed by creating and removing a temporary file.

    >>> check_output_file("/")
    Traceback (most recent call last):
    ...
    memlab.files.OutputError: output / is a directory, not a file memlab can write
    """
    path = Path(path)
    text = os.fspath(path)
    if not text or "\x00" in text:
        raise OutputError(f"{what} {text!r} is not a file name")
    refuse_links(path, what)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        raise OutputError(f"{what} {text} cannot be written: {error.strerror or error}") from None
    if mode is not None and stat.S_ISLNK(mode):
        raise OutputError(f"{what} {text} is a symbolic link; memlab does not write through links "
                          "(give the file's own path)")
    if mode is not None and not stat.S_ISREG(mode):
        raise OutputError(f"{what} {text} is {kind_of_file(mode)}, not a file memlab can write")
    parent = path.parent
    if not parent.is_dir():
        reason = "does not exist" if not parent.exists() else "is not a directory"
        raise OutputError(f"{what} {text} cannot be written: its directory {parent} {reason}")
    _probe(parent, what, text)
    return path


def check_output_directory(path: str | os.PathLike, what: str = "--out", create: bool = True) -> Path:
    """Return ``path`` as a directory memlab may write files into (created if missing and ``create``).

    :class:`OutputError` when it is an existing file, FIFO or device, when
    it cannot be created, or when no file can be created in it.

    >>> check_output_directory("/etc/passwd")
    Traceback (most recent call last):
    ...
    memlab.files.OutputError: --out /etc/passwd is a file, not a directory
    """
    path = Path(path)
    text = os.fspath(path)
    if not text or "\x00" in text:
        raise OutputError(f"{what} {text!r} is not a directory name")
    refuse_links(path, what)
    if path.exists() and not path.is_dir():
        mode = os.stat(path).st_mode
        kind = "a file" if stat.S_ISREG(mode) else kind_of_file(mode)
        raise OutputError(f"{what} {text} is {kind}, not a directory")
    if not path.exists():
        if not create:
            raise OutputError(f"{what} {text} does not exist")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise OutputError(f"{what} {text} cannot be created: {error.strerror or error}") from None
    _probe(path, what, text)
    return path


def check_output_file_in_new_directory(path: str | os.PathLike, what: str = "output",
                                       directory_what: str | None = None) -> Path:
    """:func:`check_output_file` after :func:`check_output_directory` has made the file's directory
    (named ``directory_what`` in its errors, ``what`` when not given): an output may name a folder
    that does not exist yet.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as top:
    ...     check_output_file_in_new_directory(Path(top) / "new" / "r.csv").parent.is_dir()
    True
    """
    path = Path(path)
    if path.parent != Path(""):
        check_output_directory(path.parent, directory_what or what)
    return check_output_file(path, what)


def check_readable_file(path: str | os.PathLike, what: str = "input") -> Path:
    """Return ``path`` if it is a regular file (or a link to one), else ValueError.

    A FIFO or a device would block or never end; a directory is a mistake.
    A missing file is FileNotFoundError (the caller words it).
    """
    path = Path(path)
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise ValueError(f"{what} {os.fspath(path)} is {kind_of_file(mode)}, not a file memlab can read")
    return path


def atomic_write(path: str | os.PathLike, data: str | bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` by ``data`` atomically: a reader sees the old file or the new one, whole.

    The temporary file is created exclusively with an unpredictable name in
    the target's directory (no symlink followed), written, fsynced, given the
    target's permissions (or ``0o666`` less the umask, or ``mode``) and
    renamed over the target; the directory is fsynced after the rename. An
    existing directory, FIFO, device or symbolic link at ``path`` is
    :class:`OutputError` (a link is never written through, nor replaced).

    >>> import tempfile, os
    >>> atomic_write(os.path.join(tempfile.mkdtemp(), "b.bin"), b"\\x00\\x01")
    """
    path = refuse_links(path, "cannot write")
    try:
        existing = os.lstat(path)
    except FileNotFoundError:
        existing = None
    if existing is not None and stat.S_ISLNK(existing.st_mode):
        raise OutputError(f"{os.fspath(path)} is a symbolic link; memlab does not write through links")
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        raise OutputError(f"{os.fspath(path)} is {kind_of_file(existing.st_mode)}, not a file memlab can write")
    if mode is None:
        mode = stat.S_IMODE(existing.st_mode) if existing is not None else 0o666 & ~_umask()
    directory = path.parent
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:64]}.{os.getpid()}.", suffix=TEMPORARY_SUFFIX,
                               dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_directory(directory)


def open_append(path: str | os.PathLike):
    """Open an existing regular file to append text to it (UTF-8, no newline translation).

    ``O_NOFOLLOW``: a symbolic link at ``path`` is :class:`OutputError`, as is
    a FIFO or device (checked on the opened file, so no swap in between).
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    refuse_links(path, "cannot append to")
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise OutputError(f"{os.fspath(path)} is a symbolic link; memlab does not write through links") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise OutputError(f"{os.fspath(path)} is {kind_of_file(mode)}, not a file memlab can write")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "a", encoding="utf-8", newline="")


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


def remove_stale_temporaries(path: str | os.PathLike) -> list[str]:
    """Remove the temporary files a killed memlab left beside ``path``; return their names.

    Only names of memlab's own making for this target
    (``.<name>.<pid>.<random>.memlab-tmp``, and ``<name>.tmp<pid>`` of older
    versions) whose process is no longer running, and only regular files or
    symlinks (a symlink is removed, never followed).

    >>> remove_stale_temporaries("/tmp/no-such-dataset.csv")
    []
    """
    path = Path(path)
    directory = path.parent
    removed = []
    try:
        names = os.listdir(directory if os.fspath(directory) else ".")
    except OSError:
        return removed
    for name in names:
        match = _TEMPORARY.match(name) or _OLD_TEMPORARY.match(name)
        if match is None or match.group("target") not in (path.name, path.name[:64]):
            continue
        if _running(int(match.group("pid"))):
            continue
        candidate = directory / name
        try:
            mode = os.lstat(candidate).st_mode
            if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
                os.unlink(candidate)
                removed.append(name)
        except OSError:
            continue
    return removed


def file_name(name: str, what: str = "name") -> str:
    """Return ``name`` if it is one plain file name (no directory, not hidden), else ValueError.

    >>> file_name("chase-fig3_10.csv")
    'chase-fig3_10.csv'
    >>> file_name("x/../../escaped/pwn.csv")
    Traceback (most recent call last):
    ...
    ValueError: name='x/../../escaped/pwn.csv' must be a plain file name: no '/', no NUL, not '.' or '..', not starting with '.'
    """
    if (not isinstance(name, str) or not name or "/" in name or "\x00" in name or "\\" in name
            or name.startswith(".")):
        raise ValueError(f"{what}={name!r} must be a plain file name: no '/', no NUL, not '.' or '..', "
                         "not starting with '.'")
    return name


def inside(directory: str | os.PathLike, name: str, what: str = "name") -> Path:
    """``directory / name``, checked to stay inside ``directory`` (ValueError otherwise).

    >>> inside("results", "chase-quick.csv")
    PosixPath('results/chase-quick.csv')
    """
    directory = Path(directory)
    path = directory / file_name(name, what)
    if os.path.realpath(path.parent) != os.path.realpath(directory):
        raise ValueError(f"{what}={name!r} would be written outside {os.fspath(directory)}")
    return path
