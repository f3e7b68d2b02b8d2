"""cmharness.rounds: the order each round takes its items in, by policy."""
import os
import random
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cmharness import rounds  # noqa: E402

SERVERS = ["a", "b", "c", "d", "e", "f"]


class Orders(unittest.TestCase):
    def test_rotate_puts_each_server_at_an_end_and_reverses_every_other_round(self):
        orders = [rounds.order(SERVERS, r, 6, "rotate") for r in range(6)]
        self.assertEqual(orders[0], SERVERS)
        self.assertEqual(orders[1], ["a", "f", "e", "d", "c", "b"])  # rotated by one, reversed
        for o in orders:
            self.assertEqual(sorted(o), SERVERS)
        ends = {o[0] for o in orders} | {o[-1] for o in orders}
        self.assertEqual(ends, set(SERVERS))  # each server leads or closes some round

    def test_rotate_gives_costs_five_servers_six_different_orders(self):
        servers = ["blocking", "asio_coro", "libuv_callbacks", "nginx", "node"]
        orders = [rounds.order(servers, r, 6, "rotate") for r in range(6)]
        self.assertEqual(len({tuple(o) for o in orders}), 6)
        for s in servers:  # no server holds one place in every round
            self.assertGreater(len({o.index(s) for o in orders}), 1)

    def test_alternate_reverses_every_other_round(self):
        self.assertEqual(rounds.order(["wrk", "h2load"], 0, 4, "alternate"), ["wrk", "h2load"])
        self.assertEqual(rounds.order(["wrk", "h2load"], 1, 4, "alternate"), ["h2load", "wrk"])

    def test_shuffle_is_repeatable_from_the_callers_seed(self):
        first = [rounds.order(SERVERS, r, 6, "shuffle", random.Random(7)) for r in range(3)]
        again = [rounds.order(SERVERS, r, 6, "shuffle", random.Random(7)) for r in range(3)]
        self.assertEqual(first, again)
        self.assertEqual(sorted(first[0]), SERVERS)

    def test_the_callers_list_is_left_as_it_was(self):
        mine = list(SERVERS)
        rounds.order(mine, 1, 6, "rotate")
        rounds.order(mine, 1, 6, "shuffle")
        self.assertEqual(mine, SERVERS)

    def test_an_unknown_policy_is_refused_by_name(self):
        with self.assertRaisesRegex(ValueError, "no round order 'random'"):
            rounds.order(SERVERS, 0, 6, "random")

    def test_nothing_to_order(self):
        self.assertEqual(rounds.order([], 3, 6, "rotate"), [])


if __name__ == "__main__":
    unittest.main()
