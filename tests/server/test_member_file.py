"""member.json round trips, including the optional peer_dial map added for the chaos proxy."""

from __future__ import annotations

import json
from pathlib import Path

from store.server.config import MEMBER_FILE, MemberConfig, read_member_file, write_member_file
from store.server.protocol import MemberInfo


def _cfg(tmp_path: Path, **kw: object) -> MemberConfig:
    infos = [
        MemberInfo(i, f"m{i}", f"tcp://127.0.0.1:{100 + i}", f"tcp://127.0.0.1:{200 + i}", "", False) for i in (1, 2)
    ]
    return MemberConfig(1, "m1", tmp_path, infos[0].peer_url, infos[0].client_url, "http://127.0.0.1:9", infos, 7, **kw)


def test_peer_dial_round_trips_and_defaults_to_advertised_url(tmp_path: Path) -> None:
    """A dial override is persisted with int keys; peers without one are dialled where they advertise."""
    write_member_file(tmp_path, _cfg(tmp_path, peer_dial={2: "tcp://127.0.0.1:5555"}))
    back = read_member_file(tmp_path)
    assert back.peer_dial == {2: "tcp://127.0.0.1:5555"}
    assert back.dial_url(back.initial_cluster[1]) == "tcp://127.0.0.1:5555"
    assert back.dial_url(back.initial_cluster[0]) == back.initial_cluster[0].peer_url


def test_member_file_without_peer_dial_still_reads(tmp_path: Path) -> None:
    """Files written before peer_dial existed carry no such key: the map is empty."""
    write_member_file(tmp_path, _cfg(tmp_path))
    assert "peer_dial" not in json.loads((tmp_path / MEMBER_FILE).read_text())
    assert read_member_file(tmp_path).peer_dial == {}
