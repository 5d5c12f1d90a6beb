"""A profile for tests of the binding side (Reserve, Permit, PreBind): kube-scheduler's
default plugins make the decision, the test's own plugins act after it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from policyd.config.plugins import default_framework
from policyd.framework.runtime import Framework


def default_profile_with(*, reserve: Sequence[Any] = (), permit: Sequence[Any] = (),
                         pre_bind: Sequence[Any] = (), name: str = "policyd",
                         base: Framework | None = None) -> Framework:
    """`base` (default: the default profile) up to Score, with the given Reserve,
    Permit and PreBind plugins in place of its own."""
    base = base if base is not None else default_framework([])
    return Framework(name, queue_sort=base.queue_sort,
                     pre_filter=base.pre_filter_plugins, filter=base.filter_plugins,
                     pre_score=base.pre_score_plugins, score=base.score_plugins,
                     reserve=reserve, permit=permit, pre_bind=pre_bind)
