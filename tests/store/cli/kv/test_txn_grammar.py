"""etcdctl's txn text (store.cli.kv.txn_grammar), parsed in-process: no cluster."""

from __future__ import annotations

import pytest

from store.api.kv import Compare, CompareResult, CompareTarget, DeleteRangeRequest, PutRequest, RangeRequest
from store.cli.kv.txn_grammar import TxnSyntaxError, parse_compare, parse_op, parse_txn, unquote


def test_txn_parser_reads_etcdctl_syntax_with_quotes_and_escapes() -> None:
    req = parse_txn(
        'mod("a b") > "5"\n'
        'value(`k`) != "x\\x00\\u00e9\\n"\n'
        'lease("k") = "694d77aa9e38260f"\n'
        "ver(k) = 0\n"
        "\n"
        'put "a b" "c\\"d"\n'
        "get k z\n"
        "\n"
        "del p --prefix --prev-kv\n"
        'get "" --from-key --count-only --limit=3\n'
    )
    assert req.compare == [
        Compare(CompareResult.GREATER, CompareTarget.MOD, b"a b", 5),
        Compare(CompareResult.NOT_EQUAL, CompareTarget.VALUE, b"k", b"x\x00\xc3\xa9\n"),
        Compare(CompareResult.EQUAL, CompareTarget.LEASE, b"k", 0x694D77AA9E38260F),
        Compare(CompareResult.EQUAL, CompareTarget.VERSION, b"k", 0),
    ]
    assert req.success == [PutRequest(b"a b", b'c"d'), RangeRequest(b"k", b"z")]
    assert req.failure == [
        DeleteRangeRequest(b"p", b"q", True),
        RangeRequest(b"\0", b"\0", limit=3, count_only=True),
    ]


def test_go_escapes_and_raw_strings_unquote_to_their_bytes() -> None:
    assert unquote('"a\\tb\\x41\\101\\u00e9"') == b"a\tbAA\xc3\xa9"
    assert unquote("`a\\n`") == b"a\\n"
    assert unquote("bare") == b"bare"
    with pytest.raises(TxnSyntaxError, match="bad escape"):
        unquote('"\\q"')


def test_lease_compares_read_hex_and_others_decimal() -> None:
    assert parse_compare('lease("k") = "0x10"').value == 16
    assert parse_compare('create("k") < "10"').value == 10
    with pytest.raises(TxnSyntaxError, match="integer"):
        parse_compare('mod("k") > "x"')


def test_an_op_refuses_flags_it_does_not_take() -> None:
    with pytest.raises(TxnSyntaxError, match="unknown flag --limit"):
        parse_op("del k --limit 3")
    with pytest.raises(TxnSyntaxError, match="--prefix and --from-key exclude each other"):
        parse_op("get k --prefix --from-key")
    assert parse_op("delete k") == DeleteRangeRequest(b"k", b"")


@pytest.mark.parametrize(
    ("text", "line"),
    [("put a b\n", 1), ('value("a") = "1"\n\nput a\n', 3), ("\nput a 1\n\nput a 2\n\nput a 3\n", 6)],
)
def test_a_syntax_error_names_its_line(text: str, line: int) -> None:
    with pytest.raises(TxnSyntaxError, match=f"^line {line}: "):
        parse_txn(text)
