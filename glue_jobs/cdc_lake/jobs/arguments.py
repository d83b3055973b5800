"""A Glue job's arguments: resolved as Glue resolves them, checked once, and typed by each job's options class.

Every job's options subclass ``JobArguments``: ``from_sys_argv`` for the arguments Glue hands its script,
``from_options`` for a plain mapping (tests, a rerun by hand), both refusing a missing or malformed argument by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Self, TypeVar

from cdc_lake.core.config import PipelineConfig
from cdc_lake.core.exceptions import JobArgumentError
from cdc_lake.ops.source_tls import SourceTls, job_tls

Choice = TypeVar("Choice", bound=str)


class JobArguments:
    """A job's options read from the arguments Glue hands its script, as Glue resolves them."""

    required: ClassVar[tuple[str, ...]]
    optional: ClassVar[tuple[str, ...]]
    config_uri: str

    @classmethod
    def from_sys_argv(cls, argv: Sequence[str]) -> Self:
        return cls.from_options(resolve_glue_arguments(argv, cls.required, cls.optional))

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> Self:
        raise NotImplementedError

    def lake_database(self, config: PipelineConfig) -> str:
        """The lake database the job works on, which its metrics name as their pipeline."""
        return config.lake.database


class LakeArguments(JobArguments):
    """Options of a job on the lake: its catalog and database (default: the configuration's), the raw bucket."""

    catalog: str
    database: str
    bucket: str

    def lake_database(self, config: PipelineConfig) -> str:
        return self.database or config.lake.database


# The arguments naming the source, of the jobs that read it.
SOURCE_REQUIRED = ("source_secret", "source_engine")
SOURCE_OPTIONAL = ("source_database", "source_without_tls", "source_ca")


@dataclass(frozen=True)
class SourceOptions:
    """The live source of the jobs that read it: the DMS source endpoint's secret, the stack's engine, the
    database when the secret's is not the one, and the TLS the stack allows."""

    secret: str
    engine: str
    database: str | None
    tls: SourceTls

    @classmethod
    def from_plain(cls, plain: Mapping[str, str]) -> SourceOptions:
        return cls(plain["source_secret"], plain["source_engine"], plain.get("source_database") or None, job_tls(plain))


def resolve_glue_arguments(argv: Sequence[str], required: Iterable[str], optional: Iterable[str]) -> dict[str, str]:
    """Glue's own resolution of ``argv``: the required arguments, and those optional ones that are present."""
    from awsglue.utils import getResolvedOptions

    wanted = [*required, *(name for name in optional if f"--{name}" in argv)]
    return dict(getResolvedOptions(_only_named(argv, {f"--{name}" for name in wanted}), wanted))


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


def plain_arguments(options: Mapping[str, str], required: Sequence[str]) -> dict[str, str]:
    """``options`` without Glue's ``--`` prefix; refused, naming them, when required ones are missing."""
    plain = {k.removeprefix("--"): v for k, v in options.items()}
    missing = [name for name in required if not plain.get(name)]
    if missing:
        raise JobArgumentError(f"missing job argument(s): {', '.join('--' + m for m in missing)}")
    return plain


def one_of(plain: Mapping[str, str], name: str, choices: Sequence[Choice]) -> Choice:
    """The argument ``name`` as the one of ``choices`` it names; refused when it names none."""
    value = plain[name]
    for choice in choices:
        if choice == value:
            return choice
    raise JobArgumentError(f"--{name} {value!r}: use one of {', '.join(choices)}")


def whole_number(options: Mapping[str, str], name: str, default: int) -> int:
    number = given_number(options, name)
    return default if number is None else number


def given_number(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name)
    if text is None or text == "":
        return None
    if not text.isdigit():
        raise JobArgumentError(f"--{name} {text!r}: expected a whole number of at least 0")
    return int(text)
