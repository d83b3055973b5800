"""``cdc-lake status``: each table's state, lag, waiting files and last day, as a table, as JSON and as a picture."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from cdc_lake.core.config import parse_config
from cdc_lake.core.exceptions import DmsInputError
from tests.support.cli import cli
from tests.support.lake import GLUE_WAREHOUSE, Lake, on_both_paths, write_file

pytestmark = pytest.mark.spark

COLUMNS = [{"name": "id", "type": "int"}, {"name": "name", "type": "string"}, {"name": "qty", "type": "int"}]


def _data(database: str) -> dict:
    def table(name: str, **extra: object) -> dict:
        return {"name": name, "primary_key": ["id"], "columns": COLUMNS, **extra}

    tables = [
        table("shop.items"),
        table("shop.parts", on_bad_rows="quarantine"),
        table("shop.late"),
        table("shop.idle"),
    ]
    return {"dms": {"bucket_folder": "dms"}, "lake": {"database": database}, "tables": tables}


def _age(landing: Path, key: str, seconds: float) -> None:
    """Make a landed file look as if DMS wrote it ``seconds`` ago."""
    moment = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds)).timestamp()
    os.utime(landing / key, (moment, moment))


@on_both_paths
def test_status_shows_every_state_and_what_to_do(spark, lake: Lake, landing, warehouse, tmp_path, capsys):
    data = _data(lake.database)
    cfg = parse_config(data)
    config = tmp_path / "tables.json"
    config.write_text(json.dumps(data))
    args = ["-c", config, *_lake_args(lake, warehouse)]

    for table in ("items", "parts", "late"):
        write_file(landing, f"dms/shop/{table}/LOAD00000001.csv", "1,a,1\n2,b,2\n3,c,3\n")
        lake.apply(cfg, f"dms/shop/{table}/LOAD00000001.csv")
    applied = write_file(landing, "dms/shop/items/20250301-120000000.csv", "U,1,a2,10\nD,2,b,2\n")
    lake.apply(cfg, applied)
    bad = write_file(landing, "dms/shop/items/20250301-120100000.csv", "U,3,c2,x\n")
    with pytest.raises(DmsInputError):
        lake.apply(cfg, bad)
    quarantined = write_file(landing, "dms/shop/parts/20250301-120000000.csv", "U,1,a2,x\nU,2,b2,20\n")
    lake.apply(cfg, quarantined)
    waiting = write_file(landing, "dms/shop/late/20250301-120000000.csv", "U,1,a2,10\n")
    if lake.path == "hadoop":
        _age(landing, waiting, 3600)  # S3 keeps the time it was put
    lake.store()

    code, out = cli(capsys, "status", "--json", *args)
    assert code == 1, out  # a table is refused, diverged or behind
    found = {s["table"]: s for s in json.loads(out)}
    items, parts, late, idle = (found[f"shop.{t}"] for t in ("items", "parts", "late", "idle"))

    assert items["state"] == "refused"
    # The property the status reads withholds the value, which anyone reading the table's properties may see.
    assert f"{bad}: row 1, column qty: cannot parse as int (value withheld)" in items["detail"]
    assert (items["waiting_files"], items["rows_24h"], items["files_24h"]) == (1, 5, 2)
    assert items["batch_seconds_24h"] > 0 and items["cost_24h_usd"] > 0
    assert items["last_commit"] is not None and len(items["lags"]) == 2

    assert parts["state"] == "diverged"
    assert "1 quarantined row(s) and 0 held behind them in shop_parts_rejects" in parts["detail"]
    assert "cdc-lake rejects replay -t shop.parts" in parts["detail"]

    assert late["state"] == ("behind" if lake.path == "hadoop" else "fresh")
    assert late["waiting_files"] == 1 and (late["waiting_lag_s"] >= 3600) == (lake.path == "hadoop")
    assert late["waiting_bytes"] == len("U,1,a2,10\n")

    assert idle["state"] == "never loaded"
    assert "nothing landed under dms/shop/idle/" in idle["detail"]

    # Fixed in place and applied: the refusal is cleared with the next good run.
    write_file(landing, bad, "U,3,c2,30\n")
    lake.apply(cfg, bad)
    lake.apply(cfg, waiting)
    picture = tmp_path / "lag.png"
    code, out = cli(capsys, "status", "-t", "shop.items", "-t", "shop.late", "--plot", picture, *args)
    assert code == 0, out
    assert "shop.items" in out and "fresh" in out and f"lag picture: {picture}" in out
    _assert_real_picture(picture)


def test_status_names_a_missing_warehouse_and_an_unreadable_landing_area(spark, lake, aws_endpoint, tmp_path, capsys):
    data = _data(lake.database)
    config = tmp_path / "tables.json"
    config.write_text(json.dumps(data))
    code, out = cli(capsys, "status", "-c", config, "-w", tmp_path / "nowhere", "-l", tmp_path)
    assert code == 2 and "nowhere: no such warehouse folder" in out
    code, out = cli(capsys, "status", "-c", config, "-w", tmp_path, "-l", tmp_path / "nowhere")
    assert code == 2 and "nowhere: no such landing folder" in out
    deployed = ["--bucket", "no-such-bucket", "--lake-warehouse", GLUE_WAREHOUSE, "--aws-endpoint", aws_endpoint]
    code, out = cli(capsys, "status", "--json", "-c", config, *deployed)
    found = json.loads(out)
    assert code == 0 and all(s["state"] == "never loaded" for s in found)
    assert all("the landing area cannot be listed (NoSuchBucket" in s["detail"] for s in found), found


def _lake_args(lake: Lake, warehouse: Path) -> list[str | Path]:
    if lake.path == "hadoop":
        return ["-w", warehouse, "-l", lake.landing, "--database", lake.database]
    lake.store()  # the bucket exists
    return ["--bucket", lake.bucket, "--lake-warehouse", GLUE_WAREHOUSE, "--aws-endpoint", lake.endpoint,
            "--database", lake.database]  # fmt: skip


def _assert_real_picture(path: Path) -> None:
    from matplotlib import image

    pixels = image.imread(path)
    assert pixels.shape[0] >= 300 and pixels.shape[1] >= 600
    assert pixels.std() > 0.01  # not blank
