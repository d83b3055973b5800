"""The simulated source table: initial rows, changes during the full load, CDC changes and scripted edge cases."""

from __future__ import annotations

import operator
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial

from cdc_lake.local.generator.spec import DEFAULT_START_TIME, GeneratorSpec, SchemaChange
from cdc_lake.local.generator.values import Row, Shape, TableModel

# Timeline of one table, relative to GeneratorSpec.start_time (when the full load and change capture start).
_CACHED_FROM = timedelta(seconds=1)  # cached changes commit in [1 s, 9 s) ...
_CACHED_SPAN_US = 8_000_000
_LOAD_FROM = timedelta(seconds=10)  # ... before DMS transfers LOAD file j at 10 s + j s
_LOAD_FILE_GAP = timedelta(seconds=1)
_TABLE_NAME_OFFSET_MS = 211  # CDC file names of different tables differ by this much per table index


@dataclass
class Change:
    op: str
    row: Row
    ts: datetime = DEFAULT_START_TIME  # commit time, set when the file's transactions get their timestamps
    seq: str = ""
    # The row before an UPDATE that changed its key: written in DMS's before-image columns when the endpoint
    # has them, kept either way (without them the oracle keeps the old row: oracle.stale_key_rows).
    before: Row | None = None


@dataclass
class Step:
    """A scripted part of an edge case, run at a random place inside CDC file ``file``."""

    file: int
    size: int
    run: Callable[[], list[Change]]
    one_commit: bool = False  # its changes share one commit timestamp (when timestamp_ties)


@dataclass
class LoadFile:
    ts: datetime
    rows: list[Row]
    shape: Shape


@dataclass
class CdcFile:
    written_at: datetime
    changes: list[Change]
    shape: Shape  # the source's columns when DMS wrote the file


@dataclass
class TablePlan:
    load_files: list[LoadFile]
    cdc_files: list[CdcFile]
    source_rows: dict[int, Row]  # the simulated source table at the end
    ghost_rows: list[Row]  # after-images of updates to keys the source never had: the replay upserts them


