"""The local Spark session serves the rows it holds (production rows, for ``verify`` and ``repair``) without
authentication: nothing of it may listen beyond loopback."""

from __future__ import annotations

import ipaddress
import os

import psutil
import pytest
from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def listening(process: psutil.Process) -> list[str]:
    return [
        f"{process.pid} {c.laddr.ip}:{c.laddr.port}"
        for c in process.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    ]


def is_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    mapped = getattr(address, "ipv4_mapped", None)  # the JVM listens on ::ffff:127.0.0.1
    return (mapped or address).is_loopback


def test_the_local_session_listens_on_loopback_only(spark: SparkSession) -> None:
    # A job with Python workers, so that every server of the session (driver RPC, block manager, the Python
    # workers' daemon, the accumulator server) is up.
    assert spark.range(1000).repartition(2).rdd.map(lambda n: n.id % 7).distinct().count() == 7
    jvm = psutil.Process(int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()))  # type: ignore[union-attr]
    processes = [psutil.Process(os.getpid()), jvm, *jvm.children(recursive=True)]
    sockets = [s for p in processes for s in listening(p)]
    assert any(str(jvm.pid) in s for s in sockets), sockets  # the JVM's own servers were seen
    exposed = [s for s in sockets if not is_loopback(s.split()[1].rsplit(":", 1)[0])]
    assert not exposed, f"listening beyond loopback: {exposed}"
