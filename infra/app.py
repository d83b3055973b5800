"""CDK entry point (``cdk.json``: ``.venv/bin/python -m infra.app``).

Reads the context (infra.settings), loads the table configuration with ``cdc_lake.core.config.load_config``
(its Glue version overridden by ``GLUE_VERSION`` when set, as ``make synth GLUE_VERSION=6.0`` does), builds the
Glue/Lambda artifacts into a folder of its own (two synths at once never share one) and synthesizes one stack,
checked by cdk-nag.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from cdc_lake.core.config import PipelineConfig, glue_version, load_config
from cdc_lake.core.exceptions import SettingsError
from infra.deployment import Deployment
from infra.packaging import REPO_ROOT, SourceLayout, build_assets
from infra.pipeline_stack import PipelineStack
from infra.settings import RAW_RETENTION_DAYS, DeploySettings, example_values_message
from infra.source_check import SHARED_SECRET_WARNING


def cdk_json_context() -> dict[str, Any]:
    """The context ``cdk.json`` gives every synth (feature flags and deployment defaults)."""
    return dict(json.loads((REPO_ROOT / "cdk.json").read_text(encoding="utf-8"))["context"])


def refuse_rollback_past_landing(settings: DeploySettings, config: PipelineConfig) -> None:
    """Snapshots kept as long as the raw files would offer rollbacks the landing can no longer replay (each one then
    refused by ``cdc-lake rollback``): refused at synth instead."""
    keep_days = config.lake.upkeep.keep_days
    if keep_days >= settings.raw_retention_days:
        raise SettingsError(
            f"lake.upkeep.keep_days ({keep_days}) in {settings.table_config} must be below {RAW_RETENTION_DAYS} "
            f"({settings.raw_retention_days}): a rollback re-applies the DMS files after the change it returns to, "
            "and the scheduled maintenance removes applied files after rawRetentionDays. Lower keep_days or raise "
            f"{RAW_RETENTION_DAYS} (docs/deploy.md#table-maintenance)"
        )


def refuse_another_engine(settings: DeploySettings, config: PipelineConfig) -> None:
    """The configuration's ``dms.source_engine`` (what its ``source_type``s are checked against) must be the
    engine the stack's DMS endpoint reads."""
    named = config.dms.source_engine
    if named is not None and named != settings.source_engine:
        raise SettingsError(
            f"dms.source_engine in {settings.table_config} is {named}, but sourceEngine is {settings.source_engine}: "
            "the columns' source_type would be checked against another engine's types. Set one to the other"
        )


def create_app(
    context: dict[str, Any] | None = None,
    *,
    asset_dir: Path,
    sources: SourceLayout | None = None,
    outdir: str | None = None,
    deployment_warnings: bool = True,
) -> tuple[cdk.App, PipelineStack]:
    """Build the app and its stack; the CLI and the tests both come through here. ``deployment_warnings=False``
    leaves out the warnings about deployment values (placeholders in use, the drift jobs reading DMS's secret), for
    a caller that fills those values with placeholders on purpose and never deploys the result."""
    app = cdk.App(context=context, outdir=outdir)
    settings = DeploySettings.from_context(app.node)
    config_path = Path(settings.table_config)
    if not config_path.is_absolute():
        config_path = REPO_ROOT / config_path
    config = load_config(config_path)
    refuse_rollback_past_landing(settings, config)
    refuse_another_engine(settings, config)
    assets = build_assets(config, asset_dir, sources=sources, source_ca_file=settings.source_ca_file)
    deployment = Deployment(settings, config, assets, glue_version(config))
    stack = PipelineStack(app, settings.stack_name, deployment=deployment)
    message = example_values_message(settings)
    if message and deployment_warnings:
        # Recorded in the cloud assembly too, so synth, diff and deploy all show it against the stack.
        cdk.Annotations.of(stack).add_warning_v2("cdc-lake:exampleValues", message)
    if not deployment_warnings:
        cdk.Annotations.of(stack).acknowledge_warning(SHARED_SECRET_WARNING, "a synth never deployed")
    cdk.Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
    return app, stack


def main() -> None:
    # Synth copies the assets into the cloud assembly, so their build folder need only outlive it.
    with tempfile.TemporaryDirectory(prefix="cdc-lake-assets-") as asset_dir:
        app, stack = create_app(asset_dir=Path(asset_dir))
        message = example_values_message(stack.settings)
        if message:
            print(f"cdc-lake: {message}", file=sys.stderr)
        app.synth()


if __name__ == "__main__":
    main()
