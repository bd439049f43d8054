"""The exec channel protocol: what each client message becomes, what each bad one gets, and
the outcome kubectl reads its exit code from."""

from __future__ import annotations

import contextlib

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.kubelet import channels
from components.kubelet.channels import V1, V4, V5, ChannelError


def test_the_best_protocol_offered_is_chosen() -> None:
    assert channels.choose(["v5.channel.k8s.io"]) == V5  # all kubectl 1.31+ offers
    assert channels.choose(["channel.k8s.io", "v4.channel.k8s.io", "v5.channel.k8s.io"]) == V5
    assert channels.choose([" v4.channel.k8s.io "]) == V4
    assert channels.choose(["channel.k8s.io"]) == V1  # golang.org/x/net/websocket clients (conformance)
    assert channels.choose(["base64.channel.k8s.io"]) is None
    assert channels.choose([]) is None


def test_client_messages() -> None:
    assert channels.parse(b"\x00hello", V5) == channels.Message(channels.STDIN, b"hello")
    assert channels.parse(b"\x00", V5) == channels.Message(channels.STDIN, b"")
    assert channels.parse(b'\x04{"Width":80,"Height":24}\n', V5).stream == channels.RESIZE
    assert channels.parse(b"\xff\x00", V5) == channels.Message(channels.CLOSE, b"\x00")


@pytest.mark.parametrize(
    ("message", "protocol", "why"),
    [
        (b"", V5, "names no stream"),
        (b"\x01out", V5, "not stream 1"),  # a client does not write stdout
        (b"\x03{}", V5, "not stream 3"),
        (b"\xff", V5, "one stream"),
        (b"\xff\x00\x01", V5, "one stream"),
        (b"\xff\x00", V4, "not stream 255"),  # v4 has no close message
    ],
)
def test_bad_client_messages_are_refused_naming_why(message: bytes, protocol: str, why: str) -> None:
    with pytest.raises(ChannelError, match=why):
        channels.parse(message, protocol)


def test_resize() -> None:
    assert channels.resize(b'{"Width":120,"Height":40}\n') == (120, 40)
    for bad, field in [
        (b"[1,2]", "object"),
        (b"nope", "JSON"),
        (b'{"Width":-1,"Height":2}', "Width"),
        (b'{"Width":1,"Height":"2"}', "Height"),
        (b'{"Width":true,"Height":2}', "Width"),
        (b'{"Width":1,"Height":100001}', "Height"),
    ]:
        with pytest.raises(ChannelError, match=field):
            channels.resize(bad)


@given(st.binary(max_size=64))
def test_any_message_parses_or_is_refused(message: bytes) -> None:
    for protocol in (V4, V5):
        try:
            parsed = channels.parse(message, protocol)
        except ChannelError:
            continue
        assert parsed.stream in (channels.STDIN, channels.RESIZE, channels.CLOSE)
        if parsed.stream == channels.RESIZE:
            with contextlib.suppress(ChannelError):
                channels.resize(parsed.data)


def test_outcomes_as_kubectl_reads_them() -> None:
    assert orjson.loads(channels.outcome(0)) == {"metadata": {}, "status": "Success"}
    failed = orjson.loads(channels.outcome(3))
    assert failed["reason"] == "NonZeroExitCode"
    assert failed["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
    error = orjson.loads(channels.outcome(None, 'exec: "nope": executable file not found'))
    assert error["status"] == "Failure" and error["reason"] == "InternalError"
    assert 'exec: "nope"' in error["message"]
    assert channels.frame(channels.STDOUT, b"x") == b"\x01x"


@given(
    st.dictionaries(
        st.sampled_from(["command", "stdin", "stdout", "stderr", "tty", "container", "x"]),
        st.text(max_size=12),
        max_size=6,
    )
)
def test_any_exec_query_parses_or_is_refused_naming_why(query: dict[str, str]) -> None:
    from components.kubelet.exec_session import parse_query

    try:
        params = parse_query(query)
    except ValueError as e:
        assert any(w in str(e) for w in ("command", "stdin", "stdout", "stderr", "tty")), e
        return
    assert params.command and (params.stdin or params.stdout or params.stderr)
    assert not (params.tty and params.stderr)


def test_the_unversioned_protocol_says_nothing_on_success_and_the_errors_text_otherwise() -> None:
    """v1's error stream has no Status: the conformance exec test fails on any non-stdout
    message longer than its channel byte."""
    assert channels.outcome_for(V1, 0) is None
    assert channels.outcome_for(V1, 3) == (
        b"command terminated with non-zero exit code: error executing command, exit code 3"
    )
    assert channels.outcome_for(V1, None, "boom") == (
        b"Internal error occurred: error executing command in container: boom"
    )
    assert channels.outcome_for(V4, 0) == channels.outcome(0)
