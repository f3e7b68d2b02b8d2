"""The order a round takes its servers (or clients) in: one place for every tool that measures in
rounds, so that a slow minute of the machine falls on a different one each round and the pairs
taken within a round stay comparable.

    shuffle    a random order each round (from the caller's seeded random.Random: repeatable)
    rotate     the list rotated by a share of it each round, reversed every other round: each
               item leads about equally often (cost, whose rounds are few and whose servers many)
    alternate  the list as given, reversed every other round (two or three clients on one target)
"""
import random

POLICIES = ("shuffle", "rotate", "alternate")


def order(items, rnd, rounds, policy, rng=None):
    """The items in the order round `rnd` (from 0) of `rounds` takes them, by `policy`."""
    items = list(items)
    if policy == "shuffle":
        (rng or random.Random(rnd)).shuffle(items)
        return items
    if policy == "rotate":
        n = len(items)
        if n == 0:
            return items
        step = max(1, -(-n // max(1, rounds)))
        k = (rnd * step) % n
        items = items[k:] + items[:k]
        return items[::-1] if rnd % 2 else items
    if policy == "alternate":
        return items[::-1] if rnd % 2 else items
    raise ValueError(f"no round order {policy!r}: one of {', '.join(POLICIES)}")
