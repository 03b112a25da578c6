"""How a method call on a piece of state touches it: a write, a read, or both.

The verbs of the standard containers are fixed by the language; for a
registry class of the tree the linter reads the method body instead (see
``bodies``), and falls back to these names only for methods it cannot see.
"""

from __future__ import annotations

#: calls that put something into the state
WRITE = frozenset({
    "append", "appendleft", "extend", "extendleft", "insert", "update", "clear", "remove", "discard",
    "put", "put_nowait", "__setitem__", "__delitem__", "sort", "reverse", "rotate",
    "register", "publish", "push", "submit", "store", "enqueue", "set", "add_request",
})
#: calls that fill a get-or-load cache (a write that is also a lookup)
FILL = frozenset({"setdefault", "add"})
#: calls that take something out: the reader side of a handoff (and a mutation)
CONSUME = frozenset({"pop", "popleft", "popitem", "get_nowait", "take", "consume", "dequeue", "pop_request"})
#: extra consuming verbs of queues (``Queue.get`` removes the item)
QUEUE_CONSUME = frozenset({"get", "join", "task_done"})


def container_effect(kind: str, verb: str) -> tuple[str, ...]:
    """Raw effects (``read``/``write``/``fill``) of ``state.verb(...)`` on a container kind."""
    if verb == "setdefault":
        return ("read", "fill")  # returns the stored value: a lookup that fills on a miss
    if verb in FILL:
        return ("fill",)
    if verb in WRITE:
        return ("write",)
    if verb in CONSUME or (kind == "queue" and verb in QUEUE_CONSUME):
        return ("read", "write")
    return ("read",)


def guess_kind(external_bases: list[str]) -> str:
    """Container kind of a registry class that subclasses a standard container."""
    for name in external_bases:
        last = name.rpartition(".")[2]
        if "Queue" in last:
            return "queue"
        if last in ("deque",):
            return "deque"
        if last in ("list", "UserList"):
            return "list"
        if last in ("set", "MutableSet"):
            return "set"
    return "dict"
