"""Clients of the local AWS endpoint (moto's server) the tests run against."""

from __future__ import annotations

from typing import Any


def aws_client(endpoint: str, service: str) -> Any:
    """A boto3 client of the local endpoint, given explicitly: tests that use moto's in-process mock keep theirs."""
    import boto3

    from cdc_lake.local.aws_endpoint import DUMMY_CREDENTIAL

    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=DUMMY_CREDENTIAL,
        aws_secret_access_key=DUMMY_CREDENTIAL,
    )
