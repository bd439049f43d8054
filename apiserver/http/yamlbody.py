"""A YAML request body decoded under a budget: its depth and what its aliases expand to.

YAML lets a 500-byte document name one list ten times, that list another ten times, and so on
("billion laughs"): PyYAML builds the nodes once and shares them, but everything downstream
(the JSON answer, a copy, a stored object) expands them, to gigabytes.  And PyYAML composes
nodes recursively, so a document nested 100,000 deep ends in a RecursionError.

Aliases are EXPANDED UNDER A BUDGET, not refused.  kube-apiserver accepts them (sigs.k8s.io/yaml
over go-yaml, which refuses "excessive aliasing" by a ratio of alias expansions to nodes), and
real manifests use anchors and merge keys (`<<: *defaults`), which a refusal would break.  The
budget is simpler than go-yaml's ratio and stricter: the composer adds up the JSON size of every
node as the expanded document would print it (an alias counts the whole size of the node it
names, each time it is used) and stops at the request limit, 3 MiB, the moment the sum passes it:
before any expansion is built.  An alias to a node still being composed (a document that contains
itself) is refused outright.  The composer also counts its depth and refuses the first node past
MAX_DEPTH, before recursing into it.

Events come from libyaml (PyYAML's C parser, in every PyYAML wheel: faster than the pure-Python
one, which matters for a 3 MiB body parsed on the event loop); composing and constructing are
PyYAML's safe ones with the checks added, building only what JSON holds (see _JsonConstructor).
libyaml refuses flow collections nested past 1,000 levels by itself ("exceeded maximum nesting
depth"): that is answered as our depth limit too.  A document that used aliases is
copied into a plain tree, so no two places of the object are the same container.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import yaml
from yaml._yaml import CParser
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import AliasEvent, Event, MappingStartEvent, ScalarEvent, SequenceStartEvent
from yaml.nodes import MappingNode, Node
from yaml.resolver import Resolver

from apiserver import jsonbudget


class YamlTooLarge(ValueError):
    """The document expands to more than `limit` bytes of JSON."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the YAML body expands to more than {limit} bytes of JSON")
        self.limit = limit


class YamlTooDeep(ValueError):
    """The document nests more than `limit` levels."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the body is nested deeper than {limit} levels")
        self.limit = limit


class YamlRefused(ValueError):
    """A document we will not decode (a self-containing alias, an unsupported map key)."""


class _BudgetComposer(Composer):
    """PyYAML's composer, counting the expanded JSON size of what it composes and its depth."""

    max_bytes: int
    max_depth: int

    if TYPE_CHECKING:  # the parser's, in the loader below

        def check_event(self, *choices: type[Event]) -> bool: ...

        def peek_event(self) -> Any: ...

    def _start_budget(self) -> None:
        self.spent = 0
        self.depth = 0
        self.aliases = 0
        self.sizes: dict[str, int] = {}  # anchor -> expanded JSON size of its node
        self.open_anchors: set[str] = set()

    def _spend(self, n: int) -> None:
        self.spent += n
        if self.spent > self.max_bytes:
            raise YamlTooLarge(self.max_bytes)

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(AliasEvent):
            anchor = self.peek_event().anchor
            if anchor in self.open_anchors:
                raise YamlRefused(f"the alias *{anchor} is used inside the node it names")
            self.aliases += 1
            self._spend(self.sizes.get(anchor, 0) + 1)
            return super().compose_node(parent, index)
        event = self.peek_event()
        anchor = event.anchor
        start = self.spent
        node: Node | None
        if isinstance(event, ScalarEvent):
            self._spend(len(event.value) + 3)  # quotes and the comma or colon after it
            node = super().compose_node(parent, index)
        else:
            if not isinstance(event, SequenceStartEvent | MappingStartEvent):
                return super().compose_node(parent, index)
            self.depth += 1
            if self.depth > self.max_depth:
                raise YamlTooDeep(self.max_depth)
            self._spend(3)
            if anchor is not None:
                self.open_anchors.add(anchor)
            try:
                node = super().compose_node(parent, index)
            finally:
                self.depth -= 1
                if anchor is not None:
                    self.open_anchors.discard(anchor)
        if anchor is not None:
            self.sizes[anchor] = self.spent - start
        return node


MAX_DUPLICATES = 100  # repeated keys named per body (the rest are dropped all the same)