class SourceSimulation:
    """One source table over time. Source operations are strict (like the database); edge cases are scripted."""

    def __init__(self, model: TableModel, spec: GeneratorSpec, batch_interval_s: int, table_index: int) -> None:
        self.model = model
        self.spec = spec
        self.rng = random.Random(f"{spec.seed}/{model.table.name}/changes")
        self.interval = timedelta(seconds=batch_interval_s)
        self.table_index = table_index
        self.rows: dict[int, Row] = {}
        self.reserved: set[int] = set()  # live keys that random changes leave alone (scripted edge cases own them)
        self.recent: deque[int] = deque(maxlen=32)
        self.ghost_rows: list[Row] = []
        self.next_ordinal = 0
        self.schema_changes = [c for c in spec.schema_changes if c.table == model.table.name]
        self.key_updates = model.before_image if spec.key_updates is None else spec.key_updates

    # -- the source database ------------------------------------------------------------------------

    def _new_ordinal(self) -> int:
        self.next_ordinal += 1
        return self.next_ordinal - 1

    def _insert(self, ordinal: int, row: Row | None = None) -> Change:
        if ordinal in self.rows:
            raise AssertionError(f"generator bug: insert of existing key {ordinal}")
        self.rows[ordinal] = self.model.conform(row) if row is not None else self.model.new_row(ordinal, self.rng)
        return Change("I", self.rows[ordinal])

    def _update(self, ordinal: int, row: Row | None = None) -> Change:
        if ordinal not in self.rows:
            raise AssertionError(f"generator bug: update of missing key {ordinal}")
        changed = row if row is not None else self.model.changed_row(self.rows[ordinal], self.rng)
        self.rows[ordinal] = self.model.conform(changed)
        return Change("U", self.rows[ordinal])

    def _delete(self, ordinal: int) -> Change:
        return Change("D", self.rows.pop(ordinal))

    def _pick(self) -> int | None:
        """A random live key that no edge case holds; recently touched keys are favoured, as in real workloads."""
        rng = self.rng
        if self.recent and rng.random() < 0.25:
            candidate = rng.choice(self.recent)
            if candidate in self.rows and candidate not in self.reserved:
                return candidate
        for _ in range(32 if self.next_ordinal else 0):
            candidate = rng.randrange(self.next_ordinal)
            if candidate in self.rows and candidate not in self.reserved:
                return candidate
        live = [key for key in self.rows if key not in self.reserved]
        return rng.choice(live) if live else None

    def _pick_or_insert(self, changes: list[Change]) -> int:
        ordinal = self._pick()
        if ordinal is None:
            ordinal = self._new_ordinal()
            changes.append(self._insert(ordinal))
        return ordinal

    def _random_change(self) -> Change:
        draw = self.rng.random()
        if draw >= self.spec.insert_ratio:
            ordinal = self._pick()
            if ordinal is not None:
                self.recent.append(ordinal)
                if draw < self.spec.insert_ratio + self.spec.update_ratio:
                    return self._update(ordinal)
                return self._delete(ordinal)
        ordinal = self._new_ordinal()
        self.recent.append(ordinal)
        return self._insert(ordinal)

    # -- the timeline ---------------------------------------------------------------------------------

    def run(self) -> TablePlan:
        start = self.spec.start_time
        self._initial_state()
        cached = self._stamp(self._cached_transactions(), start + _CACHED_FROM, _CACHED_SPAN_US)
        load_files = self._load_files()
        load_end = start + _LOAD_FROM + len(load_files) * _LOAD_FILE_GAP
        steps = self._edge_steps() if self.spec.edge_cases and self.spec.cdc_files else []
        steps += self._schema_steps()
        span_us = self.interval // timedelta(microseconds=1)
        name_offset = timedelta(milliseconds=_TABLE_NAME_OFFSET_MS * self.table_index)
        cdc_files = []
        for index in range(self.spec.cdc_files):
            for change in self.schema_changes:
                if change.after_file == index - 1:
                    self.model.apply(change)
            window = load_end + index * self.interval
            transactions = self._file_transactions([s for s in steps if s.file == index])
            changes = self._stamp(transactions, window, span_us)
            if index == 0:
                changes = cached + changes
            jitter = timedelta(milliseconds=self.rng.randint(0, 99))
            cdc_files.append(CdcFile(window + self.interval + name_offset + jitter, changes, self.model.shape))
        return TablePlan(load_files, cdc_files, self.rows, self.ghost_rows)

    def _initial_state(self) -> None:
        count = self.spec.initial_rows
        rows = self.model.initial_rows(count, self.rng)
        if self.spec.edge_cases:  # boundary values go through the full load too
            for ordinal, values in enumerate(self.model.boundary_rows[:count]):
                rows[ordinal] = self.model.with_values(rows[ordinal], values)
                self.reserved.add(ordinal)
        self.rows = {ordinal: self.model.conform(row) for ordinal, row in enumerate(rows)}
        self.next_ordinal = count

    def _cached_transactions(self) -> list[list[Change]]:
        """Changes made during the full load: the LOAD files show their result, the first CDC file repeats them."""
        count = self.spec.cached_changes
        forced: list[Change] = []
        if self.spec.edge_cases and count:
            # I then U of a new key (re-applied I hits an existing key), U then D of a loaded key (re-applied U
            # hits a missing key), D of a loaded key (re-applied D is a no-op).
            fresh = self._new_ordinal()
            script: list[Callable[[], Change]] = [partial(self._insert, fresh), partial(self._update, fresh)]
            updated = self._pick()
            if updated is not None:
                script += [partial(self._update, updated), partial(self._delete, updated)]
                self.reserved.add(updated)
            deleted = self._pick()
            if updated is not None:
                self.reserved.discard(updated)
            if deleted is not None:
                script.append(partial(self._delete, deleted))
            forced = [make() for make in script[:count]]
        transactions = [[change] for change in forced]
        return transactions + self._random_transactions(count - len(forced))

    def _random_transactions(self, count: int) -> list[list[Change]]:
        return [[self._random_change() for _ in range(size)] for size in self._transaction_sizes(count)]

    def _transaction_sizes(self, total: int) -> list[int]:
        if not self.spec.timestamp_ties:
            return [1] * total
        sizes = []
        while total > 0:
            draw = self.rng.random()
            size = 1 if draw < 0.55 else self.rng.randint(2, 5) if draw < 0.9 else self.rng.randint(6, 30)
            sizes.append(min(size, total))
            total -= sizes[-1]
        return sizes

    def _stamp(self, transactions: list[list[Change]], start: datetime, span_us: int) -> list[Change]:
        """Give each transaction an increasing commit time within [start, start + span); return its changes."""
        count = len(transactions)
        if count <= span_us:
            offsets = sorted(self.rng.sample(range(span_us), count))
        else:  # more commits than microseconds: some must share one
            offsets = sorted(self.rng.randrange(span_us) for _ in range(count))
        changes = []
        for offset, transaction in zip(offsets, transactions, strict=True):
            ts = start + timedelta(microseconds=offset)
            for change in transaction:
                change.ts = ts
                changes.append(change)
        return changes

    def _load_files(self) -> list[LoadFile]:
        rows = [self.rows[ordinal] for ordinal in sorted(self.rows)]  # DMS reads the table in key order
        size = self.spec.load_file_rows or max(1, len(rows))
        start = self.spec.start_time + _LOAD_FROM
        chunks = [rows[i : i + size] for i in range(0, len(rows), size)]
        shape = self.model.shape
        return [LoadFile(start + index * _LOAD_FILE_GAP, chunk, shape) for index, chunk in enumerate(chunks)]

    def _file_transactions(self, steps: list[Step]) -> list[list[Change]]:
        """One CDC file: random transactions with the file's edge-case steps at random places, in step order."""
        budget = max(0, self.spec.changes_per_file - sum(step.size for step in steps))
        slots: list[int | Step] = list(self._transaction_sizes(budget))
        places = sorted(self.rng.sample(range(len(slots) + len(steps)), len(steps)))
        for place, step in zip(places, steps, strict=True):
            slots.insert(place, step)
        transactions: list[list[Change]] = []
        for slot in slots:
            if isinstance(slot, int):
                transactions.append([self._random_change() for _ in range(slot)])
                continue
            changes = slot.run()
            if slot.one_commit and self.spec.timestamp_ties:
                transactions.append(changes)
            else:
                transactions.extend([change] for change in changes)
        return [t for t in transactions if t]

    # -- scripted edge cases ------------------------------------------------------------------------

    def _edge_steps(self) -> list[Step]:
        last = self.spec.cdc_files - 1
        first, second, third = 0, min(1, last), min(2, last)
        return [
            *self._boundary_steps(first, second, third),
            Step(second, 9, self._same_commit_changes, one_commit=True),
            *self._insert_delete_insert(third),
            *self._update_delete_reinsert(first, second, third),
            *self._delete_for_good(first, last),
            Step(second, 1, self._ghost_update),
            Step(third, 1, self._ghost_delete),
            *self._null_then_empty(first, last),
            *([Step(second, 3, self._key_changes, one_commit=True)] if self.key_updates else []),
        ]

    def _schema_steps(self) -> list[Step]:
        """Right after a widening, a row takes a value the old type could not hold."""
        return [
            Step(change.after_file + 1, 2, partial(self._beyond_narrow, change))
            for change in self.schema_changes
            if change.kind == "widen" and change.after_file + 1 < self.spec.cdc_files
        ]

    def _beyond_narrow(self, change: SchemaChange) -> list[Change]:
        changes: list[Change] = []
        ordinal = self._pick_or_insert(changes)
        value = self.model.beyond_narrow(change)
        changes.append(
            self._update(
                ordinal, self.model.with_values(self.rows[ordinal], {self.model.position[change.column]: value})
            )
        )
        return changes

    def _boundary_steps(self, first: int, second: int, third: int) -> list[Step]:
        """Insert rows of boundary values (kept to the end), update three loaded rows to them, delete one."""
        inserted: list[int] = []
        boundary_rows = self.model.boundary_rows

        def insert_all() -> list[Change]:
            changes = []
            for values in boundary_rows:
                ordinal = self._new_ordinal()
                self.reserved.add(ordinal)
                inserted.append(ordinal)
                row = self.model.with_values(self.model.new_row(ordinal, self.rng), values)
                changes.append(self._insert(ordinal, row))
            return changes

        def update_some() -> list[Change]:
            changes: list[Change] = []
            for values in boundary_rows[-3:]:
                ordinal = self._pick_or_insert(changes)
                self.reserved.add(ordinal)
                changes.append(self._update(ordinal, self.model.with_values(self.rows[ordinal], values)))
            return changes

        def delete_one() -> list[Change]:  # a before-image full of multi-line and unicode text
            return [self._delete(inserted[0])] if inserted else []

        count = len(boundary_rows)
        return [Step(first, count, insert_all), Step(second, min(3, count), update_some), Step(third, 1, delete_one)]

    def _same_commit_changes(self) -> list[Change]:
        """Several changes to single keys within one commit: only row order tells their outcome."""
        changes: list[Change] = []
        updated = self._pick_or_insert(changes)
        self.reserved.add(updated)
        changes += [self._update(updated) for _ in range(3)]
        fresh = self._new_ordinal()
        changes += [self._insert(fresh), self._update(fresh)]
        removed = self._pick_or_insert(changes)
        changes += [self._update(removed), self._delete(removed)]
        reinserted = self._pick_or_insert(changes)
        changes += [self._delete(reinserted), self._insert(reinserted)]
        self.reserved.discard(updated)
        return changes

    def _insert_delete_insert(self, file: int) -> list[Step]:
        """insert -> delete -> insert of one new key inside one file: it ends inserted with the second values."""
        fresh = self._new_ordinal()
        self.reserved.add(fresh)

        def reinsert() -> list[Change]:
            self.reserved.discard(fresh)
            return [self._insert(fresh)]

        return [
            Step(file, 1, lambda: [self._insert(fresh)]),
            Step(file, 1, lambda: [self._delete(fresh)]),
            Step(file, 1, reinsert),
        ]

    def _update_delete_reinsert(self, first: int, second: int, third: int) -> list[Step]:
        held: list[int] = []

        def update() -> list[Change]:
            changes: list[Change] = []
            held.append(self._pick_or_insert(changes))
            self.reserved.add(held[0])
            return [*changes, self._update(held[0])]

        def reinsert() -> list[Change]:
            self.reserved.discard(held[0])
            return [self._insert(held[0])]

        return [
            Step(first, 1, update),
            Step(second, 1, lambda: [self._delete(held[0])]),
            Step(third, 1, reinsert),
        ]

    def _delete_for_good(self, first: int, last: int) -> list[Step]:
        """A key deleted and never re-inserted; a later repeated delete of it is a no-op."""
        deleted: list[Change] = []

        def delete() -> list[Change]:
            changes: list[Change] = []
            ordinal = self._pick_or_insert(changes)
            deleted.append(self._delete(ordinal))
            return [*changes, deleted[0]]

        return [Step(first, 1, delete), Step(last, 1, lambda: [Change("D", deleted[0].row)])]

    def _ghost_update(self) -> list[Change]:
        """U of a key the source never had (e.g. a row DMS missed): the replay upserts it."""
        row = self.model.new_row(self._new_ordinal(), self.rng)
        self.ghost_rows.append(row)
        return [Change("U", row)]

    def _ghost_delete(self) -> list[Change]:
        """D of a key that never existed: a no-op."""
        return [Change("D", self.model.new_row(self._new_ordinal(), self.rng))]

    def _null_then_empty(self, first: int, last: int) -> list[Step]:
        """A row whose nullable values become NULL, then whose strings become empty (and stay so)."""
        held: list[int] = []

        def nulls() -> list[Change]:
            changes: list[Change] = []
            held.append(self._pick_or_insert(changes))
            self.reserved.add(held[0])
            return [*changes, self._update(held[0], self.model.nulled(self.rows[held[0]]))]

        def empties() -> list[Change]:
            return [self._update(held[0], self.model.emptied(self.rows[held[0]]))]

        return [Step(first, 1, nulls), Step(last, 1, empties)]

    def _key_changes(self) -> list[Change]:
        """UPDATEs of a key (then of the new key again, as 30017 -> 30018 -> 30019 in the real sample): DMS writes
        the new row and, in the before-image columns, the old key; a replay removes the old row."""
        changes: list[Change] = []
        ordinal = self._pick_or_insert(changes)
        for _ in range(2):
            old = self.rows.pop(ordinal)
            ordinal = self._new_ordinal()
            new_key = dict(zip(self.model.key_positions, self.model.codec.values(ordinal), strict=True))
            self.rows[ordinal] = self.model.conform(self.model.with_values(old, new_key))
            changes.append(Change("U", self.rows[ordinal], before=old))
        return changes


def assign_change_sequences(plans: list[TablePlan]) -> None:
    """AR_H_CHANGE_SEQ-like values: commit time to the hundredth + a task-wide counter in commit order."""
    entries = [
        (change.ts, table_index, position, change)
        for table_index, plan in enumerate(plans)
        for position, change in enumerate(c for cdc in plan.cdc_files for c in cdc.changes)
    ]
    entries.sort(key=operator.itemgetter(0, 1, 2))
    for counter, (ts, _, _, change) in enumerate(entries, start=1):
        change.seq = f"{ts:%Y%m%d%H%M%S}{ts.microsecond // 10_000:02d}{counter:019d}"
