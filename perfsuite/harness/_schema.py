"""The results document's JSON Schema checked with the standard library (jsonschema out of the core).

Only the keywords ``results.schema.json`` uses (``type``, ``enum``, ``const``, ``required``, ``properties``,
``additionalProperties``, ``minProperties``, ``items``, ``oneOf``, ``minimum``, ``exclusiveMinimum``,
``minLength``, ``pattern`` and local ``$ref``); an unknown keyword is an error, so the schema cannot grow past
this checker unseen. With the ``validate`` extra installed, :func:`validate_results` uses jsonschema itself;
tests/harness/test_schema.py holds both to the same verdicts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["first_error"]

_ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "title", "description"})
_KNOWN = _ANNOTATIONS | {"type", "enum", "const", "required", "properties", "additionalProperties",
                         "minProperties", "items", "oneOf", "minimum", "exclusiveMinimum", "minLength", "pattern",
                         "$ref"}
_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}


def first_error(document: Any, schema: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(where, message)`` of the first place ``document`` breaks ``schema``, or None when it matches."""
    return _check(document, schema, schema, ())


def _check(value: Any, schema: Mapping[str, Any], root: Mapping[str, Any],
           path: tuple[str, ...]) -> tuple[str, str] | None:
    unknown = set(schema) - _KNOWN
    if unknown:
        raise ValueError(f"results schema keyword(s) {sorted(unknown)} not supported by the stdlib checker")
    where = "/".join(path) or "(root)"
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        found = _check(value, target, root, path)
        if found:
            return found
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_TYPES[t](value) for t in types):
            return where, f"{value!r:.60} is not of type {' or '.join(repr(t) for t in types)}"
    if "enum" in schema and value not in schema["enum"]:
        return where, f"{value!r:.60} is not one of {schema['enum']!r}"
    if "const" in schema and value != schema["const"]:
        return where, f"{schema['const']!r} was expected"
    if "oneOf" in schema:
        matches = sum(_check(value, sub, root, path) is None for sub in schema["oneOf"])
        if matches != 1:
            return where, f"{value!r:.60} matches {matches} of the {len(schema['oneOf'])} allowed shapes, not one"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return where, f"{value!r} is less than the minimum of {schema['minimum']}"
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            return where, f"{value!r} is less than or equal to the minimum of {schema['exclusiveMinimum']}"
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            return where, f"{value!r} is too short"
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return where, f"{value!r} does not match {schema['pattern']!r}"
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            found = _check(item, schema["items"], root, (*path, str(index)))
            if found:
                return found
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                return where, f"{key!r} is a required property"
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            return where, f"{value!r:.60} should be non-empty"
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                found = _check(item, properties[key], root, (*path, key))
            elif extra is False:
                return where, f"additional property {key!r} is not allowed"
            elif isinstance(extra, Mapping):
                found = _check(item, extra, root, (*path, key))
            else:
                found = None
            if found:
                return found
    return None
