"""Node metrics for scoring: values refreshed in the background, read by Score.

Scoring by live facts (network latency, load) must not do I/O per node per pod, so the
facts live in a local `MetricsCache` (metric -> node -> (value, timestamp),
`policyd.model.node_metrics`) that providers declared in the profile's
`metricsProviders` refresh on their own threads; policy `metric` score rules only read
it. Offline, `policyd explain/simulate --metrics FILE` reads fixed values from a file
instead (`StaticMetrics`).

Import cost matters for the offline commands: this package imports neither the Kubernetes
client nor the engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

from policyd.framework.runtime import Framework
from policyd.model.node_metrics import (
    EMPTY,
    MetricsCache,
    MetricSnapshot,
    MetricsReader,
    StaticMetrics,
)
from policyd.model.spelling import show_value
from policyd.nodemetrics.values import clean_value
from policyd.problems import format_problem
from policyd.sourcefile import load_file


class MetricsFileError(ValueError):
    """A --metrics file that cannot be used; the message says where and why."""


def load_metrics_file(path: Path) -> StaticMetrics:
    """Values from a YAML or JSON file shaped `metric: {node: value}`."""
    source = load_file(path)
    errors = [p for p in source.problems if p.level == "error"]
    if errors:
        raise MetricsFileError(format_problem(errors[0], with_level=False))
    if len(source.documents) != 1:
        raise MetricsFileError(f"{path}: expected one document (metric -> node -> value), "
                               f"found {len(source.documents)}")
    doc = source.documents[0]
    data = doc.data
    if not isinstance(data, Mapping):
        raise MetricsFileError(f"{path}: expected a mapping of metric -> node -> value")
    out: dict[str, dict[str, float]] = {}
    for metric, nodes in data.items():
        line, col = doc.position((metric,), key=True)
        if not isinstance(metric, str) or not isinstance(nodes, Mapping):
            raise MetricsFileError(f"{path}:{line}:{col}: {metric!r} must map node names to "
                                   "numbers")
        out[metric] = {}
        for node, raw in nodes.items():
            value, reason = clean_value(raw, allow_negative=True)
            if value is None:
                line, col = doc.position((metric, node))
                raise MetricsFileError(f"{path}:{line}:{col}: value of {metric}/{node} is "
                                       f"not a finite number ({reason}): {show_value(raw)}")
            out[metric][str(node)] = value
    return StaticMetrics(out)


@runtime_checkable
class UsesNodeMetrics(Protocol):
    """A plugin whose score rules read node metrics (a compiled policy with `metric`
    rules): the metrics it reads, and where to read them from."""

    @property
    def metric_names(self) -> tuple[str, ...]: ...

    def use_metrics(self, reader: MetricsReader) -> None: ...


def _plugins(fw: Framework) -> Iterator[object]:
    yield from fw.pre_filter_plugins
    yield from fw.filter_plugins
    yield from fw.pre_score_plugins
    yield from (wp.plugin for wp in fw.score_plugins)


def attach_metrics(frameworks: Iterable[Framework], reader: MetricsReader) -> int:
    """Point every plugin in `frameworks` that reads node metrics at `reader`; returns
    how many were attached (a plugin in several profiles or extension points counts
    once)."""
    attached: set[int] = set()
    for fw in frameworks:
        for plugin in _plugins(fw):
            if (isinstance(plugin, UsesNodeMetrics) and id(plugin) not in attached
                    and plugin.metric_names):
                attached.add(id(plugin))
                plugin.use_metrics(reader)
    return len(attached)


__all__ = ["EMPTY", "MetricSnapshot", "MetricsCache", "MetricsFileError", "MetricsReader",
           "StaticMetrics", "UsesNodeMetrics", "attach_metrics", "load_metrics_file"]
