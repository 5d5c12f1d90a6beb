"""Run `go build` in a wrapper module into a cache directory, with progress and a lock.

The mechanics shared by every binary policyd builds from Go modules (see `build` for
which ones): a static, `-mod=readonly` environment, package-count progress for builds
that take minutes, one builder at a time per cache directory, and a scratch directory
renamed only when every target is built, so an interrupted build is never trusted.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from policyd.devcluster.assets import Progress
from policyd.devcluster.errors import DevClusterError

# How often a long build reports that it is still alive, even without a new 10% step.
_PROGRESS_INTERVAL_S = 30.0


@dataclass(frozen=True)
class GoTarget:
    """One `go build` run inside one wrapper module."""

    label: str
    module_dir: Path
    packages: tuple[str, ...]
    # With one package, the output file name (etcd's main package is a module root
    # ending in /v3, which Go would name "v3"); with several, `-o` is a directory.
    output_name: str | None
    ldflags: str
    tags: tuple[str, ...] = ()


def go_env(base: Mapping[str, str]) -> dict[str, str]:
    """The environment of the Go commands.

    CGO_ENABLED=0 gives static binaries that need no C toolchain. -mod=readonly makes a
    go.mod/go.sum that is out of date fail loudly instead of being rewritten in the
    repository. GOPATH/GOMODCACHE/GOCACHE are left at their defaults on purpose.
    """
    env = dict(base)
    env["CGO_ENABLED"] = "0"
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=readonly").strip()
    return env


@contextmanager
def _build_lock(path: Path) -> Iterator[None]:
    """Serialize builds of one version (two terminals, or parallel test workers)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _fmt_duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _run_logged(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], log: Path
) -> subprocess.CompletedProcess[str]:
    with log.open("a") as handle:
        handle.write(f"\n$ {' '.join(argv)}  (in {cwd})\n")
        handle.flush()
        return subprocess.run(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=handle,
            text=True,
            check=False,
        )


def _failure(what: str, code: int, log: Path) -> DevClusterError:
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    last = lines[-1].strip() if lines else "no output"
    return DevClusterError(f"{what} failed (exit {code}): {last} (full log: {log})")


def _build_target(
    go: str,
    target: GoTarget,
    out_dir: Path,
    env: Mapping[str, str],
    log: Path,
    progress: Progress,
    what: str,
) -> None:
    if not (target.module_dir / "go.mod").is_file():
        raise DevClusterError(
            f"{target.module_dir / 'go.mod'} not found: building {what} needs "
            "a policyd source checkout (or POLICYD_CONTROLPLANE_SRC)"
        )
    # `go list -deps` downloads the modules and tells how many packages the build has,
    # so the compile phase can report a percentage.
    progress(f"[{target.label}] resolving modules (downloads from the Go proxy if needed)")
    # Build tags change the package graph (remove_all_sd drops a third of Prometheus').
    tag_args = ["-tags", ",".join(target.tags)] if target.tags else []
    listed = _run_logged(
        [go, "list", *tag_args, "-deps", "-f", "{{.ImportPath}}", *target.packages],
        target.module_dir,
        env,
        log,
    )
    if listed.returncode != 0:
        raise _failure(f"go list for {target.label}", listed.returncode, log)
    total = max(1, len(listed.stdout.split()))

    output = out_dir / target.output_name if target.output_name else out_dir
    argv = [
        go,
        "build",
        "-v",
        "-trimpath",
        *tag_args,
        "-ldflags",
        target.ldflags,
        "-o",
        f"{output}{'' if target.output_name else os.sep}",
        *target.packages,
    ]
    start = time.monotonic()
    progress(f"[{target.label}] compiling {total} packages")
    with log.open("a") as handle:
        handle.write(f"\n$ {' '.join(argv)}  (in {target.module_dir})\n")
        handle.flush()
        # `go build -v` names each package as it is compiled (on stderr); counting them
        # is the only progress signal Go offers. Packages already in the build cache
        # are not named, so a warm build finishes before reaching 100%.
        proc = subprocess.Popen(
            argv,
            cwd=target.module_dir,
            env=dict(env),
            stdout=handle,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None
        last_step, last_time = 0, start
        for compiled, line in enumerate(proc.stderr, start=1):
            handle.write(line)
            step = compiled * 10 // total
            now = time.monotonic()
            if step > last_step or now - last_time >= _PROGRESS_INTERVAL_S:
                last_step, last_time = step, now
                progress(
                    f"[{target.label}] {min(compiled, total)}/{total} packages "
                    f"({min(100, compiled * 100 // total)}%), {_fmt_duration(now - start)}"
                )
        code = proc.wait()
    if code != 0:
        raise _failure(f"go build of {target.label}", code, log)
    progress(f"[{target.label}] built in {_fmt_duration(time.monotonic() - start)}")


def stderr_progress(message: str) -> None:
    # sys.__stderr__ rather than sys.stderr: pytest captures the latter, and a build of
    # many minutes with no sign of life looks like a hang.
    stream = sys.__stderr__ or sys.stderr
    stream.write(f"policyd devcluster: {message}\n")
    stream.flush()


@dataclass(frozen=True)
class CachedBuild:
    """One cache directory filled by Go builds, and how to talk about it."""

    what: str  # "the control plane" / "Prometheus": error messages
    title: str  # with the versions: the progress line that starts the build
    dest: Path
    targets: Sequence[GoTarget]
    info: Mapping[str, str]  # written to BUILDINFO.json with the time taken
    is_complete: Callable[[Path], bool]
    without_go: str  # what the user can do instead of installing Go


def fill_cache(
    build: CachedBuild, base_env: Mapping[str, str], report: Progress, force: bool
) -> bool:
    """Run the build's targets into its cache directory unless it is complete already;
    True when it was built now."""
    dest = build.dest
    with _build_lock(dest.parent / f".{dest.name}.lock"):
        # Another process may have finished the same build while we waited for the lock.
        if not force and build.is_complete(dest):
            return False
        go = shutil.which("go", path=base_env.get("PATH"))
        if go is None:
            raise DevClusterError(
                f"`go` not found on PATH: install Go 1.26 or newer to build {build.what} "
                f"({build.without_go})"
            )
        # Build into a scratch directory and rename at the end, so an interrupted build
        # never leaves a half-filled cache directory that later runs would trust.
        scratch = dest.parent / f".{dest.name}.partial-{os.getpid()}"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        log = dest.parent / f"build-{dest.name}.log"
        log.write_text("")
        started = time.monotonic()
        report(
            f"building {build.title} into {dest} "
            f"(a cold build takes a long while; log: {log})"
        )
        try:
            genv = go_env(base_env)
            for target in build.targets:
                _build_target(go, target, scratch, genv, log, report, build.what)
            seconds = time.monotonic() - started
            (scratch / "BUILDINFO.json").write_text(
                json.dumps(
                    {
                        **build.info,
                        "seconds": round(seconds),
                        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    },
                    indent=2,
                )
                + "\n"
            )
            shutil.rmtree(dest, ignore_errors=True)
            scratch.rename(dest)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        report(f"{build.what.removeprefix('the ')} built in {_fmt_duration(seconds)}")
    return True
