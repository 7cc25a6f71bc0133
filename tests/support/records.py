"""The JSON round trip every report's test asks for (tests/validation/ and tests/explain/ share it)."""

from __future__ import annotations

import json


def round_trip(report, report_type, *, renders_the_same: bool = False):
    """Assert the report read from its JSON writes the same JSON (text, compact text and dict, keys in order),
    reads back again as an equal object, and renders (as the report does, with ``renders_the_same``);
    return it."""
    text = report.to_json()
    read = report_type.from_json(text)
    assert type(read) is report_type
    assert read.to_json() == text
    assert read.to_json(indent=None) == report.to_json(indent=None)
    assert read.to_dict() == report.to_dict()
    assert json.dumps(read.to_dict()) == json.dumps(report.to_dict())  # nested keys in the same order too
    assert report_type.from_json(read.to_json()) == read
    assert report_type.from_dict(json.loads(text)) == read
    assert str(read)  # the rich rendering works on what was read
    if renders_the_same:
        assert str(read) == str(report)
    return read
