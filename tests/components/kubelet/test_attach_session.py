"""What an attach may ask of this kubelet: output streams only (its containers have /dev/null
for stdin and no terminal), refused before the upgrade in words that name the container."""

from __future__ import annotations

import pytest

from components.kubelet.attach_session import AttachParams, parse_query


def test_output_streams_are_taken() -> None:
    assert parse_query({"stdout": "true", "stderr": "1"}, "c") == AttachParams(True, True)
    assert parse_query({"stderr": "true"}, "c") == AttachParams(False, True)


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ({"stdin": "true", "stdout": "true"}, "stdin: container c has no stdin to attach to"),
        ({"tty": "true", "stdout": "true"}, "tty: container c has no terminal"),
        ({}, "you must specify at least one of stdin, stdout, stderr"),
        ({"stdout": "maybe"}, "stdout: must be true or false, got 'maybe'"),
    ],
)
def test_what_cannot_be_served_is_refused_in_words(query: dict[str, str], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_query(query, "c")
