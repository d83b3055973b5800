"""Trino's install checks what Maven copied against the pins, its server is reachable on 127.0.0.1 only, and a
statement it refuses while it schedules its first catalog is sent again."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.local import trino


def fake_mvn(tmp_path: Path, body: bytes) -> str:
    """An ``mvn`` that "copies" ``body`` as the requested artifact into -DoutputDirectory."""
    (tmp_path / "body").write_bytes(body)
    script = tmp_path / "mvn"
    script.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in -DoutputDirectory=*) out="${a#*=}";; -Dartifact=*) art="${a#*=}";; esac; done\n'
        'name=$(echo "$art" | awk -F: \'{print $2"-"$3"."$4}\')\n'
        f'cp "{tmp_path / "body"}" "$out/$name"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_an_archive_not_matching_its_pin_is_refused_and_nothing_is_installed(tmp_path: Path) -> None:
    home = tmp_path / "share" / "trino"
    with pytest.raises(CdcLakeError, match=r"trino-server-core:476:tar.gz: SHA-256 \w+ is not the pinned"):
        trino.install(home, mvn=fake_mvn(tmp_path, b"not trino"))
    assert not home.exists()
    assert list(home.parent.iterdir()) == []  # the staging folder is gone too


def test_an_installed_server_is_not_copied_again(tmp_path: Path) -> None:
    home = tmp_path / "trino"
    (home / "lib").mkdir(parents=True)
    (home / "plugin" / trino.CATALOG).mkdir(parents=True)
    (home / ".verified").write_text(trino._pins())
    assert trino.install(home, mvn=str(tmp_path / "no-mvn")) == home
    assert trino.trino_home(home) == home
    (home / ".verified").write_text("older pins\n")
    with pytest.raises(CdcLakeError, match="run `make setup`"):
        trino.trino_home(home)


def test_the_server_and_its_catalog_stay_on_the_local_endpoint(tmp_path: Path) -> None:
    server = trino.server_properties(8123, tmp_path, tmp_path / "home")
    assert server["node.bind-ip"] == server["node.internal-address"] == "127.0.0.1"
    assert server["discovery.uri"] == "http://127.0.0.1:8123"
    assert server["node-scheduler.include-coordinator"] == "true"
    catalog = trino.catalog_properties("http://127.0.0.1:5000", "us-east-1", "testing", "testing")
    assert catalog["iceberg.catalog.type"] == "glue"
    assert catalog["hive.metastore.glue.endpoint-url"] == catalog["s3.endpoint"] == "http://127.0.0.1:5000"
    assert catalog["fs.native-s3.enabled"] == catalog["s3.path-style-access"] == "true"


def test_a_chosen_java_older_than_trinos_floor_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    java = tmp_path / "java"
    java.write_text("#!/bin/sh\necho 'openjdk version \"17.0.15\" 2025-04-15' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv(trino.TRINO_JAVA_ENV, str(java))
    with pytest.raises(CdcLakeError, match="not a Java 24 or later"):
        trino.find_java()


def test_a_scan_refused_before_trino_schedules_its_catalog_is_sent_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from trino.exceptions import TrinoQueryError

    from cdc_lake.core.retry import RetryPolicy

    monkeypatch.setattr(trino, "NO_NODES_YET", RetryPolicy(attempts=3, first_delay=0.0, max_delay=0.0))
    server = trino.TrinoServer("127.0.0.1", 1, Path("java"), Path("server.log"))
    answers: list[object] = [
        TrinoQueryError({"errorName": "NO_NODES_AVAILABLE", "message": "No nodes available to run query"}),
        (["n"], [(1,)]),
    ]

    def query(sql: str, params: object) -> object:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(trino.TrinoServer, "_query", lambda self, sql, params: query(sql, params))
    assert server.query("SELECT 1") == [(1,)]
    assert not answers

    # Any other failure is the statement's own, raised at once.
    answers[:] = [TrinoQueryError({"errorName": "TABLE_NOT_FOUND", "message": "no such table"}), (["n"], [(1,)])]
    with pytest.raises(TrinoQueryError, match="TABLE_NOT_FOUND"):
        server.query("SELECT * FROM missing")
