"""Configurations the tests build: one table (``table_data``, with its columns by name and type), shop.items
alone (``items_config``), the generator's order lines, and the three app tables of the run tests."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cdc_lake.core.config import PipelineConfig


# Every kind of value the row delta's generic writer converts: numbers, text, decimals, dates, times without and with
# zone, floats, booleans (the key's column comes first, of the test's choosing).
CONVERTED_TYPES = {
    "label": "string",
    "price": "decimal(10,2)",
    "day": "date",
    "at": "timestamp",
    "seen": "timestamp_ltz",
    "ratio": "float",
    "weight": "double",
    "count": "int",
    "flag": "boolean",
}


def columns(**types: str) -> list[dict[str, Any]]:
    """Configured columns, in this order, each of its type (``columns(id="bigint", label="string")``)."""
    return [{"name": name, "type": type_} for name, type_ in types.items()]


def table_data(name: str, primary_key: list[str], **types: str) -> dict[str, Any]:
    """A table as a configuration file holds it: its name, key and columns (by name and type, in order)."""
    return {"name": name, "primary_key": primary_key, "columns": columns(**types)}


def one_table_config(table: dict[str, Any], **dms: Any) -> PipelineConfig:
    """A configuration of ``table`` alone (as ``table_data`` gives it), DMS files under ``dms/``."""
    from cdc_lake.core.config import parse_config

    return parse_config({"dms": {"bucket_folder": "dms", **dms}, "tables": [table]})


# The one table most tests replay: shop.items, keyed by id.
ITEMS_COLUMNS: list[dict[str, Any]] = columns(id="bigint", label="string")


# The generator's order lines as the oracle tests configure them: a composite key and a value of each kind of number;
# each test adds the columns it needs beside them.
ORDER_ITEMS_COLUMNS: list[dict[str, Any]] = columns(
    order_id="bigint", line_no="int", sku="string", quantity="smallint", unit_price="decimal(10,2)", weight_kg="double"
)


def items_config_data(
    columns: list[dict[str, Any]] = ITEMS_COLUMNS,
    history: bool = False,
    lake: dict[str, Any] | None = None,
    runs: dict[str, Any] | None = None,
    **dms: Any,
) -> dict[str, Any]:
    """A configuration of shop.items alone (``columns``, SCD2 ``history``), as its file holds it: DMS files under
    ``dms/`` with these DMS settings, and ``lake`` and ``runs`` settings; ``schema_changes`` goes to the table."""
    table: dict[str, Any] = {"name": "shop.items", "primary_key": ["id"], "columns": columns, "history": history}
    if "schema_changes" in dms:
        table["schema_changes"] = dms.pop("schema_changes")
    dms = {"bucket_folder": "dms", **dms}
    return {"dms": dms, "lake": lake or {}, "runs": runs or {}, "tables": [table]}


def items_config(
    columns: list[dict[str, Any]] = ITEMS_COLUMNS, history: bool = False, lake: dict[str, Any] | None = None, **dms: Any
) -> PipelineConfig:
    """``items_config_data``'s configuration, validated."""
    from cdc_lake.core.config import parse_config

    return parse_config(items_config_data(columns, history, lake, **dms))


def items_config_file(path: Path, **settings: Any) -> tuple[Path, PipelineConfig]:
    """``items_config_data(**settings)`` written to ``path`` as YAML (for the CLI), and read back."""
    import yaml

    from cdc_lake.core.config import load_config

    path.write_text(yaml.safe_dump(items_config_data(**settings)), encoding="utf-8")
    return path, load_config(path)


# The three tables of the run tests (coalescing, jobs, kills), each keyed by id.
APP_TABLE_NAMES = ("app.accounts", "app.orders", "app.events")


def app_config_data(**runs: Any) -> dict[str, Any]:
    """The run tests' configuration of the three app tables, as its file holds it, with these ``runs`` settings."""
    tables = [table_data(name, ["id"], id="bigint", label="string", amount="decimal(10,2)") for name in APP_TABLE_NAMES]
    return {"dms": {"timestamp_column": "dms_timestamp"}, "runs": runs, "tables": tables}


def app_config(**runs: Any) -> PipelineConfig:
    """The run tests' configuration of the three app tables, with these ``runs`` settings."""
    from cdc_lake.core.config import parse_config

    return parse_config(app_config_data(**runs))
