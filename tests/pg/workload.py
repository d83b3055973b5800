"""The source database's workload: two tables, their first rows, and random transactions from client threads.

Each client owns the keys in its partition (key % partitions), so threads never wait on each other's rows and
each knows its live keys exactly; commits still interleave across threads. Transactions hold several
statements, roll back now and then, update one key repeatedly, delete and re-insert a key, change primary
keys, and write every supported type's edge values (unicode, commas, quotes and line breaks in text, NULL
against the empty string, type boundaries). Seeded per client; thread timing is not.
"""

from __future__ import annotations

import datetime as dt
import random
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import psycopg

SCHEMA = """
CREATE TABLE public.accounts (
    id bigint PRIMARY KEY,
    name text,
    note varchar(300),
    qty integer,
    small smallint,
    amount numeric(12,2),
    ratio real,
    score double precision,
    active boolean,
    born date,
    seen_at timestamp
);
CREATE TABLE public.order_lines (
    order_id integer,
    line_no smallint,
    sku text NOT NULL,
    price numeric(10,3),
    shipped boolean,
    PRIMARY KEY (order_id, line_no)
);
"""
ADD_COLUMN = "ALTER TABLE public.accounts ADD COLUMN tier text"
WIDEN = "ALTER TABLE public.accounts ALTER COLUMN qty TYPE bigint"

TEXTS = [
    "", "plain", "comma, inside", 'quote " inside', "it's", '"quoted"', "line1\nline2", "crlf1\r\nline2\r\n",
    " leading", "trailing ", "   ", "tab\tinside", "café é", "日本語テキスト", "emoji 🎉🚀 mix", "NULL", "null",
    "back\\slash\\", 'multi, "all"\r\nof\nthem', "x" * 290, "Zoë O'Brien", "semi;colon|pipe",
]  # fmt: skip
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
EDGES: dict[str, list[Any]] = {
    "small": [-(2**15), 2**15 - 1, 0, -1],
    "amount": [Decimal("9999999999.99"), Decimal("-9999999999.99"), Decimal("0.00"), Decimal("0.01")],
    "ratio": [3.4028234663852886e38, -3.4028234663852886e38, 1.1754943508222875e-38, 0.0, -1.5, 0.1],
    "score": [1.7976931348623157e308, -1.7976931348623157e308, 2.2250738585072014e-308, 0.1, -2.5e-05, 0.0],
    "born": [dt.date(1900, 1, 1), dt.date(9999, 12, 31), dt.date(2024, 2, 29), dt.date(1970, 1, 1)],
    "seen_at": [
        dt.datetime(1900, 1, 1),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
        dt.datetime(2024, 2, 29, 12, 34, 56, 1),
        dt.datetime(1970, 1, 1, 0, 0, 0, 1),
    ],
    "price": [Decimal("9999999.999"), Decimal("-9999999.999"), Decimal("0.000"), Decimal("0.001")],
}


@dataclass
class SourceState:
    """What the source's schema allows now (the ALTERs flip these between rounds)."""

    has_tier: bool = False
    widened: bool = False


@dataclass
class WorkloadStats:
    committed: int = 0
    rolled_back: int = 0
    statements: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, committed: bool, statements: Counter[str]) -> None:
        with self.lock:
            if committed:
                self.committed += 1
                self.statements.update(statements)
            else:
                self.rolled_back += 1


