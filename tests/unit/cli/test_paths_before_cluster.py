"""A path named on the command line that does not exist is said first, before the
cluster is read (a live read or a large snapshot takes seconds): explain, simulate,
audit, diff and ui each name the missing file, exit 2, whatever the cluster is."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyd.cli.app import register_commands
from tests.cli_runs import run_cli

ROOT = Path(__file__).resolve().parents[3]
POLICIES = ROOT / "policies"
MISSING = "no-such-file.yaml"

# Each command with a missing path in each place it takes one ({missing}).
CASES = [
    ["explain", "shop/web", "--policies", "{missing}"],
    ["explain", "shop/web", "--config", "{missing}"],
    ["explain", "shop/web", "--pods", "{missing}"],
    ["explain", "shop/web", "--metrics", "{missing}"],
    ["simulate", "--policies", str(POLICIES), "--policies", "{missing}"],
    ["simulate", "--config", "{missing}"],
    ["simulate", "--pods", "{missing}"],
    ["simulate", "--metrics", "{missing}"],
    ["audit", "--policies", "{missing}"],
    ["audit", "--config", "{missing}"],
    ["diff", str(POLICIES), "{missing}"],
    ["diff", str(POLICIES), str(POLICIES), "--pods", "{missing}"],
    ["diff", str(POLICIES), str(POLICIES), "--metrics", "{missing}"],
    ["ui", "--policies", "{missing}"],
    ["ui", "--pods", "{missing}"],
]


@pytest.mark.parametrize("args", CASES, ids=lambda a: " ".join(a[:1] + a[-2:-1]))
@pytest.mark.parametrize("cluster", ["demo/cluster.yaml", "unreadable-cluster.yaml"])
def test_a_missing_path_is_said_before_the_cluster_is_read(
        tmp_path: Path, args: list[str], cluster: str) -> None:
    missing = tmp_path / MISSING
    r = run_cli(register_commands(), [a.format(missing=missing) for a in args]
                + ["--cluster", str(ROOT / cluster)])
    assert r.code == 2, r.output
    assert f"{missing}: no such file or directory" in r.stderr, r.stderr
    assert "\n" not in r.stderr.strip()
