"""Finding policy files: the one directory walker of lint, check-config, explain,
simulate, test and the daemon's reload.

A directory is searched recursively for *.yaml and *.yml; hidden entries (`.git`,
a ConfigMap volume's `..data` and `..2024_...`) are skipped; symlinks are followed,
files and directories alike. A file named explicitly is taken whatever its suffix or
type (`policyd lint <(kustomize build)` reads a pipe).

Nothing that could hold a policy is skipped without a word: a dangling symlink, a
symlink loop (`a -> b -> a`, or a directory link back to one of its parents), a
directory that cannot be listed, or a `*.yaml` that is a FIFO or device (reading it
could block forever) is a `PathProblem` naming the path. Callers treat those as
unreadable input (exit 2, a rejected reload), like a file that cannot be read.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from policyd.model.spelling import show_value

YAML_SUFFIXES = (".yaml", ".yml")

# missing: a path named by the user does not exist; empty: a directory without YAML;
# unreadable: something that is there but cannot be read (the exit-2 kind).
ProblemKind = Literal["missing", "empty", "unreadable"]


@dataclass(frozen=True, slots=True)
class PathProblem:
    path: str
    message: str
    kind: ProblemKind = "unreadable"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(slots=True)
class FoundFiles:
    files: list[tuple[Path, str]] = field(default_factory=list)  # (path, display name)
    problems: list[PathProblem] = field(default_factory=list)


def find_yaml_files(paths: Iterable[str | Path]) -> FoundFiles:
    """The files under `paths` in a stable order (each once, however reached), and a
    problem for everything that is missing or cannot be read."""
    found = FoundFiles()
    seen: set[Path] = set()

    def add(path: Path, display: str) -> None:
        key = _resolved(path)
        if key not in seen:
            seen.add(key)
            found.files.append((path, display))

    for raw in paths:
        p = Path(raw)
        st, problem = _stat(p, named=True)
        if st is None:
            found.problems.append(problem or PathProblem(str(raw), "cannot read"))
        elif stat.S_ISDIR(st.st_mode):
            files, problems = _walk(p, st)
            found.problems.extend(problems)
            if not files and not problems:
                found.problems.append(PathProblem(str(raw), "no *.yaml or *.yml files found",
                                                  "empty"))
            for f in sorted(files):
                add(f, str(f))
        else:
            add(p, str(raw))
    return found


def _walk(top: Path, top_stat: os.stat_result) -> tuple[list[Path], list[PathProblem]]:
    """Every YAML file under `top`, without recursion (so no depth can crash it)."""
    files: list[Path] = []
    problems: list[PathProblem] = []
    top_key = (top_stat.st_dev, top_stat.st_ino)
    visited = {top_key}
    stack: list[tuple[Path, dict[tuple[int, int], Path]]] = [(top, {top_key: top})]
    while stack:
        directory, ancestors = stack.pop()
        try:
            with os.scandir(directory) as it:
                names = sorted(e.name for e in it)
        except OSError as exc:
            problems.append(PathProblem(str(directory), f"cannot read directory: "
                                                        f"{_reason(exc)}"))
            continue
        for name in names:
            path = directory / name
            st, problem = _stat(path, named=False)
            if name.startswith("."):
                # Hidden: only a readable YAML file is taken (editor lock files are
                # dangling symlinks named .#x.yaml; ConfigMap internals are ..dirs).
                if st is not None and stat.S_ISREG(st.st_mode) \
                        and name.endswith(YAML_SUFFIXES):
                    files.append(path)
                continue
            if st is None:
                if problem is not None and Path(name).suffix in ("", *YAML_SUFFIXES):
                    problems.append(problem)  # could have been a policy or a directory
                continue
            if stat.S_ISDIR(st.st_mode):
                key = (st.st_dev, st.st_ino)
                if key in ancestors:
                    problems.append(PathProblem(str(path), "symlink loop: leads back to "
                                                           f"{ancestors[key]}"))
                elif key not in visited:  # two links to one directory: walk it once
                    visited.add(key)
                    stack.append((path, {**ancestors, key: path}))
            elif name.endswith(YAML_SUFFIXES):
                if stat.S_ISREG(st.st_mode):
                    files.append(path)
                else:
                    problems.append(PathProblem(str(path), "not a regular file (a FIFO, "
                                                           "socket or device); not read"))
    return files, problems


def _stat(path: Path, *, named: bool) -> tuple[os.stat_result | None, PathProblem | None]:
    """stat() following symlinks, or the problem that stops it."""
    try:
        return os.stat(path), None
    except ValueError:  # a NUL character: no file can be named so
        return None, PathProblem(str(path), "not a usable path (it contains a NUL "
                                            "character)")
    except OSError as exc:
        if exc.errno == errno.ENOENT and os.path.islink(path):
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            return None, PathProblem(str(path), f"dangling symlink (its target {target!r} "
                                                "does not exist)")
        if exc.errno == errno.ENOENT:
            return None, PathProblem(str(path), "no such file or directory",
                                     "missing" if named else "unreadable")
        if exc.errno == errno.ENAMETOOLONG:  # no such file can exist: a wrong path
            return None, PathProblem(show_value(str(path)), "the path is longer than the "
                                     "system allows", "missing" if named else "unreadable")
        if exc.errno == errno.ELOOP:
            return None, PathProblem(str(path), "symlink loop (the link leads back to "
                                                "itself)")
        return None, PathProblem(str(path), f"cannot read: {_reason(exc)}")


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _resolved(p: Path) -> Path:
    try:
        return p.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop before Python 3.13
        return p.absolute()
