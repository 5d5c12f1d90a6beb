"""What each scheduler says about itself: its /metrics before and after the measured
window, and its process's CPU time and peak RSS from /proc.

Both schedulers export the same histograms under their own prefix; the benchmark
divides the window's growth of each histogram's sum by its growth in observations, so
"algorithm ms per attempt" means the same thing for both.
"""

from __future__ import annotations

import os
import ssl
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

# kube-scheduler's names (pkg/scheduler/metrics), which policyd serves too
# (policyd/daemon/metrics.py): (figure, histogram) pairs read for both.
_SHARED = {
    "algorithm": "scheduler_scheduling_algorithm_duration_seconds",
    "attempt": "scheduler_scheduling_attempt_duration_seconds",
    "extension_point": "scheduler_framework_extension_point_duration_seconds",
}
HISTOGRAMS: Mapping[str, Mapping[str, str]] = {"kube-scheduler": _SHARED, "policyd": _SHARED}


@dataclass(frozen=True)
class Totals:
    """A histogram's `_sum` and `_count`, added over its label sets."""

    sum: float = 0.0
    count: float = 0.0

    def __sub__(self, other: Totals) -> Totals:
        return Totals(self.sum - other.sum, self.count - other.count)


def histogram_totals(text: str, name: str, by_label: str | None = None
                     ) -> dict[str, Totals]:
    """`name`'s totals in Prometheus text `text`: one entry "" over all label sets, or
    one per value of `by_label` (e.g. extension_point). A histogram not exported yet
    (no observation so far) is simply absent."""
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != name:
            continue
        for sample in family.samples:
            key = sample.labels.get(by_label, "") if by_label else ""
            if sample.name == f"{name}_sum":
                sums[key] = sums.get(key, 0.0) + sample.value
            elif sample.name == f"{name}_count":
                counts[key] = counts.get(key, 0.0) + sample.value
    return {k: Totals(sums.get(k, 0.0), counts.get(k, 0.0)) for k in sums.keys() | counts.keys()}


def window_means_ms(before: str, after: str, scheduler: str) -> dict[str, float]:
    """What the scheduler's histograms say about the window between two scrapes:
    the mean algorithm and attempt durations (ms; the attempt includes the bind, for
    both schedulers), how many attempts were observed, and each extension point's time
    per attempt (`ext:<ExtensionPoint>`, ms)."""
    names = HISTOGRAMS.get(scheduler)
    if names is None:
        return {}
    out: dict[str, float] = {}
    attempts = 0.0
    for figure in ("algorithm", "attempt"):
        grew = _delta(before, after, names[figure], None).get("", Totals())
        if grew.count:  # none in the window: no mean (the report shows "–", not 0)
            out[f"{figure}_ms"] = round(grew.sum * 1000 / grew.count, 3)
        out[f"{figure}_observations"] = grew.count
        if figure == "attempt":
            attempts = grew.count
    if attempts:
        for point, grew in sorted(_delta(before, after, names["extension_point"],
                                         "extension_point").items()):
            out[f"ext:{point}_ms"] = round(grew.sum * 1000 / attempts, 3)
    return out


def _delta(before: str, after: str, name: str, by_label: str | None) -> dict[str, Totals]:
    old = histogram_totals(before, name, by_label)
    new = histogram_totals(after, name, by_label)
    return {k: v - old.get(k, Totals()) for k, v in new.items()}


def fetch_metrics(url: str, timeout: float = 10.0) -> str:
    """GET a /metrics page. kube-scheduler serves it over HTTPS with a certificate it
    generated in memory; on loopback the benchmark reads it without verifying."""
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(url, timeout=timeout, context=insecure) as reply:
        return reply.read().decode("utf-8", "replace")  # type: ignore[no-any-return]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0
