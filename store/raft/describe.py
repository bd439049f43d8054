"""Deterministic one-line renderings of core types, for traces and golden test files."""

from __future__ import annotations

from store.raft.types import ConfChange, Entry, EntryType, HardState, Message, MessageType, Snapshot

_NAMES = {
    MessageType.APP: "MsgApp",
    MessageType.APP_RESP: "MsgAppResp",
    MessageType.VOTE: "MsgVote",
    MessageType.VOTE_RESP: "MsgVoteResp",
    MessageType.PRE_VOTE: "MsgPreVote",
    MessageType.PRE_VOTE_RESP: "MsgPreVoteResp",
    MessageType.SNAP: "MsgSnap",
    MessageType.HEARTBEAT: "MsgHeartbeat",
    MessageType.HEARTBEAT_RESP: "MsgHeartbeatResp",
    MessageType.READ_INDEX: "MsgReadIndex",
    MessageType.READ_INDEX_RESP: "MsgReadIndexResp",
    MessageType.TIMEOUT_NOW: "MsgTimeoutNow",
    MessageType.PROP: "MsgProp",
    MessageType.TRANSFER_LEADER: "MsgTransferLeader",
}


def describe_entry(e: Entry) -> str:
    if e.type == EntryType.CONF_CHANGE:
        cc = ConfChange.decode(e.data)
        return f"{e.term}/{e.index} {cc.type.name.lower()} {cc.node_id}"
    if not e.data:
        return f"{e.term}/{e.index} EntryNormal"
    try:
        text = e.data.decode()
        body = f'"{text}"' if text.isprintable() else e.data.hex()
    except UnicodeDecodeError:
        body = e.data.hex()
    return f"{e.term}/{e.index} EntryNormal {body}"


def describe_entries(ents: list[Entry]) -> str:
    return "[" + ", ".join(describe_entry(e) for e in ents) + "]"


def describe_hard_state(hs: HardState) -> str:
    return f"HardState Term:{hs.term} Vote:{hs.vote} Commit:{hs.commit}"


def describe_snapshot(s: Snapshot) -> str:
    m = s.metadata
    cs = m.conf_state
    learners = f" Learners:{list(cs.learners)}" if cs.learners else ""
    return f"Index:{m.index} Term:{m.term} Voters:{list(cs.voters)}{learners}"


def describe_message(m: Message) -> str:
    name = _NAMES.get(m.type, m.type.name)
    s = f"{m.frm}->{m.to} {name} Term:{m.term}"
    t = m.type
    if t in (MessageType.APP, MessageType.VOTE, MessageType.PRE_VOTE):
        s += f" Log:{m.log_term}/{m.index}"
    elif t == MessageType.APP_RESP:
        s += f" Index:{m.index}"
        if m.reject:
            s += f" Rejected (Hint: {m.reject_hint}/{m.log_term})"
    elif t in (MessageType.VOTE_RESP, MessageType.PRE_VOTE_RESP) and m.reject:
        s += " Rejected"
    elif t == MessageType.READ_INDEX_RESP:
        s += f" Index:{m.index}"
    if m.commit:
        s += f" Commit:{m.commit}"
    if m.entries:
        s += f" Entries:{describe_entries(m.entries)}"
    if m.snapshot is not None:
        s += f" Snapshot: {describe_snapshot(m.snapshot)}"
    if m.context:
        s += f" Context:{m.context.decode(errors='replace')}"
    return s
