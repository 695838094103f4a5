"""Parsing a batch of raw auto_explain entries into store rows, in the ingest process or in
its reading child (`log_child`): JSON entries take the typed fast path of `log_fast`,
everything else (text plans, odd JSON) the general path of `log_plans`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from collectors.logs.events import plan_settings
from collectors.logs.fast import (
    EntryDoc,
    decode,
    has_bitmap_heap_scan,
    heap_blocks,
    numbers,
    shape_key,
)
from collectors.logs.formats import Problem, RawEntry, decode_utf8
from collectors.logs.json_rows import (
    FAST_PATH,
    ShapeCache,
    ShapeError,
    add_heap_blocks,
    observation_row,
)
from collectors.logs.plans import (
    EntryError,
    LoggedPlan,
    QueryIdentity,
    QueryKeys,
    duration_of,
    generic_plan,
    is_generic,
    parameters_json,
    plan_json_text,
    read_entry,
)
from collectors.logs.redact import scrub_plan_json
from collectors.logs.templates import Template
from detector.errors import PlanshiftError
from detector.model import Observation, normalized_cost
from detector.model.log_rows import ColumnKind, LogBatchColumns, LogEntryInfo, log_batch_columns
from detector.model.records import to_utc_naive, utc_now
from detector.model.rows import NewPlan, observation_rows

NO_PARAMS = "[]"  # observations.params of an anonymized ingest or a password-setting statement


@dataclass
class ParsedBatch:
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    shapes: dict[str, NewPlan] = field(default_factory=dict)
    infos: list[LogEntryInfo] = field(default_factory=list)
    queries: dict[str, tuple[str, int | None]] = field(default_factory=dict)  # key -> sql, id
    problems: list[Problem] = field(default_factory=list)
    ambiguous: list[int] = field(default_factory=list)  # queryids now seen with two texts
    columns: LogBatchColumns | None = None  # rows and infos, once `to_columns` ran

    def to_columns(self, kinds: Mapping[str, ColumnKind]) -> LogBatchColumns:
        """Rows and infos as numpy columns (the sink's `log_column_kinds` gives `kinds`)."""
        if self.columns is None:
            self.columns = log_batch_columns(self.rows, self.infos, kinds)
            self.rows, self.infos = [], []
        return self.columns


class Learned(NamedTuple):
    """What one parser of a log learned that spares another the work (`BatchParser.adopt`):
    statement templates and fast-path plan shapes."""

    templates: dict[str, Template]
    shapes: dict[tuple[Any, ...], tuple[str, bool]]


class BatchParser:
    """Rows of one log target; caches query identities and plan shapes across batches.
    `anonymize`: no parameter values, normalized SQL, plan JSON without constants."""

    def __init__(self, run_id: int, target_id: int, anonymize: bool = False) -> None:
        self.run_id = run_id
        self.target_id = target_id
        self.anonymize = anonymize
        self.keys = QueryKeys(anonymize)
        self.shapes = ShapeCache({})
        self.fast_shapes: dict[tuple[Any, ...], tuple[str, bool]] = {}  # fingerprint, bitmap?
        self.new_shapes: dict[tuple[Any, ...], tuple[str, bool]] = {}  # since `take_learned`
        self.last_time: datetime | None = None
        self.seen_queries: set[str] = set()

    def parse(self, entries: list[RawEntry]) -> ParsedBatch:
        parsed = ParsedBatch()
        rows, infos, shapes, problems = parsed.rows, parsed.infos, parsed.shapes, parsed.problems
        for entry in entries:
            if entry.bad_time is not None:
                stamp = entry.bad_time[:40]
                problems.append(Problem(entry.line, "bad-time", f"no time: {stamp!r}; skipped"))
                continue
            body = entry.body
            if body.__class__ is bytes and not body.isascii():
                entry.body = body = decode_utf8(body, entry.line + 1, problems).encode()
            when = entry.time or self.last_time or utc_now()
            json_body = body[:2] == b"\t{" or body[:1] == "{"  # stderr keeps the tab
            fast = decode(body) if FAST_PATH and json_body else None
            try:
                if fast is not None:
                    row, key, sql, queryid, analyzed, shape = self._fast(entry, fast, when)
                    plan_format = "json"
                    generic = "$" in fast.query_text and is_generic(body)  # $n: a parameter
                    if generic is None:
                        generic = generic_plan(read_entry(entry).document)
                else:
                    logged = read_entry(entry)
                    generic = "$" in logged.query_text and is_generic(body)
                    if generic is None:
                        generic = generic_plan(logged.document)
                    identity = self._identify(logged.query_text)
                    params = self._params(identity, logged.params or identity.literals_json)
                    duration = None if identity.explain_only else logged.duration_ms
                    row, shape = self._row(logged, identity.key, params, when, duration)
                    key, sql = identity.key, identity.sql
                    queryid = self.keys.label(logged.queryid, key)
                    analyzed, plan_format = logged.analyzed, logged.plan_format
            except (EntryError, ShapeError) as exc:
                kind = exc.kind if isinstance(exc, EntryError) else "bad-plan"
                problems.append(Problem(entry.line, kind, str(exc)))
                continue
            self.last_time = when
            if key not in self.seen_queries:
                self.seen_queries.add(key)
                parsed.queries[key] = (sql, queryid)
            if shape is not None:
                shapes.setdefault(shape.fingerprint, shape)
            rows.append(row)
            infos.append(
                LogEntryInfo(
                    entry.line,
                    entry.offset,
                    entry.pid,
                    entry.database,
                    entry.user,
                    queryid,
                    plan_format,
                    analyzed,
                    None if fast is not None and not fast.settings else plan_settings(body),
                    generic,
                )
            )
        parsed.ambiguous, self.keys.found_ambiguous = self.keys.found_ambiguous, []
        return parsed

    def take_learned(self) -> Learned:
        """What this parser learned since the last call."""
        shapes, self.new_shapes = self.new_shapes, {}
        return Learned(self.keys.templates.take_new(), shapes)

    def adopt(self, learned: Learned) -> None:
        """What another parser of the same log learned (its plan shapes are stored: this one
        hands out no NewPlan for them)."""
        self.keys.templates.adopt(learned.templates)
        for node, known in learned.shapes.items():
            self.fast_shapes.setdefault(node, known)

    def _identify(self, text: str) -> QueryIdentity:
        if not text.strip():
            raise EntryError("no-query", "plan without a query text: not keyed to any query")
        return self.keys.identify(text)

    def _fast(
        self, entry: RawEntry, doc: EntryDoc, when: datetime
    ) -> tuple[tuple[Any, ...], str, str, int | None, bool, NewPlan | None]:
        """Row, query key, normalized SQL, queryid, analyzed, new shape: the log_fast path."""
        identity = self._identify(doc.query_text)
        queryid = self.keys.label(
            doc.queryid if doc.queryid is not None else entry.queryid, identity.key
        )
        params = identity.literals_json
        if doc.parameters is not None:
            params = parameters_json(doc.parameters)
        params = self._params(identity, params)
        node = shape_key(doc.plan)
        known = self.fast_shapes.get(node)
        shape = None
        if known is None:
            if len(self.fast_shapes) > self.shapes.limit:
                self.fast_shapes.clear()
            document = read_entry(entry).document
            found, shape = self.shapes.add(node, document, self._plan_json(entry.body), when)
            known = self.fast_shapes[node] = (found, has_bitmap_heap_scan(doc.plan))
            self.new_shapes[node] = known
        found, bitmap = known
        analyzed = doc.plan.actual_rows is not None  # heap blocks come with ANALYZE only
        heap = heap_blocks(entry.body) if bitmap and analyzed else (None, None)
        if heap is None:  # not integers: as the general path reads them
            summed: list[int | None] = [None, None]
            add_heap_blocks(read_entry(entry).document["Plan"], summed)
            heap = (summed[0], summed[1])
        total, startup, plan_rows, actual, execution, planning, *buffers, io_read = numbers(doc)
        if execution is None and not identity.explain_only:
            execution = duration_of(entry.head)
        row = (
            self.run_id, self.target_id, identity.key, None, params, 0, found, "log",
            normalized_cost(total), normalized_cost(startup), plan_rows, actual,
            execution, planning, None,
            *buffers, *heap, io_read, to_utc_naive(when),
        )  # fmt: skip
        return row, identity.key, identity.sql, queryid, analyzed, shape

    def _params(self, identity: QueryIdentity, params: str) -> str:
        return NO_PARAMS if self.anonymize or identity.secret else params

    def _plan_json(self, body: bytes | str) -> Callable[[], str]:
        return lambda: scrub_plan_json(plan_json_text(body), anonymize=self.anonymize)

    def _scrubbed(self, logged: LoggedPlan) -> Callable[[], str]:
        return lambda: scrub_plan_json(logged.plan_json(), anonymize=self.anonymize)

    def _row(
        self, logged: LoggedPlan, key: str, params: str, when: datetime, duration: float | None
    ) -> tuple[tuple[Any, ...], NewPlan | None]:
        """The observations row, and the plan shape when this parser sees it first."""
        if FAST_PATH:
            document = logged.document
            found, shape = self.shapes.lookup(document, self._scrubbed(logged), when)
            heap: list[int | None] = [None, None]
            if _mentions_heap_blocks(logged.raw):
                add_heap_blocks(document["Plan"], heap)
            head = (self.run_id, self.target_id, key, None, params, 0, found, "log")
            return observation_row(document, head, heap, duration, when), shape
        try:  # the store's columns changed: go through the model (slower, always right)
            plan = logged.plan()
        except PlanshiftError as exc:
            raise ShapeError(str(exc)) from None
        observation = Observation(
            target_id=self.target_id,
            query_key=key,
            params=params,
            plan=plan,
            plan_json=self._scrubbed(logged)(),
            duration_ms=plan.execution_ms if plan.execution_ms is not None else duration,
            planning_ms=plan.planning_ms,
            client_ms=None,
            sample_index=0,
            collected_at=when,
            source="log",
        )
        rows, shapes = observation_rows([observation], {self.target_id: self.run_id})
        return rows[0], next(iter(shapes.values()))


def _mentions_heap_blocks(raw: bytes | str) -> bool:
    if not raw:  # a text plan: no JSON to search
        return True
    if isinstance(raw, bytes):
        return b"Heap Blocks" in raw
    return "Heap Blocks" in raw
