"""The façade's declaration notations (issue #52): a schema written as a TypeScript type
(`kit/openapi.ts`), a request field on one line (`kit/fields.row`), a shape's properties as one
text (`kit/shapes.Shape`); each reads as what it replaced and refuses what it cannot read."""

from __future__ import annotations

import pytest
from mlx_responses.http_facade.kit.fields import Field, row
from mlx_responses.http_facade.kit.openapi import nullable, ref, ts
from mlx_responses.http_facade.kit.shapes import (
    FLAG,
    NO_DEFAULT,
    OPTIONAL,
    REQUIRED,
    TEXT,
    TYPED,
    Prop,
    Shape,
)

from mlx_responses.v1 import responses_pb2 as pb


def test_a_typescript_type_reads_as_its_json_schema() -> None:
    extra = {"type": "string", "minLength": 1}
    schema = ts(
        "{id: string, kind: 'a' | 'b' | null, tags?: E[], note: string|null, n?: ?integer,"
        " map: {[k]: number}, next: $Item | {flag: true}}",
        E=extra,
    )
    assert schema == {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "kind": {"enum": ["a", "b", None]},
            "tags": {"type": "array", "items": extra},
            "note": {"type": ["string", "null"]},
            "n": nullable({"type": "integer"}),
            "map": {"type": "object", "additionalProperties": {"type": "number"}},
            "next": {
                "anyOf": [
                    ref("Item"),
                    {
                        "type": "object",
                        "properties": {"flag": {"const": True}},
                        "required": ["flag"],
                    },
                ]
            },
        },
        "required": ["id", "kind", "note", "map", "next"],
    }


@pytest.mark.parametrize("text", ["{a: string", "string string", "{a string}", "(string", "{: x}"])
def test_a_type_it_cannot_read_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        ts(text)


def test_a_field_row_reads_as_the_field_it_declares() -> None:
    shape = {"const": "x"}
    assert row("top_k: integer 0..7 core int32 -> | Sample.", S=shape) == Field(
        "top_k", "integer", "Sample.", "top_k", 0, 7, checked=False, limit=2**31 - 1
    )
    assert row("max_tokens!: integer 1.. ->max_output_tokens | Cap.") == Field(
        "max_tokens", "integer", "Cap.", "max_output_tokens", minimum=1, required=True
    )
    assert row("t: string = S", S=shape) == Field("t", "string", schema=shape)
    assert row("p: number -2..0.5 core") == Field("p", "number", "", None, -2, 0.5, checked=False)


def test_a_shape_text_declares_presence_targets_and_defaults() -> None:
    shape = Shape(
        "x",
        pb.FunctionCallItem,
        "call_id: text, name?: text, arguments!: text = '', namespace!: text, status?: F -> _,"
        " id?: flag -> *",
        F=FLAG,
    )
    assert shape.props == {
        "call_id": Prop(TEXT, REQUIRED, "", NO_DEFAULT),
        "name": Prop(TEXT, OPTIONAL, "", NO_DEFAULT),
        "arguments": Prop(TEXT, TYPED, "", ""),
        "namespace": Prop(TEXT, TYPED, "", NO_DEFAULT),
        "status": Prop(FLAG, OPTIONAL, None, NO_DEFAULT),
        "id": Prop(FLAG, OPTIONAL, "*", NO_DEFAULT),
    }
    with pytest.raises(ValueError, match="not a property"):
        Shape(None, pb.FunctionCallItem, "name text")
