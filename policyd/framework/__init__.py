"""The scheduling framework: statuses, cycle state, plugin protocols and the runner.

Shaped like kube-scheduler's framework so that its plugins, reasons and score
arithmetic carry over one to one; compiled policies are plugins like the built-ins.
"""

from policyd.framework.cycle_state import CycleState
from policyd.framework.interfaces import (
    ColumnarFilterPlugin,
    ColumnarNormalizePlugin,
    ColumnarScorePlugin,
    FilterPlugin,
    NormalizeScorePlugin,
    Plugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ScoreBreakdownPlugin,
    ScorePlugin,
)
from policyd.framework.runtime import MAX_NODE_SCORE, MIN_NODE_SCORE
from policyd.framework.status import Code, PluginError, Status

__all__ = [
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "Code",
    "ColumnarFilterPlugin",
    "ColumnarNormalizePlugin",
    "ColumnarScorePlugin",
    "CycleState",
    "FilterPlugin",
    "NormalizeScorePlugin",
    "Plugin",
    "PluginError",
    "PreFilterPlugin",
    "PreScorePlugin",
    "QueueSortPlugin",
    "ScoreBreakdownPlugin",
    "ScorePlugin",
    "Status",
]
