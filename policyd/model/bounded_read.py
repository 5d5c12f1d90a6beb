"""Read the bytes of a file a user names, bounded in size and in time.

Every file the tool reads (snapshots, pod files, policies, profiles, policy tests,
metrics files) comes through `read_bounded`, so each kind of path gets the same answer:

- a regular file is read whole, refused when it is larger than the caller's limit;
- a pipe (`<(kubectl get ...)`, `/dev/stdin` fed by a pipe, a named pipe) is read as it
  arrives, up to a limit of its own, and refused when no byte arrives for
  `IDLE_TIMEOUT_S` seconds: a named pipe nobody writes to, or a writer that stalled,
  would otherwise hang the command (or the daemon's reload) forever;
- character devices (`/dev/zero`, `/dev/urandom`, a terminal), block devices and
  sockets are refused before they are opened: they are endless, or not files at all;
- a missing path, a dangling symlink, a directory, a file that cannot be read: one
  `InputFileError` naming the path.

Nothing here decodes: that is `policyd.model.datafile` and `policyd.sourcefile`.
"""

from __future__ import annotations

import errno
import os
import select
import stat
import time
from pathlib import Path

from policyd.errors import FileTooLargeError, InputFileError

# A pipe that gives no byte for this long (no writer yet, or a writer that stopped) is
# refused. Long enough for `kubectl get pods -A -o yaml` of a large cluster, which
# prints nothing until the API server has answered the whole list.
IDLE_TIMEOUT_S = 60.0
_CHUNK = 1024 * 1024

# What a path that is not a regular file is, in the words of `ls -l` and file(1).
_REFUSED = (
    (stat.S_ISCHR, "a character device (such as /dev/zero or a terminal)"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_bounded(path: Path, max_bytes: int, *, pipe_max_bytes: int | None = None,
                 idle_timeout: float | None = None) -> bytes:
    """The bytes of `path`: a regular file of at most `max_bytes`, or what a pipe
    delivers, at most `pipe_max_bytes` (default `max_bytes`), each read within
    `idle_timeout` seconds (default `IDLE_TIMEOUT_S`) of the last. Raises
    `FileTooLargeError` past a limit and `InputFileError` for anything else."""
    where = str(path)
    st = _stat(path)
    if stat.S_ISDIR(st.st_mode):
        raise InputFileError("is a directory, expected a file", where=where)
    for test, what in _REFUSED:
        if test(st.st_mode):
            raise InputFileError(f"is {what}, not a file: give a regular file or a pipe",
                                 where=where)
    try:
        # Never blocks: opening a named pipe for reading would wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _unreadable(exc, path) from None
    try:
        mode = os.fstat(fd).st_mode  # what was opened, whatever the path became since
        if stat.S_ISFIFO(mode):
            return _read_pipe(fd, where, _pipe_name(path),
                              max_bytes if pipe_max_bytes is None else pipe_max_bytes,
                              IDLE_TIMEOUT_S if idle_timeout is None else idle_timeout)
        if not stat.S_ISREG(mode):
            raise InputFileError("is not a regular file or a pipe", where=where)
        return _read_regular(fd, where, max_bytes)
    except OSError as exc:
        raise _unreadable(exc, path) from None
    finally:
        os.close(fd)


def describe_limit(n: int) -> str:
    """`4 GiB`, `1 GiB`, `128 KiB`, `1000 bytes`: a limit as a user reads it."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


def _stat(path: Path) -> os.stat_result:
    try:
        return os.stat(path)
    except FileNotFoundError:
        reason = "dangling symlink" if os.path.islink(path) else "no such file"
        raise InputFileError(reason, where=str(path)) from None
    except ValueError:  # a NUL character in the path
        raise InputFileError("not a usable path (it contains a NUL character)",
                             where=repr(str(path))) from None
    except OSError as exc:
        raise _unreadable(exc, path) from None


def _unreadable(exc: OSError, path: Path) -> InputFileError:
    if exc.errno == errno.ELOOP:
        return InputFileError("symlink loop (the link leads back to itself)", where=str(path))
    if exc.errno == errno.ENXIO:  # a socket, or a FIFO end that cannot be opened
        return InputFileError("is not a regular file or a pipe", where=str(path))
    return InputFileError(f"cannot read file: {exc.strerror or exc}", where=str(path))


def _too_large(where: str, what: str, limit: int) -> FileTooLargeError:
    return FileTooLargeError(f"{what} is larger than the limit of {describe_limit(limit)}",
                             where=where)


def _read_regular(fd: int, where: str, max_bytes: int) -> bytes:
    if os.fstat(fd).st_size > max_bytes:
        raise _too_large(where, "file", max_bytes)
    # One more byte than allowed: a file that grew since fstat (or a /proc file, whose
    # size says 0) is caught too, without reading more than the limit.
    with os.fdopen(os.dup(fd), "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise _too_large(where, "file", max_bytes)
    return data


def _pipe_name(path: Path) -> str:
    try:
        return "named pipe" if stat.S_ISFIFO(os.lstat(path).st_mode) else "pipe"
    except OSError:
        return "pipe"


def _read_pipe(fd: int, where: str, what: str, max_bytes: int, idle_timeout: float) -> bytes:
    """Read until the writer closes. Waiting is done by poll(), never by read(): a
    non-blocking read of a pipe without a writer returns end of file at once, while
    poll() waits for a writer to connect and send."""
    buf = bytearray()
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    last = time.monotonic()
    while True:
        left = idle_timeout - (time.monotonic() - last)
        if left <= 0 or not poller.poll(max(1, int(left * 1000))):
            if time.monotonic() - last < idle_timeout:
                continue  # woken early (a signal): wait for the rest
            if not buf:
                raise InputFileError(f"{what}: no data within {idle_timeout:g} s "
                                     "(is anything writing to it?)", where=where)
            raise InputFileError(f"{what}: the writer stopped after {len(buf)} bytes "
                                 f"(no data for {idle_timeout:g} s)", where=where)
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            continue
        if not chunk:
            return bytes(buf)
        buf += chunk
        last = time.monotonic()
        if len(buf) > max_bytes:
            raise _too_large(where, what, max_bytes)
