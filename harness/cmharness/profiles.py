"""A pricing profile (a JSON file in harness/profiles/): which servers, which rows, how long, how
many rounds. Every knob has a cm-price flag that overrides it, so the same command prices a bigger
machine.

    {"name": "quick", "rounds": 6, "duration_s": 1.0, "warmup_s": 0.3,
     "ceiling_window": {"duration_s": 0.75, "warmup_s": 0.25},
     "models": "all", "peers": ["nginx", "node"], "server": {"blocking_workers": 64, "pool": 64},
     "fresh_server": false, "chart": "bars",
     "rows": [{"id": "plaintext", "path": "/plaintext", "connections": [128], "cpu_ceiling": true},
              {"id": "delay", "path": "/delay/{ms}", "delay_ms": [100], "connections": [2000],
               "sweep": true, "stagger": true}]}

A row with "cpu_ceiling" is the server's CPU ceiling: it is measured in short windows on servers
kept running, alternated between the servers in each round (ceiling_window), and again right before
every other row of the same server (back to back), which is priced against it.

"models" is "all", "async" or a list of model names; a row with "body" POSTs it and expects it back
(POST /echo); "database": true starts a PostgreSQL cluster for the run (cmharness.database) and
points every server at it (--db), for rows on /db/ routes; "published" holds a published table the profile reproduces (seed-echo.json): its
figures are shown beside the run's own ratios.
"""

import dataclasses
import json
import os

from . import ROOT
from .servers import PEERS

PROFILES_DIR = os.path.join(ROOT, "harness", "profiles")
CHARTS = ("bars", "sweep", "offload")
#: "pricing": rows priced against their ceilings in rounds (price.Runner); "latency": each row's
#: closed-loop capacity, then open-loop runs at shares of it (latency.LatencyRunner).
KINDS = ("pricing", "latency")


class ProfileError(ValueError):
    pass


@dataclasses.dataclass
class Variant:
    name: str = "standard"
    server_args: list = dataclasses.field(default_factory=list)
    # The models this variant runs ("all", "async" or a list of names): a flag only some
    # models take (--db-mode: how an async model waits) is not run on the others.
    models: "str | list" = "all"
    # Its rows' windows last at least this long (s; 0: the profile's duration_s): a variant whose
    # answers leave in batches needs a window of many batches, or a window holds a whole number of
    # them and its rate is a multiple of one batch (db.json's driver on the loop:
    # Profile.window_s).
    min_duration_s: float = 0.0


@dataclasses.dataclass
class Row:
    """One concrete row: a path at one delay and one connection count."""

    id: str
    path: str  # a template while it has {ms}
    connections: int
    delay: "str | None" = None  # "100" or "10:90"
    cpu_ceiling: bool = False
    stagger: bool = False
    sweep: bool = False
    body: "str | None" = None  # a POST of this body (POST /echo answers it back); None: a GET

    @property
    def method(self):
        return "GET" if self.body is None else "POST"

    @property
    def mean_delay_ms(self):
        """The mean of the delay, or N of a literal /delay/N or /block/N; 0 otherwise."""
        if self.delay is not None:
            lo, hi = parse_delay(self.delay)
            return (lo + hi) / 2
        for prefix in ("/delay/", "/block/"):
            if self.path.startswith(prefix) and self.path[len(prefix):].isdigit():
                return float(self.path[len(prefix):])
        return 0.0

    @property
    def compute_us(self):
        tail = self.path[len("/cpu/"):] if self.path.startswith("/cpu/") else ""
        return float(tail) if tail.isdigit() else 0.0

    @property
    def key(self):
        """"delay 100 2000": what names the row in a table, a claim and a figure."""
        return f"{self.id} {self.delay or '-'} {self.connections}"

    def label(self):
        path = self.path.replace("{ms}", self.delay) if self.delay else self.path
        method = "" if self.body is None else f"{self.method} "
        return f"{method}{path} x {self.connections:,}"


