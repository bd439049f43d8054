"""The member-wide budget for unsent watch output (store/server/watch_budget.py): what every
connection owes is summed, and past the limit the connections that stopped reading longest
are picked first, as few as bring the sum back under."""

from __future__ import annotations

from store.server.watch_budget import OutputBudget
from store.server.watch_streams import DISPATCH_BYTES, OUTPUT_COST, ROUND_COPIES, budget_for, round_bytes_for


class Conn:
    """A connection as the budget sees it: only its backlog (what the client has not read)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.owed = 0

    def backlog(self) -> int:
        return self.owed

    def __repr__(self) -> str:
        return self.name


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def send(b: OutputBudget[Conn], c: Conn, n: int) -> None:
    b.before_send(c)
    c.owed += n
    b.after_send(c)


def test_under_the_limit_nobody_is_cut_off_and_drained_connections_are_not_tracked() -> None:
    b: OutputBudget[Conn] = OutputBudget(100, Clock())
    a, z = Conn("a"), Conn("z")
    send(b, a, 60)
    send(b, z, 40)
    assert (b.total, b.stalled(), b.over()) == (100, 2, [])
    a.owed = 0  # a's client read everything
    send(b, z, 0)
    b.refresh()
    assert (b.total, b.stalled()) == (40, 1)


def test_the_longest_stalled_go_first_and_only_as_many_as_needed() -> None:
    clock = Clock()
    b: OutputBudget[Conn] = OutputBudget(100, clock)
    conns = [Conn(f"c{i}") for i in range(5)]
    for i, c in enumerate(conns):
        clock.t = float(i)
        send(b, c, 30)  # c0 has owed since t=0, c4 since t=4
    assert b.total == 150
    victims = b.over()
    assert [v.conn for v in victims] == conns[:2]
    assert [(v.owed, v.since) for v in victims] == [(30, 0.0), (30, 1.0)]
    assert b.total == 90 and b.stalled() == 3
    assert b.over() == []


def test_a_client_that_reads_moves_to_the_back_of_the_queue() -> None:
    clock = Clock()
    b: OutputBudget[Conn] = OutputBudget(100, clock)
    reader, stuck = Conn("reader"), Conn("stuck")
    send(b, reader, 50)  # the reader started owing first...
    clock.t = 1
    send(b, stuck, 50)
    clock.t = 5
    reader.owed -= 10  # ...but takes some of it, and more is sent to it
    send(b, reader, 20)
    assert b.total == 110
    assert [v.conn for v in b.over()] == [stuck]
    assert b.total == 60


def test_a_stale_sum_is_looked_at_again_before_anyone_is_cut_off() -> None:
    """Clients that read between two sends lower the true sum: nobody is aborted for bytes
    that are gone."""
    b: OutputBudget[Conn] = OutputBudget(100, Clock())
    x, y = Conn("x"), Conn("y")
    send(b, x, 60)
    send(b, y, 50)
    x.owed = 0
    assert b.over() == []
    assert (b.total, b.stalled()) == (50, 1)


def test_a_closed_connection_no_longer_counts() -> None:
    b: OutputBudget[Conn] = OutputBudget(100, Clock())
    x = Conn("x")
    send(b, x, 70)
    assert b.forget(x) == 70
    assert (b.total, b.stalled(), b.forget(x)) == (0, 0, 0)


def test_one_connection_over_the_whole_budget_is_cut_off_alone() -> None:
    clock = Clock()
    b: OutputBudget[Conn] = OutputBudget(100, clock)
    small, huge = Conn("small"), Conn("huge")
    send(b, small, 10)
    clock.t = 1
    send(b, huge, 500)
    # small stalled longer, but cutting it off is not enough: both go, oldest first.
    assert [v.conn for v in b.over()] == [small, huge]
    assert b.total == 0


def test_the_budget_leaves_room_for_a_dispatch_round_and_the_cost_of_each_byte() -> None:
    """What all connections may owe, plus what one dispatch round holds, times what a byte
    costs, stays within watch_output_limit, for the default limit and a small one alike."""
    for limit in (1 << 30, 64 << 20, 1 << 20):
        owed, round_bytes = budget_for(limit), round_bytes_for(limit)
        assert owed * OUTPUT_COST + ROUND_COPIES * round_bytes <= limit
        assert owed >= limit // 8  # and most of it is still the budget
    assert round_bytes_for(1 << 30) == DISPATCH_BYTES
