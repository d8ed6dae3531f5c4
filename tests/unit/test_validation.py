"""Message body validation: none, empty, well-formed XML, well-formed JSON, JSON Schema."""

from __future__ import annotations

import pytest

from sbroker import InvalidArgumentError
from sbroker.core.validation import make_validator, normalize


def check(validation: object, body: bytes) -> str | None:
    kind, schema = normalize(validation)
    return make_validator(kind, schema)(body)


def test_none_accepts_anything() -> None:
    assert check("none", b"\x00\xff not text") is None


def test_empty_accepts_only_an_empty_body() -> None:
    assert check("empty", b"") is None
    assert "empty" in (check("empty", b"x") or "")


def test_xml_must_be_well_formed() -> None:
    assert check("well_formed_xml", b"<a><b/></a>") is None
    assert "XML" in (check("well_formed_xml", b"<a><b></a>") or "")


def test_json_must_be_well_formed() -> None:
    assert check("well_formed_json", b'{"a": [1, 2]}') is None
    assert "JSON" in (check("well_formed_json", b"{a: 1}") or "")
    assert check("well_formed_json", b"\xff") is not None


def test_json_schema_checks_structure() -> None:
    schema = {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}
    assert check(schema, b'{"id": 3}') is None
    assert "id" in (check(schema, b'{"name": "x"}') or "")
    assert check(schema, b"not json") is not None


@pytest.mark.parametrize("bad", ["xml", 3, None, {"type": "no-such-type"}])
def test_unknown_validation_is_a_clear_error(bad: object) -> None:
    with pytest.raises(InvalidArgumentError):
        normalize(bad)
