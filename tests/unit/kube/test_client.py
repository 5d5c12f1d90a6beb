"""What `KubeClient` puts on the wire through urllib3: the official client's credentials
and pool, our own request line, headers and JSON body (its request layers are bypassed).
A pool manager that is not urllib3's plain PoolManager (these recording ones, a proxy's)
keeps every call on urllib3; the keep-alive path is tested in test_http1.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
import urllib3

from policyd.kube.client import USER_AGENT, ApiError, ConnectionSettings, KubeClient


class Reply:
    def __init__(self, status: int, data: bytes) -> None:
        self.status, self.data, self.reason = status, data, ""
        self.headers: dict[str, str] = {}
        self.released = False

    def release_conn(self) -> None:
        self.released = True


class RecordingManager:
    """A PoolManager that records each request and answers with `reply`: without a
    proxy, requests go to the host's pool (recorded as the URL the pool was made for
    plus the request target it got); through a proxy, to the manager itself."""

    def __init__(self, reply: Reply, proxy: str | None = None) -> None:
        self.pools: dict[Any, Any] = {}
        self.reply = reply
        self.proxy = proxy
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.via: list[str] = []

    def urlopen(self, method: str, url: str, **kw: Any) -> Reply:
        self.calls.append((method, url, kw))
        self.via.append("manager")
        return self.reply

    def connection_from_url(self, url: str) -> RecordingPool:
        return RecordingPool(self, url)


class RecordingPool:
    def __init__(self, manager: RecordingManager, url: str) -> None:
        self.manager = manager
        self.origin = str(urllib3.util.parse_url(url)._replace(path=None))

    def urlopen(self, method: str, url: str, **kw: Any) -> Reply:
        assert url.startswith("/")  # a request target, not a URL
        assert (kw.pop("assert_same_host"), kw.pop("redirect")) == (False, False)
        self.manager.calls.append((method, self.origin + url, kw))
        self.manager.via.append("pool")
        return self.manager.reply


def _client(reply: Reply, token: str | None = "t0k", host: str = "https://api.example:6443",
            proxy: str | None = None) -> tuple[KubeClient, RecordingManager]:
    from kubernetes import client as k8s

    cfg = k8s.Configuration(host=host)
    if token is not None:
        cfg.api_key = {"authorization": token}
        cfg.api_key_prefix = {"authorization": "Bearer"}
    api = k8s.ApiClient(cfg)
    manager = RecordingManager(reply, proxy)
    api.rest_client.pool_manager = manager  # type: ignore[assignment]  # records, answers
    return KubeClient(api, ConnectionSettings(qps=-1, timeout=7.0, read_timeout=3.0)), manager


def test_a_post_carries_the_token_the_json_body_and_the_timeouts() -> None:
    client, manager = _client(Reply(201, b'{"kind": "Status", "status": "Success"}'))
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "uid": "ü"},
            "target": {"kind": "Node", "name": "n1"}}
    assert client.request("POST", "/api/v1/namespaces/ns/pods/p/binding",
                          body=body) == {"kind": "Status", "status": "Success"}
    [(method, url, kw)] = manager.calls
    assert (method, url) == ("POST", "https://api.example:6443/api/v1/namespaces/ns/pods/"
                                     "p/binding")
    assert kw["headers"] == {"User-Agent": USER_AGENT, "Accept": "application/json",
                             "Content-Type": "application/json",
                             "authorization": "Bearer t0k"}
    assert json.loads(kw["body"]) == body and isinstance(kw["body"], bytes)
    assert (kw["timeout"].connect_timeout, kw["timeout"].read_timeout) == (7.0, 3.0)
    assert kw["preload_content"] is False
    assert manager.reply.released
    assert manager.via == ["pool"]


def test_through_a_proxy_the_manager_gets_the_whole_url() -> None:
    client, manager = _client(Reply(200, b"{}"), proxy="http://proxy.example:3128")
    client.request("GET", "/api/v1/nodes", query={"limit": 5})
    assert [(m, url) for m, url, _ in manager.calls] == [
        ("GET", "https://api.example:6443/api/v1/nodes?limit=5")]
    assert manager.via == ["manager"]


def test_a_host_with_a_path_keeps_it_in_front_of_every_request() -> None:
    # A cluster behind a path-routing proxy (Rancher: https://host/k8s/clusters/c-1).
    client, manager = _client(Reply(200, b"{}"), host="https://rancher.example/k8s/c-1")
    client.request("GET", "/api/v1/nodes")
    client.request("GET", "/api/v1/pods", query={"watch": True})
    assert [url for _, url, _ in manager.calls] == [
        "https://rancher.example/k8s/c-1/api/v1/nodes",
        "https://rancher.example/k8s/c-1/api/v1/pods?watch=true"]
    assert manager.via == ["pool", "pool"]


def test_a_replaced_pool_manager_is_used_from_then_on() -> None:
    client, first = _client(Reply(200, b"{}"))
    client.request("GET", "/api/v1/nodes")
    second = RecordingManager(Reply(200, b"{}"))
    client._conn.api_client.rest_client.pool_manager = second
    client.request("GET", "/api/v1/nodes")
    assert (len(first.calls), len(second.calls)) == (1, 1)


def test_query_values_are_encoded_as_the_official_client_does() -> None:
    client, manager = _client(Reply(200, b"{}"), token=None)
    client.request("GET", "/api/v1/pods", query={
        "watch": True, "limit": 500, "continue": "a b/c+=", "labelSelector": None})
    [(method, url, kw)] = manager.calls
    assert (method, url) == ("GET", "https://api.example:6443/api/v1/pods?watch=true&"
                                    "limit=500&continue=a%20b/c%2B%3D")
    assert kw["body"] is None and "Content-Type" not in kw["headers"]
    assert "authorization" not in kw["headers"]  # no token: a client certificate


def test_a_strategic_merge_patch_keeps_its_content_type() -> None:
    client, manager = _client(Reply(200, b"{}"))
    client.request("PATCH", "/api/v1/namespaces/ns/pods/p/status", body={"status": {}},
                   content_type="application/strategic-merge-patch+json")
    assert manager.calls[0][2]["headers"]["Content-Type"] == \
        "application/strategic-merge-patch+json"


def test_an_error_reply_becomes_an_api_error_with_its_status() -> None:
    client, _ = _client(Reply(409, b'{"kind": "Status", "reason": "AlreadyExists", '
                                   b'"message": "pod p is already assigned"}'))
    with pytest.raises(ApiError) as caught:
        client.request("POST", "/api/v1/namespaces/ns/pods/p/binding", body={})
    assert (caught.value.status, caught.value.reason) == (409, "AlreadyExists")
    assert not caught.value.transient


def test_a_tls_failure_is_a_call_without_a_reply() -> None:
    client, manager = _client(Reply(200, b"{}"))

    def fail(*_: Any, **__: Any) -> Any:
        raise urllib3.exceptions.SSLError("EOF occurred in violation of protocol")

    manager.urlopen = fail  # type: ignore[method-assign]
    manager.connection_from_url = lambda url: manager  # type: ignore[assignment,method-assign,return-value]
    with pytest.raises(ApiError) as caught:
        client.request("GET", "/api/v1/nodes")
    assert caught.value.status == 0 and caught.value.transient
