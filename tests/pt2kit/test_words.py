"""The floor's closed word sets: a member is its string everywhere a record or a repro may put it."""

import json
import pickle

import pytest

from minifier.unit.case import Boundary
from minifier.unit.check import Stage
from pt2kit.signature import KINDS, Kind, Signature

pytestmark = pytest.mark.matrix


def test_a_word_is_its_string_in_json_text_repr_hashes_and_pickles():
    for word in (*Kind, *Boundary, *Stage):
        value = word.value
        assert word == value and hash(word) == hash(value) and {value: 1}[word] == 1
        assert (str(word), f"{word}", repr(word), f"{word!r}") == (value, value, repr(value), repr(value))
        assert json.dumps({word: [word]}) == json.dumps({value: [value]})
        assert pickle.loads(pickle.dumps(word)) is word
    assert eval(repr(Kind.CRASH)) == "crash"  # what a repro's literal metadata holds
    assert KINDS == ("compile_error", "runtime_error", "accuracy", "crash", "timeout")


def test_a_signature_read_from_json_equals_one_built_with_words():
    built = Signature(Kind.CRASH, "SIGSEGV", "signal 11")
    read = Signature.from_json(json.loads(json.dumps(built.to_json())))
    assert read == built and hash(read) == hash(built) and {built: "seen"}[read] == "seen"
    assert built.to_json() == {"kind": "crash", "exception": "SIGSEGV", "message": "signal 11"}
