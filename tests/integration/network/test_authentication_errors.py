"""A peer that fails authentication is reported in words an operator can act on: which
address, and that the two endpoints' secrets differ (not an OpenSSL error code)."""

from __future__ import annotations

from pathlib import Path

import pytest

import sbroker

from .helpers import node, route, tq, wait_for


def _failure(a: sbroker.Broker) -> str:
    with a.transaction() as tx:
        tx.send(tx.begin_dialog("SvcA", "SvcB"), body="secret stuff")
    [status] = wait_for(lambda: [r["transmission_status"] for r in tq(a)
                                 if r["transmission_status"]], what="a failure status")
    return str(status)


@pytest.mark.parametrize("encryption", ["required", "supported"])
def test_a_wrong_secret_says_authentication_failed_and_the_secrets_differ(
        tmp_path: Path, nodes: list[sbroker.Broker], encryption: str) -> None:
    a = node(tmp_path, "a", services={"SvcA": []}, encryption=encryption)
    b = node(tmp_path, "b", services={"SvcB": ["DEFAULT"]}, secret="another secret",
             encryption=encryption)
    nodes += [a, b]
    route(a, "SvcB", b)
    status = _failure(a)
    assert status.startswith("authentication failed")
    assert "secrets differ" in status and "SSL" not in status
    assert b.network.address is not None and str(b.network.address[1]) in status
    # the accepting side shows the refused peer too, in the same words
    refused = wait_for(lambda: [r for r in b.view("dm_broker_connections")
                                if "secrets differ" in str(r["last_error"])],
                       what="the refused connection on the accepting side")
    assert refused[0]["is_accept"]


def test_a_peer_that_does_not_speak_tls_is_named_as_such(
        tmp_path: Path, nodes: list[sbroker.Broker]) -> None:
    a = node(tmp_path, "a", services={"SvcA": []}, encryption="required")
    b = node(tmp_path, "b", services={"SvcB": ["DEFAULT"]}, encryption="supported")
    nodes += [a, b]
    route(a, "SvcB", b)
    status = _failure(a)
    assert "encryption" in status and "SSL" not in status