@dataclasses.dataclass
class Profile:
    name: str
    description: str = ""
    summary: str = ""  # what was run, in a sentence or two a newcomer reads first
    duration_s: float = 2.0
    warmup_s: float = 0.5
    ceiling_duration_s: float = 0.75
    ceiling_warmup_s: float = 0.25
    ceiling_rounds: int = 15  # sprints: the within-round ratios between servers
    rounds: int = 6
    # More rounds, up to this many, for a row whose efficiency interval is still too wide to
    # tell a change from the noise after `rounds` (0: no more than `rounds`).
    max_rounds: int = 0
    timeout_ms: "int | None" = None
    models: str = "all"
    peers: list = dataclasses.field(default_factory=list)
    published: "dict | None" = None  # a published table this profile reproduces (_published)
    blocking_workers: int = 64
    pool: int = 64
    loops: "int | None" = None
    server_cpus: "int | None" = None
    load_threads: "int | None" = None
    fresh_server: bool = False
    stagger_cap_ms: int = 4000
    ceiling_margin: float = 2.0  # a CPU ceiling this many times the lowest other one cannot bind
    # The back-to-back ceiling window with as many connections as the row (the sprint keeps the
    # ceiling row's): a server whose cost per request falls with more connections in flight
    # (an io_uring loop batching more completions per turn) is not priced against too low a
    # ceiling.
    ceiling_at_row_connections: bool = False
    # Each variant its own CPU ceiling (its own sprints), not its server's first variant's.
    ceiling_per_variant: bool = False
    # Every other window around a /delay row is /delay/N instead of /plaintext (0: none): a
    # server may answer /delay/100 more cheaply than /plaintext with as many connections.
    ceiling_delay_ms: int = 0
    # A fresh server's first ceiling window warms it this much longer (a JIT, a runtime's pools).
    ceiling_fresh_warmup_s: float = 0.0
    chart: str = "bars"
    variants: list = dataclasses.field(default_factory=lambda: [Variant()])
    # A row with more connections is spread over several cm-load processes (one process holds
    # at most this many here: 20,000 open files), measuring one window, merged.
    connections_per_load: int = 19_000
    kind: str = "pricing"
    # Bytes per waiting request (cmharness.memory), measured on fresh servers after validation:
    # this many requests left waiting in an async model or a peer; the blocking model, one per
    # worker (0: not measured).
    memory_waiting: int = 0
    rates_percent: list = dataclasses.field(default_factory=list)  # latency: offered, % of capacity
    # A PostgreSQL cluster for the run, every server pointed at it (--db): the /db/ routes.
    database: bool = False
    rows: list = dataclasses.field(default_factory=list)  # Row, CPU-ceiling rows first

    def window_s(self, variant):
        """The measured seconds of a row's window in this variant: the profile's, or longer where
        the variant asks for more (Variant.min_duration_s)."""
        return max(self.duration_s, variant.min_duration_s)


def parse_delay(text):
    """"100" -> (100, 100); "10:90" -> (10, 90); ProfileError otherwise."""
    parts = str(text).split(":")
    if len(parts) > 2 or not all(p.isdigit() for p in parts):
        raise ProfileError(f'delay "{text}": expected ms ("100") or a range ("10:90")')
    lo, hi = int(parts[0]), int(parts[-1])
    if lo > hi or hi > 60000:
        raise ProfileError(f'delay "{text}": expected 0 <= A <= B <= 60000')
    return lo, hi


def _only(d, keys, where):
    for k in d:
        if k not in keys:
            raise ProfileError(f'{where}: unknown key "{k}"')


def _positive(v, where):
    if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
        raise ProfileError(f"{where}: expected a positive number, not {v!r}")
    return v


_TOP = {"name", "description", "summary", "published", "duration_s", "warmup_s", "ceiling_window",
        "rounds", "max_rounds", "timeout_ms",
        "models", "peers", "server", "load_threads", "fresh_server", "stagger_cap_ms", "chart",
        "ceiling_margin",
        "variants", "rows", "kind", "rates_percent", "connections_per_load", "memory",
        "database"}
_ROW = {"id", "path", "delay_ms", "connections", "sweep", "cpu_ceiling", "stagger", "body"}


