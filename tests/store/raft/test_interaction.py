"""Runs the scenario transcripts in testdata/ and checks the Figure 8 canary is caught.

Regenerate expected outputs after an intended behaviour change with

    RAFT_REWRITE=1 .venv/bin/pytest tests/store/raft/test_interaction.py

and then read the diff: a rewrite only records what the core does, not that it is right.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from store.raft.types import StateType
from tests.store.raft.datadriven import DataDrivenError, diff, parse_args, run_file, run_text
from tests.store.raft.interaction import InteractionEnv

TESTDATA = Path(__file__).parent / "testdata"
FILES = sorted(TESTDATA.glob("*.txt"))


def test_testdata_present() -> None:
    names = {p.name for p in FILES}
    for required in (
        "figure8.txt",
        "figure8_canary.txt",
        "split_vote.txt",
        "prevote_disruptive.txt",
        "checkquorum_stepdown.txt",
        "learner_promotion.txt",
        "snapshot_catchup.txt",
    ):
        assert required in names


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_interaction(path: Path) -> None:
    env = InteractionEnv()
    run_file(path, env.handle)
    # Independent of the golden output: only the canary scenarios may break safety, and they
    # must (otherwise a careless rewrite could turn the canary file into a no-op).
    if "canary" in path.stem:
        assert env.violations, f"{path.name} was expected to show a safety violation"
    else:
        assert not env.violations, env.violations


# ----------------------------------------------------------------------------------------
# Figure 8, key steps only, run against the correct core and the canary.

FIGURE8_KEY_STEPS = """
add-nodes 5 voters=(1,2,3,4,5) max-size-per-msg=1 {canary}
----

campaign 1
----

stabilize
----

propose 1 x
----

process-ready 1
----

deliver-msgs 2 drop=(3,4,5)
----

process-ready 2
----

deliver-msgs 1
----

crash 1
----

campaign 5
----

process-ready 5
----

deliver-msgs 2 3 4
----

process-ready 2 3 4
----

deliver-msgs 5
----

process-ready 5
----

deliver-msgs drop=(2,3,4)
----

crash 5
----

restart 1
----

campaign 1
----

stabilize 1 2 3 4
----

campaign 1
----

process-ready 1
----

deliver-msgs 2 3 4
----

process-ready 2 3 4
----

deliver-msgs 1
----

process-ready 1
----

deliver-msgs 3 4 drop=(2)
----

process-ready 3 4
----

deliver-msgs 1
----

process-ready 1
----

deliver-msgs 3 4
----

process-ready 3 4
----

deliver-msgs 1
----
"""

FIGURE8_AFTERMATH = """
process-ready 1
----

deliver-msgs drop=(3,4)
----

crash 1
----

restart 5
----

campaign 5
----

stabilize 2 3 4 5
----

campaign 5
----

stabilize 2 3 4 5
----
"""


def _figure8(canary: bool) -> InteractionEnv:
    env = InteractionEnv()
    script = FIGURE8_KEY_STEPS.format(canary="canary=commit-old-term-by-counting" if canary else "")
    run_text(script, "figure8-key-steps", env.handle)
    return env


@pytest.mark.parametrize("canary", [False, True], ids=["correct", "canary"])
def test_figure8_old_term_entry_commit(canary: bool) -> None:
    env = _figure8(canary)
    leader = env.nodes[1].raw
    assert leader is not None
    r = leader.raft
    assert r.state == StateType.LEADER and r.term == 4
    # The setup worked: a majority (1, 3, 4) holds index 3, which is from term 2.
    assert r.log.term(3) == 2
    assert sorted(pid for pid, pr in r.prs.items() if pr.match >= 3) == [1, 3, 4]
    if canary:
        # The broken variant commits the old-term entry by counting replicas.
        assert r.log.committed == 3
    else:
        assert r.log.committed == 2

    run_text(FIGURE8_AFTERMATH, "figure8-aftermath", env.handle)
    new_leader = env.nodes[5].raw
    assert new_leader is not None
    assert new_leader.raft.state == StateType.LEADER
    # 5 overwrote index 3 with its own term-3 entry and committed it ...
    assert new_leader.raft.log.term(3) == 3
    assert new_leader.raft.log.committed == 4
    if canary:
        # ... which is a lost committed entry when 1 had committed (and applied) "x" there.
        assert any("at index 3" in v for v in env.violations)
    else:
        assert env.violations == []


# ----------------------------------------------------------------------------------------
# The format itself.


def test_parse_args_groups_parentheses() -> None:
    cmd, args = parse_args("add-nodes 3 voters=(1, 2,3) prevote=true  learners=()", "t:1")
    assert cmd == "add-nodes"
    assert [(a.key, a.vals) for a in args] == [
        ("3", ()),
        ("voters", ("1", "2", "3")),
        ("prevote", ("true",)),
        ("learners", ()),
    ]
    with pytest.raises(DataDrivenError):
        parse_args("x a=(1,2", "t:1")


def test_rewrite_round_trip(tmp_path: Path) -> None:
    p = tmp_path / "s.txt"
    p.write_text("# comment\n\necho a b\n----\nstale\n\necho\n----\n")

    def echo(d: object) -> str:
        from tests.store.raft.datadriven import TestData

        assert isinstance(d, TestData)
        return " ".join(d.positional())

    with pytest.raises(AssertionError, match=r"s.txt:3: output of 'echo a b' differs"):
        run_file(p, echo, rewrite=False)
    run_file(p, echo, rewrite=True)
    assert p.read_text() == "# comment\n\necho a b\n----\na b\n\necho\n----\nok\n"
    run_file(p, echo, rewrite=False)


def test_diff_is_readable() -> None:
    out = diff("a\nb", "a\nc")
    assert "-b" in out and "+c" in out
