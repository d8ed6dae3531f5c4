"""Message body validation as a message type declares it: none, empty, XML, JSON, JSON Schema."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from typing import Any

from sbroker.core.errors import InvalidArgumentError

#: Values of ``Message.validation``: N none, E empty, X well-formed XML, J JSON / JSON Schema.
VALIDATION_CODES = {"none": "N", "empty": "E", "well_formed_xml": "X", "well_formed_json": "J"}


def normalize(validation: object) -> tuple[str, str | None]:
    """(kind, JSON schema text or None) for a ``create_message_type`` validation argument."""
    if isinstance(validation, str):
        if validation not in VALIDATION_CODES:
            raise InvalidArgumentError(
                f"unknown validation {validation!r}: use one of "
                f"{', '.join(sorted(VALIDATION_CODES))} or a JSON Schema dict"
            )
        return validation, None
    if isinstance(validation, Mapping):
        import jsonschema

        try:
            jsonschema.validators.validator_for(validation).check_schema(validation)
        except jsonschema.SchemaError as exc:
            raise InvalidArgumentError(f"invalid JSON Schema: {exc.message}") from None
        return "json_schema", json.dumps(validation, sort_keys=True)
    raise InvalidArgumentError(
        f"validation must be a string or a JSON Schema dict, not {type(validation).__name__}"
    )


def code_for(kind: str) -> str:
    return "J" if kind == "json_schema" else VALIDATION_CODES[kind]


def make_validator(kind: str, schema_text: str | None) -> Callable[[bytes], str | None]:
    """A function that returns None for a valid body, else a one-line reason."""
    if kind == "none":
        return lambda body: None
    if kind == "empty":
        return lambda body: None if not body else f"body must be empty, got {len(body)} bytes"
    if kind == "well_formed_xml":
        return _check_xml
    if kind == "well_formed_json":
        return _check_json
    if kind == "json_schema":
        import jsonschema

        assert schema_text is not None
        schema: Any = json.loads(schema_text)
        validator = jsonschema.validators.validator_for(schema)(schema)

        def check(body: bytes) -> str | None:
            reason = _check_json(body)
            if reason is not None:
                return reason
            error = jsonschema.exceptions.best_match(validator.iter_errors(json.loads(body)))
            return None if error is None else f"JSON Schema: {error.message}"

        return check
    raise InvalidArgumentError(f"unknown validation kind {kind!r}")


def _check_xml(body: bytes) -> str | None:
    if not body:
        return None  # SQL Server accepts an empty body for WELL_FORMED_XML
    try:
        ET.fromstring(body)
    except ET.ParseError as exc:
        return f"not well-formed XML: {exc}"
    return None


def _check_json(body: bytes) -> str | None:
    try:
        json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        return f"not well-formed JSON: {exc}"
    return None
