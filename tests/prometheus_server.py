"""A real Prometheus server (the pinned build, `devcluster.build.resolve_tool(PROMETHEUS)`)
on a loopback port for the tests: it scrapes one target every second and, when given
rule files, evaluates them every second too. The node-metrics tests query what it
scraped; the live alert test (tests/e2e/test_alerts_live.py) asks which alerts fire."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from policyd.devcluster.ports import free_ports
from tests.polling import wait_for


class Prometheus:
    def __init__(self, binary: str, workdir: Path, target_port: int, *,
                 job: str = "exporter", rule_files: Sequence[Path] = ()) -> None:
        self.binary = binary
        self.workdir = workdir
        self.port = free_ports(1)[0]
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = workdir / "prometheus.yml"
        rules = "".join(f"  - {json.dumps(str(f))}\n" for f in rule_files)
        self.config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            + (f"rule_files:\n{rules}" if rules else "")
            + f"scrape_configs:\n  - job_name: {job}\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{target_port}']\n")
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / "prometheus.log"

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, f"--config.file={self.config}",
                 f"--storage.tsdb.path={self.workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}",
                 # A series that stops being scraped disappears from instant queries
                 # after the lookback: short here, so a stopped target shows quickly.
                 "--query.lookback-delta=5s", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT)
        wait_for(self.ready, 60, f"Prometheus ready on {self.url} (log: {self.log})")

    def ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited {self.proc.returncode}: "
                                 f"{self.log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def api(self, path: str, **query: str) -> Any:
        """The `data` of an HTTP API answer (`/api/v1/alerts`, `/api/v1/rules`, ...)."""
        url = f"{self.url}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.loads(r.read())
        assert body.get("status") == "success", body
        return body["data"]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None


def rules_file(prometheus_rule: Path, dest: Path) -> Path:
    """The `spec.groups` of a PrometheusRule (deploy/monitoring/prometheusrule.yaml),
    unchanged, as the plain rules file Prometheus and promtool read without the
    Prometheus Operator."""
    import yaml  # type: ignore[import-untyped]

    rule = yaml.safe_load(prometheus_rule.read_text())
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    dest.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    return dest
