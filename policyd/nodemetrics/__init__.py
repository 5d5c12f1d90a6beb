"""Node metrics for scoring: values refreshed in the background, read by Score.

Scoring by live facts (network latency, load) must not do I/O per node per pod, so the
facts live in a local `MetricsCache` (metric -> node -> (value, timestamp)) that
providers declared in the profile's `metricsProviders` refresh on their own threads;
policy `metric` score rules only read it. Offline, `policyd explain/simulate --metrics
FILE` reads fixed values from a file instead (`StaticMetrics`).

Import cost matters for `policyd lint`: this package imports neither the Kubernetes
client nor the engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from policyd.nodemetrics.cache import (
    EMPTY,
    MetricsCache,
    MetricSnapshot,
    MetricsReader,
    StaticMetrics,
)


class MetricsFileError(ValueError):
    """A --metrics file that cannot be used; the message says where and why."""


def load_metrics_file(path: Path) -> StaticMetrics:
    """Values from a YAML or JSON file shaped `metric: {node: value}`."""
    from policyd.model.spelling import show_value
    from policyd.nodemetrics.values import clean_value
    from policyd.sourcefile import load_file

    source = load_file(path)
    errors = [p for p in source.problems if p.level == "error"]
    if errors:
        p = errors[0]
        raise MetricsFileError(f"{p.file}:{p.line}:{p.column}: {p.message}")
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


def _plugins(frameworks: Iterable[Any]) -> Iterable[Any]:
    for fw in frameworks:
        for wp in getattr(fw, "score_plugins", ()):
            yield getattr(wp, "plugin", wp)


def attach_metrics(frameworks: Iterable[Any], reader: MetricsReader) -> int:
    """Point every compiled policy with `metric` rules in `frameworks` at `reader`;
    returns how many policies were attached."""
    n = 0
    seen: set[int] = set()
    for plugin in _plugins(frameworks):
        use = getattr(plugin, "use_metrics", None)
        wants = tuple(getattr(plugin, "metric_names", ()))
        if use is not None and id(plugin) not in seen and wants:
            seen.add(id(plugin))
            use(reader)
            n += 1
    return n


__all__ = ["EMPTY", "MetricSnapshot", "MetricsCache", "MetricsFileError", "MetricsReader",
           "StaticMetrics", "attach_metrics", "load_metrics_file"]
