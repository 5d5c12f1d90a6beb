"""`policyd diff --base REF`: the files of a git commit, read without a checkout.

The working tree is left alone (a CI job may have changes in it, and another checkout
would race with them): each file under the paths asked for is read with `git cat-file`
at the commit and written under a temporary directory, at its path in the repository,
so that what a profile names relative to itself (`policies: [../policies]`) is found
there too. A profile's `policies` entries are followed the same way.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from policyd.errors import InputFileError, PolicydError

# Enough for any repository's ls-tree or a policy file; the git process is killed after.
GIT_TIMEOUT_SECONDS = 60


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                              timeout=GIT_TIMEOUT_SECONDS, check=False)
    except FileNotFoundError:
        raise PolicydError("--base needs git, which is not on PATH") from None
    except subprocess.TimeoutExpired:
        raise PolicydError(f"git {args[0]} took over {GIT_TIMEOUT_SECONDS}s in {root}"
                           ) from None


def _first_line(out: bytes) -> str:
    text = out.decode("utf-8", "replace").strip()
    return text.splitlines()[0] if text else "no message"


def repository_root(near: Path) -> Path:
    """The top of the git work tree holding `near` (a file or directory, or the current
    directory when it does not exist)."""
    start = near if near.is_dir() else near.parent
    if not start.is_dir():
        start = Path.cwd()
    done = _git(start, "rev-parse", "--show-toplevel")
    if done.returncode != 0:
        raise PolicydError(f"--base: {near} is not in a git repository "
                           f"({_first_line(done.stderr)})")
    return Path(done.stdout.decode().strip()).resolve()


def resolve_commit(root: Path, ref: str) -> str:
    """The commit `ref` names in the repository at `root`; a usage error (exit 2)
    naming it when it names none."""
    if not ref or ref.startswith("-"):
        raise PolicydError(f"--base {ref!r} is not a git revision")
    done = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if done.returncode != 0:
        raise PolicydError(f"--base {ref}: no such commit in the git repository at {root}")
    return done.stdout.decode().strip()


class BaseTree:
    """The files of one commit, written on demand under `into`."""

    def __init__(self, root: Path, commit: str, into: Path) -> None:
        self.root = root
        self.commit = commit
        self.into = into

    def relative(self, path: Path) -> str:
        """`path` as the repository names it (POSIX, from its top); a usage error when
        it lies outside the repository."""
        absolute = Path(path).absolute().resolve()
        try:
            return absolute.relative_to(self.root).as_posix()
        except ValueError:
            raise PolicydError(f"--base: {path} is outside the git repository at "
                               f"{self.root}") from None

    def files(self, rel: str) -> list[str]:
        """The files of the commit at `rel`: itself, or every file under it."""
        args = ["ls-tree", "-r", "-z", "--full-tree", "--name-only", self.commit]
        done = _git(self.root, *args, "--", rel or ".")
        if done.returncode != 0:
            raise PolicydError(f"--base: git ls-tree failed: {_first_line(done.stderr)}")
        return [n for n in done.stdout.decode("utf-8", "surrogateescape").split("\0") if n]

    def write(self, rel: str) -> Path | None:
        """Write the commit's file or directory `rel` under `into`; its path there, or
        None when the commit has nothing at `rel` (new in the working tree)."""
        names = self.files(rel)
        for name in names:
            done = _git(self.root, "cat-file", "blob", f"{self.commit}:{name}")
            if done.returncode != 0:
                raise InputFileError(f"--base: cannot read {name} at {self.commit[:12]}: "
                                     f"{_first_line(done.stderr)}")
            target = self.into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(done.stdout)
        return self.into / rel if names else None
