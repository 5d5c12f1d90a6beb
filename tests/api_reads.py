"""Reads the integration tests make of the real API server."""

from __future__ import annotations

from typing import Any

from policyd.kube.client import ApiError, KubeClient


def get_or_none(kube: KubeClient, path: str) -> dict[str, Any] | None:
    """The object at `path`, or None when the server answers 404."""
    try:
        return kube.request("GET", path)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
