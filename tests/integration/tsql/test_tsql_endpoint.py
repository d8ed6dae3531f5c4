"""CREATE / ALTER / DROP ENDPOINT ... FOR SERVICE_BROKER in T-SQL: the broker endpoint kept in
the database (both backends), and two brokers that talk over endpoints created in T-SQL
(SQLite, loopback only)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import sbroker
from sbroker.apps.tsql import TSqlError
from sbroker.apps.tsql.statements.endpoint import SECRET_VARIABLE

Run = Callable[..., list[list[dict[str, Any]]]]

CREATE = """
create endpoint BrokerEndpoint authorization sa
    state = {state}
    as tcp (listener_port = {port}, listener_ip = (127.0.0.1))
    for service_broker (authentication = certificate BrokerCert,
                        encryption = supported algorithm aes rc4
                        message_forwarding = enabled, message_forward_size = 20)
"""


def test_the_endpoint_is_kept_in_the_database(tsql: Run, broker: sbroker.Broker,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_VARIABLE, "shared")
    tsql(CREATE.format(state="stopped", port=4999))
    cfg = broker.network.endpoint()
    assert cfg is not None
    assert (cfg.name, cfg.state, cfg.host, cfg.port, cfg.secret, cfg.encryption,
            cfg.message_forwarding, cfg.message_forward_size) == (
        "BrokerEndpoint", "stopped", "127.0.0.1", 4999, "shared", "supported", True, 20)
    tsql("alter endpoint BrokerEndpoint as tcp (listener_ip = all)"
         " for service_broker (encryption = disabled, message_forwarding = disabled)")
    cfg = broker.network.endpoint()
    assert cfg is not None
    assert (cfg.host, cfg.port, cfg.encryption, cfg.message_forwarding) == (
        "0.0.0.0", 4999, "disabled", False)
    with pytest.raises(TSqlError, match="Msg 7862.*Only one endpoint"):
        tsql(CREATE.format(state="stopped", port=5000))
    with pytest.raises(TSqlError, match="Msg 15151.*Cannot drop the endpoint 'Other'"):
        tsql("drop endpoint Other")
    [[sb], [tcp]] = tsql("select name, state_desc, is_message_forwarding_enabled as fwd,"
                         " message_forwarding_size as size, encryption_algorithm_desc as alg"
                         " from sys.service_broker_endpoints"
                         " select name, port, ip_address from sys.tcp_endpoints")
    assert sb == {"name": "BrokerEndpoint", "state_desc": "STOPPED", "fwd": 0, "size": 20,
                  "alg": "NONE"}
    assert tcp == {"name": "BrokerEndpoint", "port": 4999, "ip_address": "0.0.0.0"}
    tsql("drop endpoint BrokerEndpoint")
    assert broker.network.endpoint() is None
    assert tsql("if not exists (select * from sys.service_broker_endpoints)"
                " select 'none' as endpoint") == [[{"endpoint": "none"}]]


def test_what_is_refused(tsql: Run, broker: sbroker.Broker,
                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_VARIABLE, raising=False)
    with pytest.raises(TSqlError, match="WINDOWS is not supported"):
        tsql("create endpoint E as tcp (listener_port = 4022)"
             " for service_broker (authentication = windows negotiate)")
    with pytest.raises(TSqlError, match=f"cannot start.*{SECRET_VARIABLE}"):
        tsql(CREATE.format(state="started", port=4022))
    with pytest.raises(TSqlError, match="ENDPOINT FOR DATABASE_MIRRORING is not supported"):
        tsql("create endpoint E as tcp (listener_port = 5022) for database_mirroring (role = all)")
    with pytest.raises(TSqlError, match="LISTENER_PORT = 70000 is not a TCP port"):
        tsql("create endpoint E as tcp (listener_port = 70000) for service_broker ()")
    with pytest.raises(TSqlError, match="Cannot alter the endpoint 'E'"):
        tsql("alter endpoint E state = started")
    assert broker.network.endpoint() is None


@pytest.fixture
def pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[
        tuple[sbroker.Broker, sbroker.Broker]]:
    monkeypatch.setenv(SECRET_VARIABLE, "the brokers' secret")
    a = sbroker.Broker.open(tmp_path / "a.db")
    b = sbroker.Broker.open(tmp_path / "b.db")
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def test_two_brokers_talk_over_endpoints_made_in_tsql(
        pair: tuple[sbroker.Broker, sbroker.Broker]) -> None:
    a, b = pair
    a.start()  # already running: the endpoint created next starts at once
    a.execute_tsql(CREATE.format(state="started", port=0))
    b.execute_tsql(CREATE.format(state="stopped", port=0))
    b.start()
    assert b.network.address is None  # STOPPED: defined, not listening
    b.execute_tsql("alter endpoint BrokerEndpoint state = started")
    assert a.network.address is not None and b.network.address is not None
    pa, pb = a.network.address[1], b.network.address[1]
    a.execute_tsql(f"""create queue QA create service SvcA on queue QA
        create route ToB with service_name = 'SvcB', address = 'TCP://127.0.0.1:{pb}'""")
    b.execute_tsql(f"""create queue QB create service SvcB on queue QB ([DEFAULT])
        create route ToA with service_name = 'SvcA', address = 'TCP://127.0.0.1:{pa}'""")
    a.execute_tsql("""declare @h uniqueidentifier
        begin dialog @h from service SvcA to service 'SvcB' on contract [DEFAULT]
        send on conversation @h (N'over the wire')""")
    [[got]] = b.execute_tsql("""waitfor (receive cast(message_body as nvarchar(100)) as body,
        conversation_handle from QB), timeout 30000""")
    assert got["body"] == "over the wire"
    b.execute_tsql(f"end conversation '{got['conversation_handle']}'")
    [[end]] = a.execute_tsql("""waitfor (receive message_type_name from QA), timeout 30000""")
    assert end["message_type_name"].endswith("/EndDialog")
