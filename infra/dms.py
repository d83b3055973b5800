"""DMS: service roles, network, the source and S3 target endpoints, and the full-load-and-cdc replication
(a replication instance + task, or a DMS Serverless replication config), all generated from the same
table configuration the Glue jobs and the Lambda read."""

from __future__ import annotations

import base64
import json
from typing import Any

from aws_cdk import Annotations, Aws, CfnResource, Stack
from aws_cdk import aws_dms as dms
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from cdk_nag import NagSuppressions
from constructs import Construct

from cdc_lake.core.config import PipelineConfig
from infra.deployment import Deployment, stack_output
from infra.log_groups import dms_instance_log_group, dms_serverless_log_group, log_group
from infra.settings import SOURCE_ORACLE_WALLET, SOURCE_WITHOUT_TLS, DeploySettings, wallet_path
from infra.table_mappings import s3_settings, table_mappings

DMS_VPC_ROLE_NAME = "dms-vpc-role"
DMS_CLOUDWATCH_LOGS_ROLE_NAME = "dms-cloudwatch-logs-role"
# The warning that an Oracle source's certificate is checked without its host name (DMS's verify-ca).
ORACLE_VERIFY_CA_WARNING = "cdc-lake:sourceOracleVerifyCa"

# Task settings: keep landed files (never drop the table folder on reload), no batch apply (DMS advises
# against it with S3 targets), task logs in CloudWatch through dms-cloudwatch-logs-role.
REPLICATION_SETTINGS: dict[str, Any] = {
    "TargetMetadata": {"BatchApplyEnabled": False, "SupportLobs": True, "FullLobMode": False, "LobMaxSize": 32},
    "FullLoadSettings": {"TargetTablePrepMode": "DO_NOTHING"},
    "Logging": {"EnableLogging": True},
}


def _snake_case(name: str) -> str:
    out = []
    for index, char in enumerate(name):
        if char.isupper() and index and not name[index - 1].isupper():
            out.append("_")
        out.append(char.lower())
    return "".join(out)


def dms_principal(*, regional: bool = False) -> iam.IPrincipal:
    """DMS, for this account only (aws:SourceAccount, which DMS's confused-deputy guide shows for its roles). No
    aws:SourceArn: DMS documents it for some roles only, and one a role's trust rejects fails the task silently."""
    service = f"dms.{Aws.REGION}.amazonaws.com" if regional else "dms.amazonaws.com"
    return iam.ServicePrincipal(service, conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}})


