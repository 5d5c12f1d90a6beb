"""Port picking: distinct, bindable loopback ports; busy ports are recognised."""

from __future__ import annotations

import socket

import pytest

from policyd.devcluster.ports import LOOPBACK, free_ports, port_is_free


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = free_ports(5)
    assert len(set(ports)) == 5
    for port in ports:
        assert 1024 <= port <= 65535
        assert port_is_free(port)


def test_zero_ports_and_negative_count() -> None:
    assert free_ports(0) == []
    with pytest.raises(ValueError):
        free_ports(-1)


def test_listening_port_is_busy() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        sock.listen()
        assert not port_is_free(sock.getsockname()[1])
