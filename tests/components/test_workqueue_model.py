"""WorkQueue against a model, under random adds, gets, dones, blocked getters and shut-downs.

The model is client-go's contract written plainly: a FIFO of waiting keys (no duplicates), the
set of held keys, the set of held keys re-added meanwhile, and the getters blocked in order.
Every key a getter receives must be the model's next one; a held key is never received again
before `done`; a key re-added while held comes back after `done`.

The machine owns a private event loop and drives it with `run_until_complete`, so each rule
runs to quiescence before the next and hypothesis can shrink a failure to a short story.
"""

from __future__ import annotations

import asyncio
from collections import deque

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from components.client.workqueue import ShutDown, WorkQueue

KEYS = st.sampled_from(["ns/a", "ns/b", "ns/c", "ns/d"])
GET_TIMEOUT = 2.0  # real seconds, only reached if the queue wrongly blocks


class WorkQueueModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.q: WorkQueue[str] = WorkQueue()
        self.waiting: deque[str] = deque()  # model: keys waiting, in first-add order
        self.held: set[str] = set()  # model: keys a worker holds
        self.readded: set[str] = set()  # model: held keys added again meanwhile
        self.getters: deque[asyncio.Task[str]] = deque()  # getters blocked on an empty queue
        self.shut = False

    def teardown(self) -> None:
        for task in self.getters:
            task.cancel()
        if self.getters:
            self.loop.run_until_complete(asyncio.gather(*self.getters, return_exceptions=True))
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()

    def settle(self) -> None:
        async def ticks() -> None:
            for _ in range(10):
                await asyncio.sleep(0)

        self.loop.run_until_complete(ticks())

    def receive(self, key: str) -> None:
        """A worker got `key`: it must be the model's next waiting key, and not held already."""
        assert key not in self.held, f"{key} handed to a second worker"
        assert self.waiting and key == self.waiting[0], f"got {key}, model expected {list(self.waiting)[:1]}"
        self.waiting.popleft()
        self.held.add(key)

    def serve_blocked_getters(self) -> None:
        """Blocked getters take waiting keys in the order they blocked; the rest stay blocked."""
        self.settle()
        while self.getters and self.waiting:
            task = self.getters.popleft()
            assert task.done(), "a blocked getter was not woken although a key was waiting"
            self.receive(task.result())
        if self.shut and not self.waiting:
            while self.getters:
                task = self.getters.popleft()
                assert task.done() and isinstance(task.exception(), ShutDown)
        assert not any(t.done() for t in self.getters), "a getter returned with nothing to take"

    @rule(key=KEYS)
    def add(self, key: str) -> None:
        self.q.add(key)
        if not self.shut and key not in self.waiting:
            if key in self.held:
                self.readded.add(key)
            else:
                self.waiting.append(key)
        self.serve_blocked_getters()

    @precondition(lambda self: bool(self.waiting) and not self.getters)
    @rule()
    def get(self) -> None:
        key = self.loop.run_until_complete(asyncio.wait_for(self.q.get(), GET_TIMEOUT))
        self.receive(key)

    @precondition(lambda self: not self.waiting and not self.shut and len(self.getters) < 3)
    @rule()
    def block_a_getter(self) -> None:
        self.getters.append(self.loop.create_task(self.q.get()))
        self.settle()
        assert not self.getters[-1].done(), "get returned from an empty queue"

    @precondition(lambda self: not self.waiting and self.shut)
    @rule()
    def get_after_shut_down(self) -> None:
        try:
            key = self.loop.run_until_complete(asyncio.wait_for(self.q.get(), GET_TIMEOUT))
        except ShutDown:
            return
        raise AssertionError(f"got {key} from a drained, shut-down queue")

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.held)))
        self.q.done(key)
        self.held.discard(key)
        if key in self.readded:
            self.readded.discard(key)
            self.waiting.append(key)  # delivered again, now that no worker holds it
        self.serve_blocked_getters()

    @rule(drain=st.booleans())
    def shut_down(self, drain: bool) -> None:
        self.q.shut_down(drain=drain)
        self.shut = True
        if not drain:
            self.waiting.clear()
            self.readded.clear()
        self.serve_blocked_getters()

    @invariant()
    def waiting_matches_the_model(self) -> None:
        assert self.q.len() == len(self.waiting) == self.q.depth
        assert len(set(self.waiting)) == len(self.waiting)  # the model itself never duplicates
        assert self.q.shutting_down == self.shut

    @invariant()
    def no_key_is_both_waiting_and_held(self) -> None:
        assert not (set(self.waiting) & self.held)


WorkQueueModel.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
test_work_queue_against_the_model = WorkQueueModel.TestCase
