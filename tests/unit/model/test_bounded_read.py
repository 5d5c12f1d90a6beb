"""`read_bounded`: every kind of path a user can name, read within a size and a time
limit or refused with a message naming the path and what it is."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from policyd.errors import FileTooLargeError, InputFileError
from policyd.model import bounded_read
from policyd.model.bounded_read import describe_limit, read_bounded


def test_a_regular_file_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_bytes(b"a: 1\n")
    assert read_bounded(path, 5) == b"a: 1\n"


def test_a_regular_file_over_the_limit_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_bytes(b"x" * 2049)
    with pytest.raises(FileTooLargeError, match=r"file is larger than the limit of 2 KiB"):
        read_bounded(path, 2048)


def test_a_proc_file_whose_size_says_zero_is_read(tmp_path: Path) -> None:
    assert b"Name:" in read_bounded(Path("/proc/self/status"), 1 << 20)
    with pytest.raises(FileTooLargeError):
        read_bounded(Path("/proc/self/status"), 10)


@pytest.mark.parametrize(("make", "message"), [
    (lambda d: d / "missing.yaml", "no such file"),
    (lambda d: (d / "l.yaml").symlink_to(d / "gone") or d / "l.yaml", "dangling symlink"),
    (lambda d: d, "is a directory"),
    (lambda d: (d / "a").symlink_to(d / "a") or d / "a", "symlink loop"),
])
def test_what_is_not_a_file(tmp_path: Path, make: object, message: str) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(InputFileError, match=message) as e:
        read_bounded(path, 100)
    assert e.value.where == str(path)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null", "/dev/tty"])
def test_character_devices_are_refused_before_opening(device: str) -> None:
    if not os.path.exists(device):
        pytest.skip(f"{device} does not exist here")
    with pytest.raises(InputFileError, match=r"is a character device \(such as /dev/zero"):
        read_bounded(Path(device), 100)


def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(InputFileError, match="is a socket, not a file"):
            read_bounded(path, 100)


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo.yaml"
    os.mkfifo(path)
    return path


@contextmanager
def writing(path: Path, chunks: list[bytes], hold: threading.Event | None = None
            ) -> Iterator[None]:
    """A thread writing `chunks` to the FIFO, then closing it (or, with `hold`, keeping
    it open until the block ends: a stalled writer)."""
    def write() -> None:
        with open(path, "wb", buffering=0) as f:  # blocks until the reader opens
            try:
                for c in chunks:
                    f.write(c)
            except BrokenPipeError:  # the reader gave up (the size limit)
                return
            if hold is not None:
                hold.wait(30)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    try:
        yield
    finally:
        if hold is not None:
            hold.set()
        t.join(30)


def test_a_named_pipe_is_read_to_its_end(fifo: Path) -> None:
    with writing(fifo, [b"a: 1\n", b"b: 2\n"]):
        assert read_bounded(fifo, 100, idle_timeout=30) == b"a: 1\nb: 2\n"


def test_a_named_pipe_without_a_writer_is_refused(fifo: Path) -> None:
    with pytest.raises(InputFileError, match=r"named pipe: no data within 0.2 s "
                                             r"\(is anything writing to it\?\)"):
        read_bounded(fifo, 100, idle_timeout=0.2)


def test_the_default_timeout_is_the_documented_one(fifo: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert bounded_read.IDLE_TIMEOUT_S == 60
    monkeypatch.setattr(bounded_read, "IDLE_TIMEOUT_S", 0.1)
    with pytest.raises(InputFileError, match=r"no data within 0.1 s"):
        read_bounded(fifo, 100)


def test_a_stalled_writer_is_refused(fifo: Path) -> None:
    hold = threading.Event()
    with writing(fifo, [b"a: 1\n"], hold), \
            pytest.raises(InputFileError, match=r"the writer stopped after 5 bytes"):
        read_bounded(fifo, 100, idle_timeout=0.3)


def test_a_pipe_over_its_limit_is_refused(fifo: Path) -> None:
    hold = threading.Event()
    with writing(fifo, [b"x" * 1000] * 5, hold), \
            pytest.raises(FileTooLargeError, match="named pipe is larger than the limit of "
                                                   "2000 bytes"):
        read_bounded(fifo, 10**9, pipe_max_bytes=2000, idle_timeout=30)


def test_an_anonymous_pipe_by_its_fd_path() -> None:
    """What `<(cmd)` and `/dev/stdin` give: /dev/fd/N of a pipe."""
    r, w = os.pipe()
    try:
        os.write(w, b"kind: Pod\n")
        os.close(w)
        assert read_bounded(Path(f"/dev/fd/{r}"), 100, idle_timeout=30) == b"kind: Pod\n"
    finally:
        os.close(r)


@pytest.mark.parametrize(("n", "text"), [
    (4 * 2**30, "4 GiB"), (2**30, "1 GiB"), (128 * 1024, "128 KiB"), (1000, "1000 bytes")])
def test_describe_limit(n: int, text: str) -> None:
    assert describe_limit(n) == text
