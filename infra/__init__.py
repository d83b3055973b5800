"""What is deployed: the AWS CDK app that provisions the cdc-lake pipeline from the table configuration.

Modules by concern: ``settings`` (context values), ``table_mappings`` (config -> DMS JSON, pure),
``packaging`` (Glue library zip and Lambda folder), ``storage``, ``dms``, ``glue``, ``trigger``,
``monitoring`` (constructs), ``pipeline_stack`` (wiring) and ``app`` (the ``cdk`` entry point).
"""
