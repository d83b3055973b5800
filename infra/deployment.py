"""What every construct of the stack is built from, carried down once: the deploy settings (CDK context), the table
configuration and the packaged assets; and the outputs constructs give back."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import CfnOutput
from constructs import Construct

from cdc_lake.core.config import PipelineConfig
from cdc_lake.core.names import GlueVersion
from infra.packaging import PipelineAssets
from infra.settings import DeploySettings


@dataclass(frozen=True)
class Deployment:
    """The stack's inputs: ``settings`` (context values), ``config`` (the tables), ``assets`` (code to upload), and
    ``glue_version``, the jobs' Glue version (``core.config.glue_version``: the configuration's, or GLUE_VERSION's)."""

    settings: DeploySettings
    config: PipelineConfig
    assets: PipelineAssets
    glue_version: GlueVersion


def stack_output(scope: Construct, name: str, value: str, description: str) -> CfnOutput:
    """A stack output made next to what it names, its logical id ``name`` whichever construct makes it (the
    operators and ``cdc_lake.local.deployed`` read the outputs by name)."""
    output = CfnOutput(scope, name, value=value, description=description)
    output.override_logical_id(name)
    return output
