"""The failures file: torch's failures-dict format, read, changed and written."""

import json

import pytest
from torch.testing._internal.optests.generate_tests import FailuresDict, validate_failures_dict_structure

from opcheck.failures import NO_ENTRY, Expectation, FailuresFile, FailuresFileError, TestId

TORCH_STYLE = {
    "_description": "kept from an existing project",
    "_version": 1,
    "data": {
        "mylib::nms": {
            "TestNMS.test_faketensor__test_nms": {"comment": "fake kernel lies", "status": "xfail"},
            "TestNMS.test_aot_dispatch_dynamic__test_nms": {"comment": "", "status": "skip"},
        },
        "mylib::roi_align": {"TestOther.test_schema__test_roi": {"comment": "", "status": "xfail"}},
    },
}


def test_test_ids_map_onto_torch_keys():
    assert TestId("t.py::TestNMS::test_nms", "TestNMS", "test_nms").key("test_faketensor") == (
        "TestNMS.test_faketensor__test_nms"
    )


def test_a_parametrized_items_key_carries_its_id_and_torch_reads_it():
    item = TestId("t.py::TestNMS::test_nms[cpu-2]", "TestNMS", "test_nms[cpu-2]", "test_nms")
    assert item.key("test_faketensor") == "TestNMS.test_faketensor__test_nms[cpu-2]"
    assert item.function_key("test_faketensor") == "TestNMS.test_faketensor__test_nms"
    assert TestId("t.py::test_x", "t", "test_x", "test_x").function_key("test_schema") is None

    class TestNMS:
        def test_nms(self):
            pass

    entry = {item.key("test_faketensor"): {"comment": "", "status": "xfail"}}
    validate_failures_dict_structure(FailuresDict("", {"mylib::nms": entry}), ["test_faketensor"], TestNMS)


def test_an_items_own_entry_wins_over_its_functions(tmp_path):
    path = tmp_path / "failures.json"
    entries = {
        "t.test_faketensor__test_nms": {"comment": "odd sizes", "status": "xfail"},
        "t.test_faketensor__test_nms[2]": {"comment": "", "status": "skip"},
    }
    path.write_text(json.dumps({"_version": 1, "data": {"mylib::nms": entries}}))
    failures = FailuresFile.load(path)

    def expectation(name):
        return failures.expectation("mylib::nms", TestId(f"t.py::{name}", "t", name, "test_nms"), "test_faketensor")

    assert expectation("test_nms[2]") == Expectation("skip", "t.test_faketensor__test_nms[2]")
    shared = expectation("test_nms[3]")
    assert shared == Expectation("xfail", "t.test_faketensor__test_nms", "odd sizes", per_function=True)
    assert not shared.strict  # it does not say this parametrization fails
    assert expectation("test_nms").strict  # for the unparametrized function it is its own entry
    assert failures.expectation("mylib::other", TestId("t.py::x", "t", "x"), "test_faketensor") == NO_ENTRY


def test_reads_an_existing_torch_file(tmp_path):
    path = tmp_path / "failures_dict.json"
    path.write_text(json.dumps(TORCH_STYLE))
    failures = FailuresFile.load(path)
    assert failures.status("mylib::nms", "TestNMS.test_faketensor__test_nms") == "xfail"
    assert failures.status("mylib::nms", "TestNMS.test_aot_dispatch_dynamic__test_nms") == "skip"
    assert failures.status("mylib::nms", "TestNMS.test_schema__test_nms") == "xsuccess"
    assert failures.status("mylib::other", "TestNMS.test_schema__test_nms") == "xsuccess"
    assert failures.comment("mylib::nms", "TestNMS.test_faketensor__test_nms") == "fake kernel lies"


@pytest.mark.parametrize("name", ["missing.json", "blank.json"])
def test_a_missing_or_blank_file_is_empty_and_save_creates_it(tmp_path, name):
    path = tmp_path / "sub" / name
    if name == "blank.json":
        path.parent.mkdir()
        path.write_text("\n")
    failures = FailuresFile.load(path)
    assert failures.data == {}
    failures.set_status("mylib::nms", "TestNMS.test_schema__test_nms", "xfail", comment="mutates boxes")
    failures.save()
    assert json.loads(path.read_text())["data"] == {
        "mylib::nms": {"TestNMS.test_schema__test_nms": {"comment": "mutates boxes", "status": "xfail"}}
    }


def test_torchs_own_loader_crashes_on_a_new_file_where_ours_does_not(tmp_path):
    path = tmp_path / "new.json"
    with pytest.raises(TypeError):  # FailuresDict.load calls FailuresDict.save() unbound
        FailuresDict.load(str(path), create_file=True)
    FailuresFile.load(path).save()
    assert FailuresDict.load(str(path)).data == {}


def test_written_text_is_torchs_byte_for_byte(tmp_path):
    path = tmp_path / "failures.json"
    path.write_text(json.dumps(TORCH_STYLE))
    ours = FailuresFile.load(path)
    ours.set_status("mylib::new_op", "test_mod.test_faketensor__test_x", "xfail")
    ours.save()
    theirs = FailuresDict.load(str(path))  # torch reads it back...
    assert path.read_text() == theirs._save(to_str=True)  # ...and would write the very same text
    assert theirs.get_status("mylib::new_op", "test_mod.test_faketensor__test_x") == "xfail"


def test_changes_keep_comments_and_unrelated_entries(tmp_path):
    path = tmp_path / "failures.json"
    path.write_text(json.dumps(TORCH_STYLE))
    failures = FailuresFile.load(path)
    failures.set_status("mylib::nms", "TestNMS.test_faketensor__test_nms", "xfail", comment="new words")
    failures.set_status("mylib::roi_align", "TestOther.test_schema__test_roi", "xsuccess")  # fixed: entry goes
    failures.save()
    data = json.loads(path.read_text())["data"]
    assert data["mylib::nms"]["TestNMS.test_faketensor__test_nms"]["comment"] == "fake kernel lies"
    assert data["mylib::nms"]["TestNMS.test_aot_dispatch_dynamic__test_nms"]["status"] == "skip"
    assert "mylib::roi_align" not in data


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        ("{not json", "not JSON"),
        ('{"_version": 2, "data": {}}', "failures-dict format"),
        ('{"data": {"op": {"K.test_schema__t": {"comment": "", "status": "flaky"}}}, "_version": 1}', "status must be"),
    ],
    ids=["not-json", "wrong-version", "unknown-status"],
)
def test_malformed_files_are_rejected_with_a_reason(tmp_path, content, complaint):
    path = tmp_path / "failures.json"
    path.write_text(content)
    with pytest.raises(FailuresFileError, match=complaint):
        FailuresFile.load(path)
