"""`raftkube dns`'s flags: bad ones name themselves and exit 2; the upstreams never include the
server itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.cli.main import build_parser
from components.dns.main import host_port, main, read_resolv_conf, upstreams_of


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--listen", "127.0.0.1"], "--listen"),
        (["--listen", "localhost:53"], "--listen"),
        (["--listen", "127.0.0.1:70000"], "--listen"),
        (["--advertise", "0.0.0.0:53"], "--advertise"),
        (["--cluster-domain", "bad..domain"], "--cluster-domain"),
        (["--service-ip", "10.96.0.300"], "--service-ip"),
        (["--upstream", "dns.google"], "--upstream"),
        (["--ttl", "-1"], "--ttl"),
        (["--health-port", "65536"], "--health-port"),
        (["--listen", "127.0.0.1:5353", "--upstream", "127.0.0.1:5353"], "--upstream"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(flags: list[str], named: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--kubeconfig", "/nonexistent", "--listen", "127.0.0.1:5353", *flags]) == 2
    assert named in capsys.readouterr().err


def test_the_subcommand_is_registered() -> None:
    args = build_parser().parse_args(["dns", "--kubeconfig", "k", "--listen", "[::1]:5353"])
    assert args.run is not None and host_port(args.listen, "--listen") == ("::1", 5353)


def test_upstreams_leave_out_this_server(tmp_path: Path) -> None:
    conf = tmp_path / "resolv.conf"
    conf.write_text(
        "search x\nnameserver 127.0.0.1\nnameserver bogus\nnameserver fe80::1%eth0\nnameserver 10.96.0.10\n"
    )
    found = read_resolv_conf(str(conf))
    assert found == [("127.0.0.1", 53), ("fe80::1", 53), ("10.96.0.10", 53)]
    assert upstreams_of(found, ("0.0.0.0", 53), None, "10.96.0.10") == [("fe80::1", 53)]
    assert upstreams_of(found, ("127.0.0.1", 5353), ("10.0.0.5", 5353), "10.96.0.10") == found[:2]
    assert read_resolv_conf(str(tmp_path / "missing")) == []
