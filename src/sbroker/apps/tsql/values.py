"""T-SQL values in Python: conversion to a declared type, text and bytes of message bodies,
and XML as the seeds use it (``CAST(... AS XML)``, ``.value(xpath, type)``,
``FOR XML PATH``)."""

from __future__ import annotations

import datetime as dt
import uuid
import xml.etree.ElementTree as ET
from decimal import Decimal
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from sbroker.apps.tsql.errors import BAD_DELAY, CONVERSION_FAILED, XML_PARSING, TSqlError

INTEGERS = ("INT", "BIGINT", "SMALLINT", "TINYINT", "BIT")
NUMERICS = ("DECIMAL", "NUMERIC", "MONEY", "SMALLMONEY")
FLOATS = ("FLOAT", "REAL")
TEXTS = ("CHAR", "VARCHAR", "NCHAR", "NVARCHAR", "SYSNAME", "TEXT", "NTEXT", "XML")
BINARIES = ("BINARY", "VARBINARY", "IMAGE")
TIMES = ("DATETIME", "DATETIME2", "SMALLDATETIME", "DATE", "DATETIMEOFFSET", "TIME")
KNOWN = (*INTEGERS, *NUMERICS, *FLOATS, *TEXTS, *BINARIES, *TIMES, "UNIQUEIDENTIFIER",
         "SQL_VARIANT")


def text_of(value: Any) -> str:
    """A value as T-SQL would show it as nvarchar (bytes as UTF-8 text)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, float) and value.is_integer():
        return repr(value)
    return str(value)


def convert(value: Any, type_name: str, length: str | None = None) -> Any:
    """``value`` converted to the T-SQL type ``type_name`` (None stays None)."""
    if value is None:
        return None
    name = type_name.upper()
    try:
        if name in INTEGERS:
            if isinstance(value, (bytes, bytearray)):
                return int.from_bytes(value, "big")
            number = int(float(value)) if isinstance(value, str) else int(value)
            return (1 if number else 0) if name == "BIT" else number
        if name in NUMERICS:
            return Decimal(text_of(value).strip())
        if name in FLOATS:
            return float(value)
        if name in TEXTS:
            text = text_of(value)
            if length is not None and length.isdigit():
                text = text[:int(length)]
            return text
        if name in BINARIES:
            return value.encode("utf-8") if isinstance(value, str) else bytes(value)
        if name == "UNIQUEIDENTIFIER":
            return str(uuid.UUID(text_of(value).strip())).upper()  # as SQL Server shows it
        if name in TIMES:
            return _time(value)
    except (ValueError, ArithmeticError) as exc:
        raise TSqlError(f"conversion failed when converting {text_of(value)!r} to {name}",
                        CONVERSION_FAILED) from exc
    return value


def _time(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date)):
        return value
    if isinstance(value, (int, float)):
        return dt.datetime.fromtimestamp(float(value), dt.UTC).replace(tzinfo=None)
    return dt.datetime.fromisoformat(text_of(value).strip())


def delay_seconds(value: Any) -> float:
    """'hh:mm:ss[.fff]' (WAITFOR DELAY) as seconds."""
    parts = text_of(value).strip().split(":")
    try:
        if len(parts) > 3:
            raise ValueError(value)
        seconds = 0.0
        for part in parts:
            seconds = seconds * 60 + float(part)
    except ValueError as exc:
        raise TSqlError(f"WAITFOR DELAY needs 'hh:mm:ss[.fff]', not {text_of(value)!r}",
                        BAD_DELAY) from exc
    return seconds


def xml_value(document: Any, xpath: str, type_name: str) -> Any:
    """``@x.value('(/a/b/@attr)[1]', 'type')``: the first node's text (or attribute)."""
    if document is None:
        return None
    try:
        root = ET.fromstring(text_of(document))
    except ET.ParseError as exc:
        raise TSqlError(f"XML parsing: {exc}", XML_PARSING) from exc
    path = xpath.strip()
    index = 1
    if path.startswith("(") and ")[" in path and path.endswith("]"):
        inner, _, position = path[1:-1].rpartition(")[")
        path, index = inner, int(position)
    steps = [s for s in path.split("/") if s]
    attribute = steps.pop()[1:] if steps and steps[-1].startswith("@") else None
    text_node = bool(steps) and steps[-1] == "text()"
    if text_node:
        steps.pop()
    if not steps or steps[0] != root.tag:
        return None
    nodes = [root]
    for step in steps[1:]:
        nodes = [child for node in nodes for child in node if child.tag == step]
    values = [node.get(attribute) if attribute else "".join(node.itertext()) for node in nodes]
    values = [v for v in values if v is not None]
    if len(values) < index:
        return None
    base, _, rest = type_name.partition("(")
    return convert(values[index - 1], base.strip(), rest.rstrip(")") or None)


def for_xml_path(element: str, rows: list[list[tuple[str | None, Any]]]) -> str:
    """FOR XML PATH('element'): one element per row; ``[@name]`` columns are attributes,
    other named columns child elements, unnamed ones text."""
    out = []
    for row in rows:
        attrs = []
        body = []
        for name, value in row:
            if value is None:
                continue
            text = text_of(value)
            if name and name.startswith("@"):
                attrs.append(f" {name[1:]}={quoteattr(text)}")
            elif name:
                body.append(f"<{name}>{escape(text)}</{name}>")
            else:
                body.append(escape(text))
        inner = "".join(body)
        tag = "".join(attrs)
        out.append(f"<{element}{tag}>{inner}</{element}>" if inner else f"<{element}{tag}/>")
    return "".join(out)