class DmsServiceRoles(Construct):
    """The account-wide roles DMS looks up by exact name; created once per account (see createDmsServiceRoles)."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.vpc_role = iam.Role(
            self,
            "VpcRole",
            role_name=DMS_VPC_ROLE_NAME,
            assumed_by=dms_principal(),
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AmazonDMSVPCManagementRole")
            ],
        )
        self.logs_role = iam.Role(
            self,
            "CloudWatchLogsRole",
            role_name=DMS_CLOUDWATCH_LOGS_ROLE_NAME,
            # Unconditioned: a source condition on this role has been reported to stop DMS creating the task
            # log groups (terraform-aws-modules/terraform-aws-dms#84), and DMS documents none for it.
            assumed_by=iam.ServicePrincipal("dms.amazonaws.com"),
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AmazonDMSCloudWatchLogsRole")
            ],
        )
        for role, policy in (
            (self.vpc_role, "AmazonDMSVPCManagementRole"),
            (self.logs_role, "AmazonDMSCloudWatchLogsRole"),
        ):
            NagSuppressions.add_resource_suppressions(
                role,
                [
                    {
                        "id": "AwsSolutions-IAM4",
                        "reason": f"DMS looks this role up by its exact name and requires the AWS-managed {policy} "
                        "policy on it; AWS maintains that policy as DMS evolves.",
                        "appliesTo": [f"Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/{policy}"],
                    }
                ],
            )


def outbound_group(scope: Construct, settings: DeploySettings, description: str, https: str) -> ec2.SecurityGroup:
    """A security group in the deployment's VPC allowing no traffic but HTTPS out (to AWS APIs: endpoints or
    NAT); ``reach_source`` opens the way to the source database."""
    vpc = ec2.Vpc.from_vpc_attributes(
        scope, "Vpc", vpc_id=settings.vpc_id, availability_zones=Stack.of(scope).availability_zones
    )
    group = ec2.SecurityGroup(scope, "SecurityGroup", vpc=vpc, allow_all_outbound=False, description=description)
    group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), f"{https} (endpoints or NAT)")
    return group


def reach_source(
    scope: Construct, group: ec2.SecurityGroup, settings: DeploySettings, ingress: tuple[str, str]
) -> None:
    """Let ``group`` reach the source database on its port: through the source's own security group when one is
    given (the ingress rule ``(construct id, description)`` there admits ``group`` only), else any address."""
    if not settings.source_security_group_id:
        group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(settings.source_port), "Source database")
        return
    source_group = ec2.SecurityGroup.from_security_group_id(
        scope, "SourceSecurityGroup", settings.source_security_group_id, mutable=False
    )
    group.add_egress_rule(source_group, ec2.Port.tcp(settings.source_port), "Source database")
    ec2.CfnSecurityGroupIngress(
        scope,
        ingress[0],
        group_id=settings.source_security_group_id,
        ip_protocol="tcp",
        from_port=settings.source_port,
        to_port=settings.source_port,
        source_security_group_id=group.security_group_id,
        description=ingress[1],
    )


class DmsReplication(Construct):
    """Endpoints and replication for one source database into the raw bucket."""

    def __init__(
        self, scope: Construct, construct_id: str, *, deployment: Deployment, raw_bucket: s3.IBucket, key: kms.IKey
    ) -> None:
        super().__init__(scope, construct_id)
        settings, config = deployment.settings, deployment.config
        prefix = settings.resource_prefix
        self.service_roles = DmsServiceRoles(self, "ServiceRoles") if settings.create_dms_service_roles else None

        # DMS only opens outbound connections: no ingress rule at all.
        description = "cdc-lake DMS replication: outbound to the source database and AWS APIs only"
        self.security_group = outbound_group(self, settings, description, "HTTPS to S3 and Secrets Manager")
        ingress = ("SourceIngressFromDms", "cdc-lake DMS replication reads the source database")
        reach_source(self, self.security_group, settings, ingress)

        self.subnet_group = dms.CfnReplicationSubnetGroup(
            self,
            "SubnetGroup",
            replication_subnet_group_description="cdc-lake DMS replication subnets",
            replication_subnet_group_identifier=f"{prefix}-subnets",
            subnet_ids=list(settings.subnet_ids),
        )
        if self.service_roles:
            self.subnet_group.node.add_dependency(self.service_roles.vpc_role)

        self.source_endpoint = self._source_endpoint(settings, prefix, deployment.assets.source_ca)
        self.target_role, self.target_endpoint = self._target_endpoint(config, raw_bucket, prefix)

        mappings = table_mappings(config)
        endpoints = {"source_endpoint_arn": self.source_endpoint.ref, "target_endpoint_arn": self.target_endpoint.ref}
        if settings.dms_mode == "serverless":
            self.replication: CfnResource = dms.CfnReplicationConfig(
                self,
                "ReplicationConfig",
                **endpoints,
                replication_config_identifier=f"{prefix}-replication",
                replication_type="full-load-and-cdc",
                table_mappings=mappings,
                replication_settings=REPLICATION_SETTINGS,
                compute_config=dms.CfnReplicationConfig.ComputeConfigProperty(
                    max_capacity_units=settings.dms_serverless_max_capacity_units,
                    multi_az=False,
                    replication_subnet_group_id=self.subnet_group.ref,
                    vpc_security_group_ids=[self.security_group.security_group_id],
                ),
            )
        else:
            self.instance = dms.CfnReplicationInstance(
                self,
                "ReplicationInstance",
                replication_instance_identifier=f"{prefix}-instance",
                replication_instance_class=settings.dms_instance_class,
                allocated_storage=settings.dms_allocated_storage_gb,
                publicly_accessible=False,
                multi_az=False,
                auto_minor_version_upgrade=True,
                replication_subnet_group_identifier=self.subnet_group.ref,
                vpc_security_group_ids=[self.security_group.security_group_id],
            )
            self.replication = dms.CfnReplicationTask(
                self,
                "ReplicationTask",
                **endpoints,
                replication_task_identifier=f"{prefix}-task",
                migration_type="full-load-and-cdc",
                replication_instance_arn=self.instance.ref,
                table_mappings=json.dumps(mappings),
                replication_task_settings=json.dumps(REPLICATION_SETTINGS),
            )
        if self.service_roles:
            self.replication.node.add_dependency(self.service_roles.logs_role)
        # The task log group DMS would otherwise create at the first start, never to expire.
        if settings.dms_mode == "serverless":
            name = dms_serverless_log_group(self.replication.get_att("ReplicationConfigArn").to_string())
        else:
            name = dms_instance_log_group(settings)
        self.log_group = log_group(self, "TaskLogGroup", name, settings, key)
        replication = "ReplicationConfigArn" if settings.dms_mode == "serverless" else "ReplicationTaskArn"
        stack_output(self, replication, self.replication.ref, "Start this to begin the full load and CDC")
        stack_output(
            self, "DmsSecurityGroupId", self.security_group.security_group_id, "Allow it on the source database"
        )

    def _source_endpoint(self, settings: DeploySettings, prefix: str, source_ca: str) -> dms.CfnEndpoint:
        # DMS reads host, port, username and password from the secret: with SecretsManagerSecretId the
        # endpoint must not also carry ServerName/Port/UserName/Password ("you can't specify both").
        self.secret_access_role = iam.Role(
            self,
            "SecretAccessRole",
            assumed_by=iam.CompositePrincipal(dms_principal(), dms_principal(regional=True)),
            description="Lets DMS read the source database secret, and nothing else",
        )
        statements = [
            iam.PolicyStatement(
                actions=["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                resources=[settings.source_secret_arn],
            )
        ]
        if settings.source_secret_kms_key_arn:
            statements.append(
                iam.PolicyStatement(actions=["kms:Decrypt"], resources=[settings.source_secret_kms_key_arn])
            )
        secret_policy = iam.Policy(self, "SecretAccessPolicy", statements=statements, roles=[self.secret_access_role])
        secret = {
            "secrets_manager_secret_id": settings.source_secret_arn,
            "secrets_manager_access_role_arn": self.secret_access_role.role_arn,
        }
        engine = settings.engine
        # The settings property of the engine (MySqlSettings, PostgreSqlSettings, OracleSettings or
        # MicrosoftSqlServerSettings): the secret, and what CDC from it needs (infra/source_engines.py).
        property_class = {
            "my_sql_settings": dms.CfnEndpoint.MySqlSettingsProperty,
            "postgre_sql_settings": dms.CfnEndpoint.PostgreSqlSettingsProperty,
            "oracle_settings": dms.CfnEndpoint.OracleSettingsProperty,
            "microsoft_sql_server_settings": dms.CfnEndpoint.MicrosoftSqlServerSettingsProperty,
        }[engine.settings_property]
        engine_settings = {engine.settings_property: property_class(**secret, **engine.cdc_settings)}
        endpoint = dms.CfnEndpoint(
            self,
            "SourceEndpoint",
            endpoint_identifier=f"{prefix}-source",
            endpoint_type="source",
            engine_name=engine.name,
            **self._source_tls(settings, source_ca),
            database_name=settings.source_database if engine.needs_database else None,
            **engine_settings,
        )
        # DMS tries the secret when the endpoint is created: the policy must exist by then.
        endpoint.node.add_dependency(secret_policy)
        return endpoint

    def _source_tls(self, settings: DeploySettings, source_ca: str) -> dict[str, str]:
        """The source endpoint's SslMode and certificate: the strongest DMS offers the engine, or none with
        sourceWithoutTls (docs/deploy.md#checked-tls-to-the-source)."""
        if settings.source_without_tls:
            Annotations.of(self).add_warning_v2(
                "cdc-lake:sourceWithoutTls",
                f"{SOURCE_WITHOUT_TLS}=true: DMS and the Glue jobs reach the source without checked TLS, so its "
                "credentials and rows cross the network unprotected (docs/deploy.md#checked-tls-to-the-source)",
            )
            return {"ssl_mode": "none"}
        engine = settings.engine
        # No identifier: DMS certificates cannot change, so a new bundle is a new resource beside the old.
        if engine.wallet:
            # Oracle: DMS takes an Oracle wallet, never a PEM bundle, and offers verify-ca only (no host name
            # check). CloudFormation's CertificateWallet is the file's bytes in base64 (the DMS API's
            # Certificate.CertificateWallet: "Base64-encoded binary data object").
            assert settings.source_oracle_wallet is not None  # DeploySettings refuses oracle without one
            wallet = wallet_path(settings.source_oracle_wallet).read_bytes()
            self.source_ca = dms.CfnCertificate(
                self, "SourceCa", certificate_wallet=base64.b64encode(wallet).decode("ascii")
            )
            Annotations.of(self).add_warning_v2(
                ORACLE_VERIFY_CA_WARNING,
                f"sourceEngine=oracle: DMS checks the source's certificate against {SOURCE_ORACLE_WALLET} but not "
                "its host name (SslMode verify-ca, the strongest DMS offers Oracle): a certificate any CA in the "
                "wallet signed for another host is accepted. Keep only the source's own CA in the wallet "
                "(docs/deploy.md#oracle-a-wallet-and-verify-ca)",
            )
        else:
            self.source_ca = dms.CfnCertificate(self, "SourceCa", certificate_pem=source_ca)
        return {"ssl_mode": engine.ssl_mode, "certificate_arn": self.source_ca.attr_certificate_arn}

    def _target_endpoint(
        self, config: PipelineConfig, raw_bucket: s3.IBucket, prefix: str
    ) -> tuple[iam.Role, dms.CfnEndpoint]:
        folder = config.dms.bucket_folder
        objects = raw_bucket.arn_for_objects(f"{folder}/*" if folder else "*")
        role = iam.Role(
            self,
            "TargetRole",
            assumed_by=dms_principal(),
            description="Lets DMS write its output under the configured folder of the raw bucket",
        )
        policy = iam.Policy(
            self,
            "TargetPolicy",
            roles=[role],
            statements=[
                iam.PolicyStatement(
                    actions=["s3:PutObject", "s3:DeleteObject", "s3:PutObjectTagging"], resources=[objects]
                ),
                iam.PolicyStatement(
                    actions=["s3:ListBucket", "s3:GetBucketLocation"], resources=[raw_bucket.bucket_arn]
                ),
            ],
        )
        NagSuppressions.add_resource_suppressions(
            policy,
            [
                {
                    "id": "AwsSolutions-IAM5",
                    "reason": "DMS names its output files itself (<folder>/<schema>/<table>/LOAD*.csv and "
                    "timestamped CDC files), so object permissions are granted on the DMS folder prefix only.",
                    "appliesTo": [{"regex": "/^Resource::<.*Raw.*\\.Arn>\\/.*\\*$/"}],
                }
            ],
        )
        properties = s3_settings(
            config.dms,
            bucket_name=raw_bucket.bucket_name,
            service_access_role_arn=role.role_arn,
            expected_bucket_owner=Aws.ACCOUNT_ID,
        )
        endpoint = dms.CfnEndpoint(
            self,
            "TargetEndpoint",
            endpoint_identifier=f"{prefix}-raw-s3",
            endpoint_type="target",
            engine_name="s3",
            s3_settings=dms.CfnEndpoint.S3SettingsProperty(**{_snake_case(k): v for k, v in properties.items()}),
        )
        # DMS checks the role's access when the endpoint is created.
        endpoint.node.add_dependency(policy)
        return role, endpoint
