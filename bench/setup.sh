#!/usr/bin/env bash
# Installs, from nothing, what `python -m bench` needs: the Debian servers it starts by hand
# (RabbitMQ, PostgreSQL) and the `bench` extra in .venv, at constraints.txt's versions. Safe
# to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

if ! dpkg -s rabbitmq-server postgresql >/dev/null 2>&1; then
    $SUDO apt-get update -q
    # The packages try to start their services; without systemd that is refused, which is
    # fine: the suite starts its own servers on free loopback ports in temp dirs.
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q rabbitmq-server postgresql
fi

PY="${PY:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q -c constraints.txt -e '.[bench]'
.venv/bin/python -c 'import persistqueue, huey, litequeue, pika, psycopg, sbroker' \
    && echo "bench: ready. Run: .venv/bin/python -m bench [--quick]"
