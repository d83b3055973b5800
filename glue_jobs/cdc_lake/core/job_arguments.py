"""The Glue jobs' arguments, each job's declared once: a frozen dataclass whose fields are its arguments.

A field is the argument ``--<field>``; one without a default is required. Its type says how the text Glue hands
the script is read: ``str``, ``int`` (a whole number of at least 0), ``float``, ``bool`` (``true`` or ``false``)
or a ``Literal`` of choices, each optionally ``| None``. An absent or empty argument takes the default. The
required and optional names, the parsing and the refusals (naming the argument) all come from the fields.

Pure (no Spark, no Glue at import): the jobs read their options through it, the stack sets its default arguments
by it, and the tests hold the scripts' docstrings and the docs to it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Self

from cdc_lake.core.exceptions import JobArgumentError
from cdc_lake.core.names import GLUE_CATALOG, ORPHAN_DAYS, RETAIN_LAST

if TYPE_CHECKING:
    from cdc_lake.core.config import PipelineConfig

# Table maintenance (engine.maintenance) and what else the maintenance job does: rebuild one table after a DMS
# reload, or apply a quarantining table's rejects (or accept their loss).
UpkeepAction = Literal["compact", "expire", "orphans", "all"]
UPKEEP_ACTIONS: tuple[UpkeepAction, ...] = typing.get_args(UpkeepAction)
MaintenanceAction = Literal[UpkeepAction, "reload", "rejects-replay", "rejects-accept"]
DriftAction = Literal["verify", "repair"]
SETTLE_TIMEOUT_SECONDS = 900.0
# What awsglue's getResolvedOptions reads on its own (``Job.id_params()`` but --JOB_NAME, which it leaves to the job).
GLUE_RESERVED = frozenset({"JOB_ID", "JOB_RUN_ID", "SECURITY_CONFIGURATION"})


@dataclass(frozen=True)
class Argument:
    """One declared argument: its name (without ``--``), the type it is read as, whether it is required, its
    default, and its choices (a ``Literal``'s values; empty for any other type)."""

    name: str
    kind: type
    required: bool
    default: Any
    choices: tuple[str, ...] = ()

    @property
    def flag(self) -> str:
        return f"--{self.name}"

    def parse(self, text: str) -> Any:
        """``text`` as this argument's type; refused, naming the argument, when it is not one."""
        if self.choices:
            if text in self.choices:
                return text
            raise JobArgumentError(f"{self.flag} {text!r}: use one of {', '.join(self.choices)}")
        if self.kind is int:
            if not text.isdigit():
                raise JobArgumentError(f"{self.flag} {text!r}: expected a whole number of at least 0")
            return int(text)
        if self.kind is float:
            try:
                return float(text)
            except ValueError:
                raise JobArgumentError(f"{self.flag} {text!r}: expected a number") from None
        if self.kind is bool:
            if text.lower() not in ("true", "false"):
                raise JobArgumentError(f"{self.flag} {text!r}: expected true or false")
            return text.lower() == "true"
        return text


class JobArguments:
    """A job's arguments; subclasses are frozen keyword-only dataclasses whose fields declare them."""

    config_uri: str

    @classmethod
    def arguments(cls) -> tuple[Argument, ...]:
        """The declared arguments, in field order."""
        return _declared(cls)

    @classmethod
    def required(cls) -> tuple[str, ...]:
        return tuple(argument.name for argument in cls.arguments() if argument.required)

    @classmethod
    def optional(cls) -> tuple[str, ...]:
        return tuple(argument.name for argument in cls.arguments() if not argument.required)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> Self:
        """Build from a plain mapping; keys may carry Glue's ``--`` prefix, undeclared ones are left out. A missing
        required argument or a malformed value is refused by name."""
        plain = {key.removeprefix("--"): value for key, value in options.items()}
        missing = [name for name in cls.required() if not plain.get(name)]
        if missing:
            raise JobArgumentError(f"missing job argument(s): {', '.join('--' + name for name in missing)}")
        values = {a.name: a.parse(plain[a.name]) for a in cls.arguments() if plain.get(a.name)}
        built = cls(**values)
        built.check()
        return built

    @classmethod
    def from_sys_argv(cls, argv: Sequence[str]) -> Self:
        """Build from the arguments Glue hands the script, resolved as Glue resolves them."""
        return cls.from_options(resolve_glue_arguments(argv, cls.required(), cls.optional()))

    def check(self) -> None:
        """Refuse arguments that contradict each other; each field alone is checked by its type."""

    def lake_database(self, config: PipelineConfig) -> str:
        """The lake database the job works on, which its metrics name as their pipeline."""
        return config.lake.database


class LakeArguments(JobArguments):
    """Arguments of a job on the lake: its catalog and database (default: the configuration's), the raw bucket."""

    catalog: str
    database: str
    bucket: str

    def lake_database(self, config: PipelineConfig) -> str:
        return self.database or config.lake.database


def _declared(cls: type[JobArguments]) -> tuple[Argument, ...]:
    hints = typing.get_type_hints(cls)
    declared = []
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]  # every subclass is a dataclass
        kind, choices = _read_as(cls, field.name, hints[field.name])
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        default = None if required else field.default
        declared.append(Argument(field.name, kind, required, default, choices))
    return tuple(declared)