def parse(doc):
    """A Profile from its JSON document; ProfileError naming the key that is wrong or unknown."""
    _only(doc, _TOP, "profile")
    if "name" not in doc:
        raise ProfileError('profile: "name" is required')
    p = Profile(name=doc["name"], description=doc.get("description", ""),
                summary=doc.get("summary", ""))
    for key in ("duration_s", "warmup_s", "rounds", "max_rounds", "timeout_ms", "load_threads",
                "stagger_cap_ms", "ceiling_margin", "connections_per_load"):
        if key in doc:
            setattr(p, key, _positive(doc[key], key) if key != "warmup_s" else float(doc[key]))
    window = doc.get("ceiling_window", {})
    _only(window, {"duration_s", "warmup_s", "rounds", "connections", "per_variant", "delay_ms",
                   "fresh_warmup_s"}, "ceiling_window")
    if window.get("connections", "row") not in ("row",):
        raise ProfileError('ceiling_window.connections: "row" (or leave it out)')
    p.ceiling_at_row_connections = "connections" in window
    p.ceiling_rounds = int(window.get("rounds", p.ceiling_rounds))
    p.ceiling_per_variant = bool(window.get("per_variant", False))
    p.ceiling_duration_s = float(window.get("duration_s", p.ceiling_duration_s))
    p.ceiling_warmup_s = float(window.get("warmup_s", p.ceiling_warmup_s))
    p.ceiling_delay_ms = int(window.get("delay_ms", 0))
    p.ceiling_fresh_warmup_s = float(window.get("fresh_warmup_s", 0.0))
    p.published = _published(doc.get("published"))
    p.models = doc.get("models", "all")
    if isinstance(p.models, list):
        if not p.models or not all(isinstance(m, str) and m not in PEERS for m in p.models):
            raise ProfileError('models: a non-empty list of model names (no peer)')
    elif p.models not in ("all", "async"):
        raise ProfileError('models: "all", "async" or a list of models')
    p.peers = list(doc.get("peers", []))
    for peer in p.peers:
        if peer not in PEERS:
            raise ProfileError(f'peers: one of {", ".join(PEERS)}, not "{peer}"')
    server = doc.get("server", {})
    _only(server, {"blocking_workers", "pool", "loops", "cpus"}, "server")
    p.blocking_workers = int(server.get("blocking_workers", p.blocking_workers))
    p.pool = int(server.get("pool", p.pool))
    p.loops = server.get("loops")
    p.server_cpus = server.get("cpus")
    p.fresh_server = bool(doc.get("fresh_server", False))
    memory = doc.get("memory", {})
    _only(memory, {"waiting"}, "memory")
    if "waiting" in memory:
        p.memory_waiting = int(_positive(memory["waiting"], "memory.waiting"))
    p.chart = doc.get("chart", "bars")
    if p.chart not in CHARTS:
        raise ProfileError(f"chart: one of {', '.join(CHARTS)}")
    p.kind = doc.get("kind", "pricing")
    if p.kind not in KINDS:
        raise ProfileError(f"kind: one of {', '.join(KINDS)}")
    p.rates_percent = [_positive(r, "rates_percent") for r in doc.get("rates_percent", [])]
    if (p.kind == "latency") != bool(p.rates_percent):
        raise ProfileError('rates_percent: a latency profile needs them, a pricing one has none')
    if p.rates_percent != sorted(set(p.rates_percent)):
        raise ProfileError("rates_percent: ascending, each once")
    if "variants" in doc:
        p.variants = [_variant(v, i) for i, v in enumerate(doc["variants"])]
    if not doc.get("rows"):
        raise ProfileError("rows: expected a non-empty list")
    p.rows = _rows(doc["rows"])
    if not isinstance(doc.get("database", False), bool):
        raise ProfileError("database: true or false")
    p.database = doc.get("database", False)
    if not p.database and any(r.path.startswith("/db/") for r in p.rows):
        raise ProfileError('rows: a /db/ route needs "database": true')
    for row in (p.published or {}).get("rows", []):
        if row.get("row") not in {r.id for r in p.rows}:
            raise ProfileError(f'published.rows: "{row.get("row")}" is not a row id of the profile')
    return p


_PUBLISHED = {"source", "setting", "a", "b", "rows", "differs"}
_PUBLISHED_ROW = {"row", "as", "a_rps", "b_rps", "a_latency_us", "b_latency_us"}


def _published(doc):
    """A published table the profile reproduces (None: none): where it comes from, how it was
    run, the two servers compared ("a" over "b", as named here), and per row of this profile its
    figures there -- rps and mean latency of each -- with what differs here."""
    if doc is None:
        return None
    _only(doc, _PUBLISHED, "published")
    for key in ("source", "setting", "a", "b", "differs"):
        if not isinstance(doc.get(key), str):
            raise ProfileError(f'published.{key}: a string is required')
    if not doc.get("rows"):
        raise ProfileError("published.rows: expected a non-empty list")
    for i, row in enumerate(doc["rows"]):
        _only(row, _PUBLISHED_ROW, f"published.rows[{i}]")
        for key in ("a_rps", "b_rps", "a_latency_us", "b_latency_us"):
            _positive(row.get(key), f"published.rows[{i}].{key}")
    return doc


