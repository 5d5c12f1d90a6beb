"""Build etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kubectl from Go
modules, and cache them.

Release binaries cannot be downloaded where policyd is developed and tested, but the Go
module proxy is reachable, so the project builds the control plane itself from two
wrapper modules committed under ``tools/controlplane/`` (``kube`` pins
``k8s.io/kubernetes``, ``etcd`` pins ``go.etcd.io/etcd/server/v3``; they are separate
because one module graph would upgrade Kubernetes' etcd client and grpc under it).

A cold build takes many minutes on two cores, so it shows progress (package counts) and
stores the result under ``~/.cache/policyd/controlplane/<k8s>-<etcd>/``; later runs find
the binaries there at once. The Go module and build caches stay at Go's defaults so a
CI machine that builds twice reuses them.

Run ``python -m policyd.devcluster.build`` (or ``policyd dev build``) to build ahead of
the tests.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from policyd.devcluster.assets import (
    ETCD_VERSION,
    K8S_VERSION,
    Binaries,
    Progress,
    binaries_in,
    cache_dir,
    from_env,
)
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


def source_dir(env: Mapping[str, str] | None = None) -> Path:
    """The `tools/controlplane` directory of the checkout this package runs from."""
    override = (os.environ if env is None else env).get("POLICYD_CONTROLPLANE_SRC")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "tools" / "controlplane"


def version_ldflags(k8s_version: str) -> str:
    """`-X` flags stamping the Kubernetes version into the binaries.

    Built from a module (not from the kubernetes repo with its hack/ scripts), the
    binaries would report v0.0.0-master; kube-apiserver then refuses to start because
    its emulation version is checked against the binary version.
    """
    major, minor = k8s_version.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]  # no symbol tables: about a third smaller, same behaviour
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={k8s_version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    return " ".join(flags)


def go_targets(src: Path, k8s_version: str) -> list[GoTarget]:
    return [
        GoTarget(
            label="kube-apiserver, kube-scheduler, kube-controller-manager, kubectl",
            module_dir=src / "kube",
            packages=(
                "k8s.io/kubernetes/cmd/kube-apiserver",
                "k8s.io/kubernetes/cmd/kube-scheduler",
                "k8s.io/kubernetes/cmd/kube-controller-manager",
                "k8s.io/kubernetes/cmd/kubectl",
            ),
            output_name=None,
            ldflags=version_ldflags(k8s_version),
        ),
        GoTarget(
            label="etcd",
            module_dir=src / "etcd",
            packages=("go.etcd.io/etcd/server/v3",),
            output_name="etcd",
            ldflags="-s -w",
        ),
    ]


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
) -> None:
    if not (target.module_dir / "go.mod").is_file():
        raise DevClusterError(
            f"{target.module_dir / 'go.mod'} not found: building the control plane needs "
            "a policyd source checkout (or POLICYD_CONTROLPLANE_SRC)"
        )
    # `go list -deps` downloads the modules and tells how many packages the build has,
    # so the compile phase can report a percentage.
    progress(f"[{target.label}] resolving modules (downloads from the Go proxy if needed)")
    listed = _run_logged(
        [go, "list", "-deps", "-f", "{{.ImportPath}}", *target.packages],
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


def _stderr_progress(message: str) -> None:
    # sys.__stderr__ rather than sys.stderr: pytest captures the latter, and a build of
    # many minutes with no sign of life looks like a hang.
    stream = sys.__stderr__ or sys.stderr
    stream.write(f"policyd devcluster: {message}\n")
    stream.flush()


def build_binaries(
    *,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
    k8s_version: str = K8S_VERSION,
    etcd_version: str = ETCD_VERSION,
    force: bool = False,
) -> Binaries:
    """Build the binaries into the cache (unless all are already there) and return them."""
    report = progress or _stderr_progress
    base_env = os.environ if env is None else env
    dest = cache_dir(k8s_version, etcd_version, env=base_env)
    with _build_lock(dest.parent / f".{dest.name}.lock"):
        # Another process may have finished the same build while we waited for the lock.
        cached = None if force else binaries_in(dest, source="cache")
        if cached is not None:
            return cached
        go = shutil.which("go", path=base_env.get("PATH"))
        if go is None:
            raise DevClusterError(
                "`go` not found on PATH: install Go 1.26 or newer to build the control plane "
                "(or point KUBEBUILDER_ASSETS at existing binaries)"
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
            f"building control plane {k8s_version} + etcd {etcd_version} into {dest} "
            f"(a cold build takes a long while; log: {log})"
        )
        try:
            genv = go_env(base_env)
            for target in go_targets(source_dir(base_env), k8s_version):
                _build_target(go, target, scratch, genv, log, report)
            seconds = time.monotonic() - started
            (scratch / "BUILDINFO.json").write_text(
                json.dumps(
                    {
                        "kubernetes": k8s_version,
                        "etcd": etcd_version,
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
        report(f"control plane built in {_fmt_duration(seconds)}")
    built = binaries_in(dest, source="build")
    if built is None:  # pragma: no cover - go build succeeded but a binary is missing
        raise DevClusterError(f"build finished but binaries are missing in {dest}")
    return built


def resolve_binaries(
    *,
    build_if_missing: bool = True,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
) -> Binaries:
    """Binaries from the envtest variables, else the cache, else a fresh build.

    With `build_if_missing=False` a cold cache is an error naming the command that
    builds, for callers that must not block for minutes.
    """
    chosen = from_env(env)
    if chosen is not None:
        return chosen
    cached = binaries_in(cache_dir(env=env), source="cache")
    if cached is not None:
        return cached
    if not build_if_missing:
        raise DevClusterError(
            f"control-plane binaries not built yet (expected in {cache_dir(env=env)}): "
            "run `policyd dev build`"
        )
    return build_binaries(progress=progress, env=env)


def main() -> int:
    """`python -m policyd.devcluster.build`: build (or find) the binaries, print their dir."""
    try:
        binaries = build_binaries(force="--force" in sys.argv[1:])
    except DevClusterError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    print(binaries.etcd.parent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