class Client:
    """One client connection and the keys it owns."""

    def __init__(
        self, conninfo: str, index: int, partitions: int, seed: int, state: SourceState, stats: WorkloadStats
    ) -> None:
        self.connection = psycopg.connect(conninfo)
        self.index = index
        self.partitions = partitions
        self.rng = random.Random(f"{seed}/client/{index}")
        self.state = state
        self.stats = stats
        self.accounts: set[int] = set()
        self.lines: set[tuple[int, int]] = set()
        self._next_account = index or partitions
        self._next_order = index or partitions

    def close(self) -> None:
        self.connection.close()

    # -- keys --

    def new_account_id(self) -> int:
        self._next_account += self.partitions
        return self._next_account

    def new_line_key(self, lines: set[tuple[int, int]]) -> tuple[int, int]:
        if self.rng.random() < 0.5 and lines:
            order_id = self.rng.choice(sorted(lines))[0]
            used = {line for order, line in lines if order == order_id}
            free = [n for n in range(1, 40) if n not in used]
            if free:
                return order_id, self.rng.choice(free)
        self._next_order += self.partitions
        return self._next_order, 1

    # -- values --

    def _pick(self, column: str, make: Callable[[], Any], null: bool = True) -> Any:
        roll = self.rng.random()
        if null and roll < 0.08:
            return None
        if roll < 0.25 and column in EDGES:
            return self.rng.choice(EDGES[column])
        return make()

    def account_values(self) -> dict[str, Any]:
        rng = self.rng
        low, high = INT64 if self.state.widened else INT32
        values = {
            "name": self._pick("name", lambda: rng.choice(TEXTS)),
            "note": self._pick("note", lambda: rng.choice(TEXTS)),
            "qty": self._pick("qty", lambda: rng.choice([low, high, 0, rng.randint(-1000, 1000), high // 3])),
            "small": self._pick("small", lambda: rng.randint(-500, 500)),
            "amount": self._pick("amount", lambda: Decimal(rng.randint(-(10**8), 10**8)).scaleb(-2)),
            "ratio": self._pick("ratio", lambda: rng.uniform(-1000, 1000)),
            "score": self._pick("score", lambda: rng.uniform(-1e6, 1e6)),
            "active": self._pick("active", lambda: rng.random() < 0.6),
            "born": self._pick("born", lambda: dt.date(1950, 1, 1) + dt.timedelta(days=rng.randint(0, 25000))),
            "seen_at": self._pick(
                "seen_at", lambda: dt.datetime(2020, 1, 1) + dt.timedelta(microseconds=rng.randint(0, 10**14))
            ),
        }
        if self.state.has_tier:
            values["tier"] = self._pick("tier", lambda: rng.choice(["gold", "silver", "", "bronze, 2nd"]))
        return values

    def line_values(self) -> dict[str, Any]:
        rng = self.rng
        return {
            "sku": rng.choice(TEXTS[1:] + [f"SKU-{rng.randint(0, 999999):06d}"] * 5),
            "price": self._pick("price", lambda: Decimal(rng.randint(0, 10**7)).scaleb(-3)),
            "shipped": self._pick("shipped", lambda: rng.random() < 0.5),
        }

    # -- statements --

    def _insert(self, table: str, key: dict[str, Any], values: dict[str, Any]) -> None:
        row = {**key, **values}
        names = ", ".join(row)
        marks = ", ".join(["%s"] * len(row))
        self.connection.execute(f"INSERT INTO public.{table} ({names}) VALUES ({marks})", list(row.values()))

    def _update(self, table: str, key: dict[str, Any], values: dict[str, Any]) -> None:
        sets = ", ".join(f"{name} = %s" for name in values)
        where = " AND ".join(f"{name} = %s" for name in key)
        self.connection.execute(f"UPDATE public.{table} SET {sets} WHERE {where}", [*values.values(), *key.values()])

    def _delete(self, table: str, key: dict[str, Any]) -> None:
        where = " AND ".join(f"{name} = %s" for name in key)
        self.connection.execute(f"DELETE FROM public.{table} WHERE {where}", list(key.values()))

    def _some(self, values: dict[str, Any]) -> dict[str, Any]:
        names = self.rng.sample(sorted(values), self.rng.randint(1, 3))
        return {name: values[name] for name in names}

    def seed_rows(self, accounts: int, lines: int) -> None:
        with self.connection.transaction():
            for _ in range(accounts):
                key = self.new_account_id()
                self._insert("accounts", {"id": key}, self.account_values())
                self.accounts.add(key)
            for _ in range(lines):
                order_id, line_no = self.new_line_key(self.lines)
                self._insert("order_lines", {"order_id": order_id, "line_no": line_no}, self.line_values())
                self.lines.add((order_id, line_no))

    def transaction(self) -> None:
        accounts, lines = set(self.accounts), set(self.lines)
        done: Counter[str] = Counter()
        rollback = self.rng.random() < 0.1
        try:
            with self.connection.transaction():
                for _ in range(self.rng.randint(1, 5)):
                    done[self._statement(accounts, lines)] += 1
                if rollback:
                    raise psycopg.Rollback()
        finally:
            self.stats.add(not rollback, done)
        if not rollback:
            self.accounts, self.lines = accounts, lines

    def _statement(self, accounts: set[int], lines: set[tuple[int, int]]) -> str:
        rng = self.rng
        kind = rng.choices(
            ["insert", "update", "delete", "repeat", "reinsert", "key", "line_insert", "line_update",
             "line_delete", "line_key"],
            weights=[14, 18, 7, 5, 4, 4, 14, 14, 7, 5],
        )[0]  # fmt: skip
        if kind.startswith("line"):
            return self._line_statement(kind, lines)
        if kind == "insert" or not accounts:
            key = self.new_account_id()
            self._insert("accounts", {"id": key}, self.account_values())
            accounts.add(key)
            return "insert"
        key = rng.choice(sorted(accounts))
        if kind == "update":
            self._update("accounts", {"id": key}, self._some(self.account_values()))
        elif kind == "repeat":  # one key updated several times in one transaction
            for _ in range(rng.randint(2, 4)):
                self._update("accounts", {"id": key}, self._some(self.account_values()))
        elif kind == "delete":
            self._delete("accounts", {"id": key})
            accounts.discard(key)
        elif kind == "reinsert":  # delete, then insert the same key again
            self._delete("accounts", {"id": key})
            self._insert("accounts", {"id": key}, self.account_values())
        else:  # a primary-key update, sometimes with other columns
            new_key = self.new_account_id()
            extra = self._some(self.account_values()) if rng.random() < 0.5 else {}
            self._update("accounts", {"id": key}, {"id": new_key, **extra})
            accounts.discard(key)
            accounts.add(new_key)
        return kind

    def _line_statement(self, kind: str, lines: set[tuple[int, int]]) -> str:
        if kind == "line_insert" or not lines:
            order_id, line_no = self.new_line_key(lines)
            self._insert("order_lines", {"order_id": order_id, "line_no": line_no}, self.line_values())
            lines.add((order_id, line_no))
            return "line_insert"
        order_id, line_no = self.rng.choice(sorted(lines))
        key = {"order_id": order_id, "line_no": line_no}
        if kind == "line_update":
            self._update("order_lines", key, self._some(self.line_values()))
        elif kind == "line_delete":
            self._delete("order_lines", key)
            lines.discard((order_id, line_no))
        else:
            new_order, new_line = self.new_line_key(lines)
            self._update("order_lines", key, {"order_id": new_order, "line_no": new_line})
            lines.discard((order_id, line_no))
            lines.add((new_order, new_line))
        return kind


class Workload:
    """``threads`` clients running transactions concurrently, plus one more for changes made in between
    (while LOAD files are written)."""

    def __init__(self, conninfo: str, seed: int, threads: int = 4) -> None:
        self.conninfo = conninfo
        self.state = SourceState()
        self.stats = WorkloadStats()
        partitions = threads + 1
        self.clients = [Client(conninfo, i, partitions, seed, self.state, self.stats) for i in range(threads)]
        self.between = Client(conninfo, threads, partitions, seed, self.state, self.stats)

    def close(self) -> None:
        for client in [*self.clients, self.between]:
            client.close()

    def create(self, accounts: int, lines: int) -> None:
        with psycopg.connect(self.conninfo, autocommit=True) as admin:
            admin.execute(SCHEMA)
        for client in [*self.clients, self.between]:
            client.seed_rows(accounts // (len(self.clients) + 1), lines // (len(self.clients) + 1))

    def run(self, transactions: int) -> None:
        """Run about ``transactions`` transactions spread over the client threads; returns when all ended."""
        share = max(1, transactions // len(self.clients))
        with ThreadPoolExecutor(len(self.clients)) as pool:
            futures = [pool.submit(self._run_client, client, share) for client in self.clients]
        for future in futures:
            future.result()

    def run_in_background(self, transactions: int) -> Callable[[], None]:
        """Start the clients and return a function that waits for them to finish."""
        share = max(1, transactions // len(self.clients))
        pool = ThreadPoolExecutor(len(self.clients))
        futures = [pool.submit(self._run_client, client, share) for client in self.clients]

        def wait() -> None:
            pool.shutdown(wait=True)
            for future in futures:
                future.result()

        return wait

    def in_between(self, transactions: int = 3) -> None:
        self._run_client(self.between, transactions)

    @staticmethod
    def _run_client(client: Client, transactions: int) -> None:
        for _ in range(transactions):
            client.transaction()

    def alter(self, statement: str) -> None:
        with psycopg.connect(self.conninfo, autocommit=True) as admin:
            admin.execute(statement)
        if statement == ADD_COLUMN:
            self.state.has_tier = True
        elif statement == WIDEN:
            self.state.widened = True
