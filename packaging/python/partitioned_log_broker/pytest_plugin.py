"""pytest plugin: the `kafka_broker` fixture, a fresh broker on a free port, stopped at the end.

One broker per session by default; `kafka_broker_scope = function` in the ini file (or
`-o kafka_broker_scope=function`) gives each test its own.
"""
import pytest

from . import start_broker


def pytest_addoption(parser):
    parser.addini("kafka_broker_scope", "scope of the kafka_broker fixture: session (default), "
                  "module or function", default="session")


def _scope(fixture_name, config):
    return config.getini("kafka_broker_scope")


@pytest.fixture(scope=_scope)
def kafka_broker():
    """A running broker: `.bootstrap` (HOST:PORT) for any Kafka client, `.client(...)` for the
    CLI's checks (`groups wait`, `groups lag`, `check order`)."""
    with start_broker() as broker:
        yield broker
