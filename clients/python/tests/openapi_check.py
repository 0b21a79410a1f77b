"""Checks what the Python client reads against an OpenAPI document: every operation in
``ephemail.client.OPERATIONS`` (method, path, success status, the path into its body, the type read
there) and every field of every model (present in the component, required, of the same JSON type and
nullability). Returns the problems found, one line each; ``tests/test_contract.py`` runs it on the live
document."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Set, Tuple, Union

from ephemail.client import ERROR_FIELDS, OPERATIONS, RETRY_AFTER
from ephemail.models import MODELS, wire_fields

Schema = Dict[str, Any]


class Checker:
    def __init__(self, doc: Schema) -> None:
        self.doc = doc
        self.problems: List[str] = []

    # -- schema navigation -----------------------------------------------------------------

    def resolve(self, schema: Schema) -> Schema:
        seen = 0
        while isinstance(schema, dict) and "$ref" in schema:
            ref = schema["$ref"]
            assert ref.startswith("#/"), ref
            node: Any = self.doc
            for part in ref[2:].split("/"):
                node = node[part]
            schema = node
            seen += 1
            assert seen < 20, f"$ref loop at {ref}"
        return schema

    def alternatives(self, schema: Schema) -> List[Schema]:
        """The schema's alternatives (anyOf/oneOf flattened, $refs resolved)."""
        s = self.resolve(schema)
        for key in ("anyOf", "oneOf"):
            if key in s:
                return [a for sub in s[key] for a in self.alternatives(sub)]
        return [s]

    def types(self, schema: Schema) -> Set[str]:
        out: Set[str] = set()
        for alt in self.alternatives(schema):
            t = alt.get("type")
            if isinstance(t, list):
                out.update(t)
            elif isinstance(t, str):
                out.add(t)
            elif "const" in alt and alt["const"] is None:
                out.add("null")
            elif "properties" in alt:
                out.add("object")
            else:
                out.add("any")
        return out

    def ref_names(self, schema: Schema) -> Set[str]:
        s = schema
        names: Set[str] = set()
        if isinstance(s, dict) and "$ref" in s:
            names.add(s["$ref"].rsplit("/", 1)[-1])
        for key in ("anyOf", "oneOf"):
            for sub in (s.get(key) or []) if isinstance(s, dict) else []:
                names |= self.ref_names(sub)
        return names

    def step(self, schema: Schema, name: str, where: str) -> Optional[Schema]:
        """The property ``name`` of an object schema (which must list it as required)."""
        objects = [a for a in self.alternatives(schema) if a.get("type") == "object" or "properties" in a]
        if not objects:
            self.problems.append(f"{where}: not an object in the contract, so it has no field {name!r}")
            return None
        obj = objects[0]
        props = obj.get("properties") or {}
        if name not in props:
            self.problems.append(f"{where}: the contract has no field {name!r} (fields: {', '.join(sorted(props)) or 'none'})")
            return None
        if name not in (obj.get("required") or []):
            self.problems.append(f"{where}: the field {name!r} is not required in the contract, but the client reads it")
        prop: Schema = props[name]
        return prop

    # -- the client's expectations -------------------------------------------------------------

    def expect_type(self, schema: Schema, hint: Any, where: str) -> None:
        """``schema`` must carry exactly the JSON types (and nullability) the client's ``hint`` reads."""
        origin = getattr(hint, "__origin__", None)
        args = tuple(getattr(hint, "__args__", ()))
        nullable = origin is Union and type(None) in args
        if nullable:
            (hint,) = [a for a in args if a is not type(None)]
            origin = getattr(hint, "__origin__", None)
            args = tuple(getattr(hint, "__args__", ()))
        have = self.types(schema)
        if "any" in have:
            self.problems.append(f"{where}: the contract gives no type here")
            return
        if origin in (list, List):
            want = {"array"}
        elif dataclasses.is_dataclass(hint):
            want = {"object"}
        else:
            want = {{str: "string", int: "integer", bool: "boolean", bytes: "string"}[hint]}
        if nullable:
            want = want | {"null"}
        if have != want:
            self.problems.append(f"{where}: the contract says {sorted(have)}, the client reads {sorted(want)}")
            return
        if origin in (list, List):
            arrays = [a for a in self.alternatives(schema) if a.get("type") == "array"]
            self.expect_type(arrays[0].get("items", {}), args[0], f"{where}[]")
        elif dataclasses.is_dataclass(hint):
            name = getattr(hint, "SCHEMA")
            if name not in self.ref_names(schema) and name not in self.ref_names(self.resolve(schema)):
                self.problems.append(f"{where}: the client reads a {name} here, the contract has {sorted(self.ref_names(schema)) or 'an inline object'}")

    def model(self, cls: type) -> None:
        name = getattr(cls, "SCHEMA")
        schema = (self.doc.get("components", {}).get("schemas", {})).get(name)
        if schema is None:
            self.problems.append(f"components.schemas.{name}: missing from the contract (read by {cls.__name__})")
            return
        for field, hint in wire_fields(cls).items():
            prop = self.step(schema, field, name)
            if prop is not None:
                self.expect_type(prop, hint, f"{name}.{field}")

    def operation(self, key: str) -> None:
        op = OPERATIONS[key]
        where = f"{op.method} {op.path}"
        item = self.doc.get("paths", {}).get(op.path)
        if item is None:
            self.problems.append(f"{where}: the contract has no such path (client operation {key})")
            return
        spec = item.get(op.method.lower())
        if spec is None:
            self.problems.append(f"{where}: the contract has no {op.method} on this path (client operation {key})")
            return
        responses = spec.get("responses", {})
        res = responses.get(str(op.status))
        if res is None:
            self.problems.append(f"{where}: the contract declares no {op.status} answer (it has {', '.join(sorted(responses))})")
            return
        content = self.resolve(res).get("content", {})
        if op.result is bytes:
            if "application/json" in content and len(content) == 1:
                self.problems.append(f"{where}: the client reads raw bytes, the contract answers JSON")
            return
        media = content.get("application/json")
        if media is None:
            self.problems.append(f"{where} {op.status}: no application/json body in the contract")
            return
        schema: Optional[Schema] = media.get("schema", {})
        for i, step in enumerate(op.pointer):
            assert schema is not None
            schema = self.step(schema, step, f"{where} {op.status} {'.'.join(op.pointer[:i]) or 'body'}")
            if schema is None:
                return
        assert schema is not None
        self.expect_type(schema, op.result, f"{where} {op.status} {'.'.join(op.pointer)}")
        # the error envelope of every error answer, and retry-after on 429
        for status, err in responses.items():
            if not status.startswith(("4", "5")):
                continue
            err = self.resolve(err)
            body = err.get("content", {}).get("application/json", {}).get("schema")
            if body is None:
                self.problems.append(f"{where} {status}: no JSON error body in the contract")
                continue
            for pointer in ERROR_FIELDS:
                s: Optional[Schema] = body
                for j, name in enumerate(pointer):
                    s = self.step(s, name, f"{where} {status} {'.'.join(pointer[:j]) or 'body'}") if s is not None else None
            if status == "429" and RETRY_AFTER not in (err.get("headers") or {}):
                self.problems.append(f"{where} 429: the contract declares no {RETRY_AFTER} header, which the client honours")


def check(doc: Schema) -> List[str]:
    """Every mismatch between the client and ``doc``, one line each (empty: they agree)."""
    c = Checker(doc)
    for cls in MODELS:
        c.model(cls)
    for key in OPERATIONS:
        c.operation(key)
    return c.problems


def summary(problems: List[str]) -> str:
    return "the Python client reads what the OpenAPI document does not promise:\n  " + "\n  ".join(problems)


def without_field(doc: Schema, component: str, field: str) -> Tuple[Schema, Schema]:
    """A copy of ``doc`` with ``field`` removed from a component (for the checker's own test)."""
    import copy

    broken = copy.deepcopy(doc)
    schema = broken["components"]["schemas"][component]
    del schema["properties"][field]
    schema["required"] = [r for r in schema.get("required", []) if r != field]
    return broken, schema