def _variant(spec, i):
    where = f"variants[{i}]"
    _only(spec, {"name", "server_args", "models", "min_duration_s"}, where)
    models = spec.get("models", "all")
    if not (models in ("all", "async") or (isinstance(models, list) and models)):
        raise ProfileError(f'{where}.models: "all", "async" or a list of models')
    least = spec.get("min_duration_s")
    least = 0.0 if least is None else float(_positive(least, where + ".min_duration_s"))
    return Variant(spec["name"], list(spec.get("server_args", [])), models, least)


def _rows(specs):
    rows = []
    for i, spec in enumerate(specs):
        where = f"rows[{i}]"
        _only(spec, _ROW, where)
        if "{ms}" in spec["path"] and not spec.get("delay_ms"):
            raise ProfileError(f"{where}: a path with {{ms}} needs delay_ms")
        body = spec.get("body")
        if body is not None and (not isinstance(body, str) or spec.get("cpu_ceiling")):
            raise ProfileError(f"{where}: body is the text a row POSTs (not on a cpu_ceiling row)")
        delays = [str(d) for d in spec.get("delay_ms", [])] or [None]
        for d in delays:
            if d is not None:
                parse_delay(d)
            for c in spec["connections"]:
                rows.append(Row(spec["id"], spec["path"], int(_positive(c, where + ".connections")),
                                d, bool(spec.get("cpu_ceiling")), bool(spec.get("stagger")),
                                bool(spec.get("sweep")), body))
    return sorted(rows, key=lambda r: not r.cpu_ceiling)  # stable: file order otherwise


def prices_model(profile, name):
    """Whether a profile's "models" ("all", "async" or a list) takes this model."""
    return takes(profile.models, name)


def takes(models, name):
    """Whether "all", "async" or a list of model names takes this model."""
    if isinstance(models, list):
        return name in models
    return not (models == "async" and name == "blocking")


def load(name_or_path, profiles_dir=PROFILES_DIR):
    path = name_or_path if os.path.isfile(name_or_path) else \
        os.path.join(profiles_dir, f"{name_or_path}.json")
    try:
        with open(path) as f:
            doc = json.load(f)
    except FileNotFoundError:
        known = sorted(n[:-5] for n in os.listdir(profiles_dir) if n.endswith(".json"))
        raise ProfileError(f'no profile "{name_or_path}" (known: {", ".join(known)})') from None
    except json.JSONDecodeError as e:
        raise ProfileError(f"{path}: {e}") from None
    return parse(doc)


def summary_of(meta):
    """What a results page opens with: the run's summary, or (a run written before profiles had
    one) its profile's as committed now, or the description's first sentence."""
    if meta.get("summary"):
        return meta["summary"]
    try:
        committed = load(meta["profile"]).summary
    except (ProfileError, KeyError):
        committed = ""
    return committed or meta.get("description", "").split(". ")[0].rstrip(".") + "."


def apply_overrides(p, *, connections=None, delays=None, **knobs):
    """Applies cm-price's flags: `connections` and `delays` replace the sweep rows' lists; every
    other knob (rounds, duration_s, ...) replaces the profile's value when it is not None."""
    for key, value in knobs.items():
        if value is not None:
            if not hasattr(p, key):
                raise ProfileError(f"unknown knob {key}")
            setattr(p, key, value)
    if connections or delays:
        fixed = [r for r in p.rows if not r.sweep]
        swept = {}
        for r in p.rows:
            if r.sweep:
                swept.setdefault((r.id, r.path), r)
        for r in swept.values():
            for d in (delays or [r.delay]):
                for c in (connections or [r.connections]):
                    fixed.append(dataclasses.replace(r, delay=d, connections=int(c)))
        p.rows = sorted(fixed, key=lambda r: not r.cpu_ceiling)
    if p.rounds < 1 or p.ceiling_rounds < 1:
        raise ProfileError("rounds: at least 1")
    return p


def timeout_ms(p, row):
    """cm-load's --timeout for a row: the profile's, or max(2000, 3 x the longest delay) ms."""
    if p.timeout_ms:
        return int(p.timeout_ms)
    longest = parse_delay(row.delay)[1] if row.delay else row.mean_delay_ms
    return int(max(2000, 3 * longest))