def _read_as(cls: type, name: str, hint: Any) -> tuple[type, tuple[str, ...]]:
    """The type a field's text is read as, and its choices, from its type hint (``X | None`` reads as ``X``)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    if typing.get_origin(hint) is Literal:
        return str, tuple(str(choice) for choice in typing.get_args(hint))
    if hint in (str, int, float, bool):
        return hint, ()
    raise TypeError(f"{cls.__name__}.{name}: a job argument is str, int, float, bool or a Literal, not {hint}")


def resolve_glue_arguments(argv: Sequence[str], required: Iterable[str], optional: Iterable[str]) -> dict[str, str]:
    """Glue's own resolution of ``argv``: the required arguments, and those optional ones that are present. Glue's
    own ids (``--JOB_RUN_ID``…) it always reads itself, and refuses to be asked for: they are passed through."""
    from awsglue.utils import getResolvedOptions

    wanted = [*required, *(name for name in optional if f"--{name}" in argv)]
    asked = [name for name in wanted if name not in GLUE_RESERVED]
    resolved = getResolvedOptions(_only_named(argv, {f"--{name}" for name in wanted}), asked)
    return {name: value for name, value in resolved.items() if value is not None}


def _only_named(argv: Sequence[str], names: set[str]) -> list[str]:
    """The script name and the ``--name value`` pairs of ``names``, nothing else.

    Glue hands a script every job argument, and getResolvedOptions parses with argparse, which takes an
    unknown option for an abbreviation of a known one: the stack's ``--conf`` would be read as
    ``--config_uri``. Only exact names reach it.
    """
    kept = list(argv[:1])
    for index, item in enumerate(argv[1:-1], start=1):
        if item in names:
            kept += [item, argv[index + 1]]
    return kept


def declared_flags(arguments: type[JobArguments], values: Mapping[str, str]) -> dict[str, str]:
    """``values`` (argument name -> text) as Glue arguments (``--name``), each refused unless ``arguments`` declares
    it and reads it: how the stack sets a job's defaults."""
    declared = {argument.name: argument for argument in arguments.arguments()}
    for name, text in values.items():
        if name not in declared:
            raise JobArgumentError(f"{arguments.__name__} declares no argument --{name}")
        declared[name].parse(text)
    return {f"--{name}": text for name, text in values.items()}


def default_text(arguments: type[JobArguments], name: str) -> str:
    """The declared default of an optional argument, as Glue would pass it."""
    argument = next(a for a in arguments.arguments() if a.name == name)
    if argument.required or argument.default is None:
        raise JobArgumentError(f"{arguments.__name__}: --{name} has no default to pass")
    return str(argument.default).lower() if argument.kind is bool else str(argument.default)


# ------------------------------------------------------------------------------------------ the declarations


@dataclass(frozen=True, kw_only=True)
class ReplayArguments(LakeArguments):
    """A replay run (full_load, cdc_replay): the Lambda passes bucket, key and table, the job defines the rest."""

    config_uri: str
    bucket: str
    key: str
    table: str
    catalog: str = GLUE_CATALOG
    database: str = ""  # empty: the configuration's lake.database
    # How long a coalesced run waits for new files after a round that found none; None: runs.idle_seconds.
    # A run reproduced after its files landed (glue-run, aws-replay) has nothing to wait for.
    idle_seconds: int | None = None
    # Only --table, up to --key, whatever runs.mode says: what a warm run hands over, and a LOAD file's run in
    # runs.mode warm (the warm runs own the other tables).
    one_table: bool = False


