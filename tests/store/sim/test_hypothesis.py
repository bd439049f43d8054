"""Hypothesis searches schedules: every rule is one simulator action, and every random
choice inside an action comes from a `pick` that hypothesis draws (and shrinks).

Invariants are checked inside the simulator on every event; at the end of each example the
cluster is healed and must converge with every acknowledged proposal applied exactly once.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from tests.store.sim.cluster import DEFAULT_PROFILE, Simulator

PICK = st.integers(min_value=0, max_value=2**16)


class RaftSchedules(RuleBasedStateMachine):
    nodes = 3

    def __init__(self) -> None:
        super().__init__()
        self.sim: Simulator | None = None

    @initialize(seed=st.integers(min_value=0, max_value=2**32))
    def start(self, seed: int) -> None:
        self.sim = Simulator(seed=seed, n_nodes=self.nodes, profile=DEFAULT_PROFILE, election_tick=4)

    def _do(self, pick: int, action_name: str) -> None:
        sim = self.sim
        assert sim is not None
        sim.step_no += 1
        sim.rng.seed(pick)
        getattr(sim, action_name)()
        sim._after_step()

    @rule(pick=PICK)
    def tick_all(self, pick: int) -> None:
        self._do(pick, "act_tick_all")

    @rule(pick=PICK)
    def tick_one(self, pick: int) -> None:
        self._do(pick, "act_tick_one")

    @rule(pick=PICK)
    def deliver(self, pick: int) -> None:
        self._do(pick, "act_deliver")

    @rule(pick=PICK)
    def deliver_many(self, pick: int) -> None:
        self._do(pick, "act_deliver_many")

    @rule(pick=PICK)
    def drop(self, pick: int) -> None:
        self._do(pick, "act_drop")

    @rule(pick=PICK)
    def duplicate(self, pick: int) -> None:
        self._do(pick, "act_duplicate")

    @rule(pick=PICK)
    def ready(self, pick: int) -> None:
        self._do(pick, "act_ready")

    @rule(pick=PICK)
    def ready_all(self, pick: int) -> None:
        self._do(pick, "act_ready_all")

    @rule(pick=PICK)
    def propose(self, pick: int) -> None:
        self._do(pick, "act_propose")

    @rule(pick=PICK)
    def read(self, pick: int) -> None:
        self._do(pick, "act_read")

    @rule(pick=PICK)
    def partition(self, pick: int) -> None:
        self._do(pick, "act_partition")

    @rule(pick=PICK)
    def heal(self, pick: int) -> None:
        self._do(pick, "act_heal")

    @rule(pick=PICK)
    def crash(self, pick: int) -> None:
        self._do(pick, "act_crash")

    @rule(pick=PICK)
    def restart(self, pick: int) -> None:
        self._do(pick, "act_restart")

    @rule(pick=PICK)
    def compact(self, pick: int) -> None:
        self._do(pick, "act_compact")

    @rule(pick=PICK)
    def conf_change(self, pick: int) -> None:
        self._do(pick, "act_conf_change")

    @rule(pick=PICK)
    def transfer(self, pick: int) -> None:
        self._do(pick, "act_transfer")

    def teardown(self) -> None:
        if self.sim is not None:
            self.sim.settle()


class FiveNodeRaftSchedules(RaftSchedules):
    nodes = 5


_settings = settings(
    max_examples=60,
    stateful_step_count=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

TestThreeNodeSchedules = RaftSchedules.TestCase
TestThreeNodeSchedules.settings = _settings
TestFiveNodeSchedules = FiveNodeRaftSchedules.TestCase
TestFiveNodeSchedules.settings = _settings