class _JsonConstructor(SafeConstructor):
    """PyYAML's safe constructor, building only what JSON holds, as sigs.k8s.io/yaml does: map
    keys become strings (`1: a` is {"1": "a"}, and `true: b` does not collide with it), a
    timestamp stays the string it was written as (go-yaml v2 keeps timestamp-looking values
    as strings), `!!binary` is its base64 text (how JSON carries bytes), a `!!set` is a map of
    nulls (as YAML writes it) and `!!omap` / `!!pairs` a list of one-member maps."""

    def __init__(self) -> None:
        super().__init__()
        self.duplicates: list[str] = []  # keys a map repeats (the last one wins, as in go-yaml)

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        if not isinstance(node, MappingNode):
            raise ConstructorError(None, None, f"expected a mapping node, but found {node.id}", node.start_mark)
        self.flatten_mapping(node)
        mapping: dict[Hashable, Any] = {}
        for key_node, value_node in node.value:
            key = _key(self.construct_object(key_node, deep=deep))
            if key in mapping and len(self.duplicates) < MAX_DUPLICATES:
                # go-yaml's strict decoder's words, with its 1-based line
                self.duplicates.append(f'line {key_node.start_mark.line + 1}: key "{key}" already set in map')
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping

    def construct_set_as_map(self, node: MappingNode) -> Any:
        data: dict[Hashable, Any] = {}
        yield data
        data.update(self.construct_mapping(node))

    def construct_pairs_as_maps(self, node: Node) -> Any:
        data: list[dict[str, Any]] = []
        yield data
        pairs = self.construct_yaml_omap(node)
        found = next(pairs)
        for _ in pairs:  # the generator fills `found` when it runs to its end
            pass
        data.extend({_key(key): value} for key, value in found)

    def construct_as_text(self, node: Node) -> str:
        return str(self.construct_scalar(node))  # type: ignore[arg-type]

    def construct_base64_text(self, node: Node) -> str:
        return "".join(str(self.construct_scalar(node)).split())  # type: ignore[arg-type]


_JsonConstructor.add_constructor("tag:yaml.org,2002:timestamp", _JsonConstructor.construct_as_text)  # type: ignore[type-var]
_JsonConstructor.add_constructor("tag:yaml.org,2002:binary", _JsonConstructor.construct_base64_text)  # type: ignore[type-var]
_JsonConstructor.add_constructor("tag:yaml.org,2002:set", _JsonConstructor.construct_set_as_map)  # type: ignore[type-var]
_JsonConstructor.add_constructor("tag:yaml.org,2002:omap", _JsonConstructor.construct_pairs_as_maps)  # type: ignore[type-var]
_JsonConstructor.add_constructor("tag:yaml.org,2002:pairs", _JsonConstructor.construct_pairs_as_maps)  # type: ignore[type-var]


class _JsonResolver(Resolver):
    """YAML 1.1's implicit types without timestamps (see _JsonConstructor)."""


_JsonResolver.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in Resolver.yaml_implicit_resolvers.items()
}


def _key(key: Any) -> str:
    """A map key as sigs.k8s.io/yaml turns it into a JSON object's key."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int | float):
        return str(key)
    raise YamlRefused(f"a map key of type {type(key).__name__} cannot be a JSON object's key")


class _Loader(_BudgetComposer, CParser, _JsonConstructor, _JsonResolver):
    def __init__(self, stream: bytes, max_bytes: int, max_depth: int) -> None:
        CParser.__init__(self, stream)
        Composer.__init__(self)
        _JsonConstructor.__init__(self)
        _JsonResolver.__init__(self)
        self.max_bytes = max_bytes
        self.max_depth = max_depth
        self._start_budget()


def duplicate_keys(body: bytes) -> list[str]:
    """The keys a YAML body's maps repeat, as go-yaml's strict decoder names them (`line 9: key
    "foo" already set in map`): what `fieldValidation=Strict` refuses in an apply patch.  The
    body was decoded once already (within its budget), so this second pass is bounded too."""
    loader = _Loader(body, jsonbudget.MAX_BYTES, jsonbudget.MAX_DEPTH)
    try:
        while loader.check_data():  # type: ignore[no-untyped-call]
            loader.get_data()
    finally:
        loader.dispose()
    return loader.duplicates


def load_documents(
    body: bytes, *, max_bytes: int = jsonbudget.MAX_BYTES, max_depth: int = jsonbudget.MAX_DEPTH
) -> list[Any]:
    """Every document of `body` (None for an empty one), within one budget for all of them.

    Raises YamlTooLarge, YamlTooDeep, YamlRefused, or yaml.YAMLError for YAML that is not
    well formed; nothing else (a recursion or a value PyYAML cannot build is a YamlRefused)."""
    loader = _Loader(body, max_bytes, max_depth)
    docs: list[Any] = []
    try:
        while loader.check_data():  # type: ignore[no-untyped-call]
            docs.append(loader.get_data())
    except RecursionError:
        raise YamlRefused("the YAML body nests its merge keys too deeply") from None
    except (ValueError, TypeError, OverflowError) as e:
        if isinstance(e, YamlTooLarge | YamlTooDeep | YamlRefused):
            raise
        # PyYAML's own constructors raise these for values it cannot build: an int of more
        # than 4300 digits, an unhashable key inside a set, a bad !!binary
        raise YamlRefused(f"a value cannot be decoded: {e}") from None
    except yaml.MarkedYAMLError as e:
        if "maximum nesting depth" in str(e.problem):
            raise YamlTooDeep(max_depth) from None
        raise
    finally:
        loader.dispose()
    if loader.aliases:
        docs = [jsonbudget.tree_copy(d) for d in docs]
    return docs


__all__ = ["YamlRefused", "YamlTooDeep", "YamlTooLarge", "duplicate_keys", "load_documents", "yaml"]
