"""member.json: every MemberConfig field round trips, and a hand-edited file is checked strictly.

member.json is a file a user can edit, so reading it is an edge: every field's type and range
is checked (bools are not integers, floats are not integers, counts and sizes are positive),
keys it does not know are refused, and the error names the file and the field.  The member
process exits 2 with that message.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from machinery.process.config import SettingError
from store.api.cluster import MemberInfo
from store.server.config import MEMBER_FILE, SETTINGS, MemberConfig, RaftSettings, read_member_file, write_member_file
from tests.support.paths import ROOT


def _cfg(tmp_path: Path, **kw: Any) -> MemberConfig:
    infos = [
        MemberInfo(i, f"m{i}", f"tcp://127.0.0.1:{100 + i}", f"tcp://127.0.0.1:{200 + i}", f"http://[::1]:{300 + i}")
        for i in (1, 2)
    ]
    return MemberConfig(1, "m1", tmp_path, infos[0].peer_url, infos[0].client_url, "http://127.0.0.1:9", infos, 7, **kw)


def _changed(value: Any) -> Any:
    """A different value of the same type, valid for any setting."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value * 3 + 7
    if isinstance(value, float):
        return value * 3 + 0.25
    raise AssertionError(f"no changed value for {value!r}")


def _doc(tmp_path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((tmp_path / MEMBER_FILE).read_text())
    return doc


def _write_doc(tmp_path: Path, doc: dict[str, Any]) -> None:
    (tmp_path / MEMBER_FILE).write_text(json.dumps(doc))


def test_every_field_round_trips(tmp_path: Path) -> None:
    """Each field (every setting changed from its default) is written and read back unchanged."""
    base = _cfg(tmp_path)
    changed = {name: _changed(getattr(base, name)) for name in SETTINGS}
    cfg = dataclasses.replace(base, join=True, peer_dial={2: "tcp://127.0.0.1:5555"}, **changed)
    write_member_file(tmp_path, cfg)
    assert set(_doc(tmp_path)) == {f.name for f in dataclasses.fields(MemberConfig)} - {"data_dir"}
    back = read_member_file(tmp_path)
    assert back == cfg
    assert {name: getattr(back, name) for name in SETTINGS} == changed


def test_settings_are_keyword_fields_of_member_config() -> None:
    """MemberConfig has every setting of RaftSettings and MemberSettings, with their defaults."""
    defaults = {f.name: f.default for f in dataclasses.fields(MemberConfig) if f.name in SETTINGS}
    assert defaults["max_size_per_msg"] == RaftSettings().max_size_per_msg
    assert set(defaults) == set(SETTINGS)
    assert {
        "max_request_bytes": 1_572_864,
        "max_client_connections": 10_000,
        "hello_timeout": 5.0,
        "frame_timeout": 10.0,
        "watch_backlog_limit": 16 << 20,
        "watch_output_limit": 1 << 30,
        "progress_notify_interval": 10.0,
    }.items() <= defaults.items()


def test_peer_dial_round_trips_and_defaults_to_advertised_url(tmp_path: Path) -> None:
    """A dial override is persisted with int keys; peers without one are dialled where they advertise."""
    write_member_file(tmp_path, _cfg(tmp_path, peer_dial={2: "tcp://127.0.0.1:5555"}))
    back = read_member_file(tmp_path)
    assert back.peer_dial == {2: "tcp://127.0.0.1:5555"}
    assert back.dial_url(back.initial_cluster[1]) == "tcp://127.0.0.1:5555"
    assert back.dial_url(back.initial_cluster[0]) == back.initial_cluster[0].peer_url


def test_settings_left_out_take_their_defaults(tmp_path: Path) -> None:
    """Files written before a setting existed (no peer_dial, no max_size_per_msg, ...) still read."""
    write_member_file(tmp_path, _cfg(tmp_path, tick_ms=20, peer_dial={2: "tcp://127.0.0.1:5555"}))
    doc = _doc(tmp_path)
    for name in ("peer_dial", "join", *SETTINGS):
        if name != "tick_ms":
            del doc[name]
    _write_doc(tmp_path, doc)
    assert read_member_file(tmp_path) == _cfg(tmp_path, tick_ms=20)


BAD: list[tuple[str, Any, str]] = [
    # field, value, what the message says after "<path>: "
    ("tick_ms", True, "tick_ms must be an integer, got True"),
    ("tick_ms", 2.0, "tick_ms must be an integer, got 2.0"),
    ("tick_ms", "100", "tick_ms must be an integer, got '100'"),
    ("tick_ms", 0, "tick_ms must be positive, got 0"),
    ("max_size_per_msg", -4096, "max_size_per_msg must be positive"),
    ("max_inflight_msgs", 1 << 63, "max_inflight_msgs must be at most 9223372036854775807"),
    ("max_inflight_msgs", None, "max_inflight_msgs must be an integer, got None"),
    ("watch_backlog_limit", [1], "watch_backlog_limit must be an integer"),
    ("max_client_connections", 0, "max_client_connections must be positive"),
    ("max_request_bytes", 1.5, "max_request_bytes must be an integer"),
    ("member_id", 0, "member_id must be positive"),
    ("cluster_id", -1, "cluster_id must be at least 0"),
    ("request_timeout", 0, "request_timeout must be a positive number of seconds"),
    ("hello_timeout", False, "hello_timeout must be a positive number of seconds, got False"),
    ("progress_notify_interval", float("nan"), "progress_notify_interval must be a positive number"),
    ("progress_notify_interval", "10", "progress_notify_interval must be a positive number"),
    ("fsync", 1, "fsync must be true or false, got 1"),
    ("join", "no", "join must be true or false"),
    ("name", "", "name must be a non-empty string"),
    ("peer_url", 5, "peer_url must be a non-empty string"),
    ("client_url", "tcp://127.0.0.1", "client_url: not a host:port address"),
    ("http_url", "http://127.0.0.1:70000", "http_url: port out of range"),
    ("initial_cluster", {}, "initial_cluster must be a non-empty list of members"),
    ("initial_cluster", [], "initial_cluster must be a non-empty list of members"),
    ("initial_cluster", [5], "initial_cluster[0] must be an object"),
    ("initial_cluster", [{"id": 1}], "initial_cluster[0] lacks client_url, http_url, name, peer_url"),
    ("peer_dial", [], "peer_dial must be an object"),
    ("peer_dial", {"x": "tcp://127.0.0.1:5"}, "peer_dial keys must be member IDs, got 'x'"),
    ("peer_dial", {"2": 5}, "peer_dial[2] must be a string"),
    ("peer_dial", {"2": "nowhere"}, "peer_dial[2]: not a host:port address"),
    ("election_ticks", 1, "election_ticks (1) must exceed heartbeat_ticks (1)"),
    ("member_id", 3, "member_id 3 is not in initial_cluster"),
]


def _member(doc: dict[str, Any], **change: Any) -> list[dict[str, Any]]:
    members: list[dict[str, Any]] = [dict(m) for m in doc["initial_cluster"]]
    members[1].update(change)
    return members


@pytest.mark.parametrize(("name", "value", "message"), BAD, ids=[f"{n}={v!r}" for n, v, _ in BAD])
def test_bad_field_is_refused_naming_it(tmp_path: Path, name: str, value: Any, message: str) -> None:
    """A value of the wrong type or range is a SettingError naming the file and the field."""
    write_member_file(tmp_path, _cfg(tmp_path))
    doc = _doc(tmp_path)
    doc[name] = value
    _write_doc(tmp_path, doc)
    with pytest.raises(SettingError) as err:
        read_member_file(tmp_path)
    assert str(err.value).startswith(f"{tmp_path / MEMBER_FILE}: {message}")
    assert err.value.field == name


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"id": True}, "initial_cluster[1].id must be a positive integer, got True"),
        ({"id": 2.0}, "initial_cluster[1].id must be a positive integer, got 2.0"),
        ({"id": 1}, "initial_cluster names a member ID twice: [1, 1]"),
        ({"name": 3}, "initial_cluster[1].name must be a string"),
        ({"is_learner": 0}, "initial_cluster[1].is_learner must be true or false"),
        ({"peer_url": "garbage"}, "initial_cluster[1].peer_url: not a host:port address"),
        ({"client_url": None}, "initial_cluster[1].client_url must be a string"),
        ({"role": "voter"}, "initial_cluster[1] has unknown keys: role"),
    ],
)
def test_bad_cluster_member_is_refused_naming_it(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    """Each member of initial_cluster is checked field by field."""
    write_member_file(tmp_path, _cfg(tmp_path))
    doc = _doc(tmp_path)
    doc["initial_cluster"] = _member(doc, **change)
    _write_doc(tmp_path, doc)
    with pytest.raises(SettingError, match="initial_cluster") as err:
        read_member_file(tmp_path)
    assert message in str(err.value)
    assert err.value.field == "initial_cluster"


def test_unknown_and_missing_keys_are_refused(tmp_path: Path) -> None:
    """A misspelt setting is not silently ignored; a field without a default must be there."""
    write_member_file(tmp_path, _cfg(tmp_path))
    doc = _doc(tmp_path)
    _write_doc(tmp_path, {**doc, "max_size_per_mesg": 4096, "zz": 1})
    with pytest.raises(SettingError, match=r"member\.json: unknown keys: max_size_per_mesg, zz"):
        read_member_file(tmp_path)
    _write_doc(tmp_path, {**doc, "data_dir": "/elsewhere"})
    with pytest.raises(SettingError, match="unknown keys: data_dir"):
        read_member_file(tmp_path)
    del doc["cluster_id"]
    _write_doc(tmp_path, doc)
    with pytest.raises(SettingError, match=r"member\.json: cluster_id is missing") as err:
        read_member_file(tmp_path)
    assert err.value.field == "cluster_id"


@pytest.mark.parametrize(("text", "message"), [("[1, 2]", "must hold a JSON object"), ("{", "not valid JSON")])
def test_file_that_is_not_an_object_is_refused(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / MEMBER_FILE).write_text(text)
    with pytest.raises(ValueError, match=message):
        read_member_file(tmp_path)


def test_member_process_exits_2_naming_the_field(tmp_path: Path) -> None:
    """The member refuses a hand-edited member.json before it touches anything: exit 2 and the message."""
    write_member_file(tmp_path, _cfg(tmp_path))
    doc = _doc(tmp_path)
    doc["max_size_per_msg"] = True
    _write_doc(tmp_path, doc)
    proc = subprocess.run(
        [sys.executable, "-m", "store.server.main", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert f"{tmp_path / MEMBER_FILE}: max_size_per_msg must be an integer, got True" in proc.stderr
    assert not (tmp_path / "wal").exists()