@dataclass(frozen=True, kw_only=True)
class WarmArguments(LakeArguments):
    """A warm run (runs.mode warm): the Lambda passes --shard, the stack the rest, including the G.1X jobs a warm
    run hands LOAD files and large backlogs to."""

    config_uri: str
    bucket: str
    shard: int
    full_load_job: str
    cdc_replay_job: str
    catalog: str = GLUE_CATALOG
    database: str = ""  # empty: the configuration's lake.database
    quiet_seconds: int | None = None  # None: runs.warm.quiet_seconds
    # The configuration the Lambda routed by (``PipelineConfig.version``): a run whose own differs says so.
    config_version: str = ""
    # The shards' event queues' URLs, comma-joined in shard order (WARM_QUEUES_ARGUMENT); empty: no queue, every round
    # lists every table.
    events_queues: str = ""
    # Glue passes every script its job's name and its run's id: how a warm run finds the other runs of its shard
    # and tells itself from them. Empty locally.
    JOB_NAME: str = ""
    JOB_RUN_ID: str = ""


@dataclass(frozen=True, kw_only=True)
class MaintenanceArguments(LakeArguments):
    """A maintenance run; the scheduled trigger passes --action, the job defines the rest."""

    config_uri: str
    action: MaintenanceAction
    table: str | None = None  # None: every configured table (not for reload and rejects)
    catalog: str = GLUE_CATALOG
    database: str = ""  # empty: the configuration's lake.database
    retain_days: int | None = None  # None: the configuration's lake.upkeep.keep_days
    retain_last: int = RETAIN_LAST
    orphan_days: int = ORPHAN_DAYS
    bucket: str = ""  # reload: the raw bucket DMS writes to
    since: str | None = None  # reload: first CDC file (name or time) to apply; None: automatic
    # all, with --bucket: also remove the landed files each table applied once this many days old
    # (the stack's rawRetentionDays); None: none removed
    raw_retention_days: int | None = None

    def check(self) -> None:
        if self.action == "reload":
            missing = [name for name in ("table", "bucket") if not getattr(self, name)]
            if missing:
                named = ", ".join("--" + m for m in missing)
                raise JobArgumentError(f"--action reload rebuilds one table from the raw bucket: add {named}")
        if self.raw_retention_days is not None and self.raw_retention_days < 0:
            raise JobArgumentError(f"--raw_retention_days is {self.raw_retention_days}: give 0 or more days")
        if self.action in ("rejects-replay", "rejects-accept") and not self.table:
            raise JobArgumentError(f"--action {self.action} applies one table's rejects: add --table")


@dataclass(frozen=True, kw_only=True)
class SourceArguments(JobArguments):
    """The live source of the jobs that read it: the DMS source endpoint's secret, the stack's engine, the
    database when the secret's is not the one, and the TLS the stack allows."""

    config_uri: str
    source_secret: str
    source_engine: str  # the stack's sourceEngine: the MySQL and PostgreSQL families (ops.source_check.ENGINE_SCHEMES)
    source_database: str | None = None
    source_without_tls: bool = False  # the stack's sourceWithoutTls
    source_ca: str | None = None  # a CA file; None: the bundle packaged with the jobs


@dataclass(frozen=True, kw_only=True)
class SourceCheckArguments(SourceArguments):
    """A source check: the configuration and the source; the stack's defaults say everything."""


@dataclass(frozen=True, kw_only=True)
class DriftArguments(SourceArguments, LakeArguments):
    """A drift run: the stack's verify and repair jobs set --action, the source and the raw bucket."""

    action: DriftAction
    bucket: str
    table: str | None = None  # None: every configured table
    catalog: str = GLUE_CATALOG
    database: str = ""  # empty: the configuration's lake.database
    settle_timeout: float = SETTLE_TIMEOUT_SECONDS  # how long a key changing in flight is waited for
