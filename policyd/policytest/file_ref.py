"""Whether a file a PolicyTest names (its profile, its cluster file) can be read: a
regular file, checked before reading so that a FIFO nobody writes cannot hang the run
and a path no file can have (a NUL, too long) is a problem, not a crash."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from policyd.model.spelling import show_value


def unusable(path: Path) -> str | None:
    """Why `path` cannot be read as a file (the path shown, bounded), or None."""
    # Quoted (a control character shows escaped); only a path too long to be real is cut.
    shown = repr(str(path)) if len(str(path)) <= 300 else show_value(str(path))
    try:
        st = os.stat(path)
    except ValueError:  # a NUL character: no file can be named so
        return f"{shown}: not a usable path (it contains a NUL character)"
    except OSError as exc:
        return f"{shown}: {exc.strerror or exc}"
    if stat.S_ISDIR(st.st_mode):
        return f"{shown}: is a directory, expected a file"
    if not stat.S_ISREG(st.st_mode):
        return f"{shown}: not a regular file (a FIFO, socket or device); not read"
    return None
