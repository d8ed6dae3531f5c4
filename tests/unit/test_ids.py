"""Handles, conversation ids and message ids: uppercase version-4 UUIDs, made in batches."""

from __future__ import annotations

import os
import uuid

import pytest

from sbroker.core import messages as m


def test_ids_are_distinct_uppercase_version_4_uuids() -> None:
    ids = [m.new_id() for _ in range(1000)]  # several batches
    assert len(set(ids)) == len(ids)
    for i in ids:
        u = uuid.UUID(i)
        assert (str(u).upper(), u.version, u.variant) == (i, 4, uuid.RFC_4122)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_reuse_the_ids_made_ahead() -> None:
    m.new_id()  # the batch is made
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, m.new_id().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 100).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert len(child) == 36
    assert child != m.new_id()
