"""Checked TLS to the source, as deployed: DMS's source endpoint verifies the certificate and host name against
a DMS certificate made from the CA bundle the Glue jobs carry in their library (Amazon RDS's from the pinned npm
package, or the file sourceCaFile names); sourceWithoutTls=true, and only it, turns that off, and the synth says so.
The jobs get the setting as an argument no run can change, whichever way it is set."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from aws_cdk.assertions import Annotations, Match

from cdc_lake.core.job_arguments import SourceArguments
from cdc_lake.local.deployed import DeployedStack
from infra.packaging import SOURCE_CA_ARCNAME, source_ca_bundle
from tests.infra.conftest import Synthesized, only, resources_of_type, synthesize
from tests.support.tls import make_authority

SOURCE_JOBS = ("job", "drift_job", "repair_job")


@pytest.fixture(scope="module")
def without_tls(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(tmp_path_factory.mktemp("without-tls"), {"sourceWithoutTls": "true"})


def _arguments(synth: Synthesized, job: str, kind: str = "DefaultArguments") -> dict[str, str]:
    construct = getattr(synth.stack.source_check, job)
    return synth.json["Resources"][synth.logical_id(construct)]["Properties"].get(kind, {})


def _assert_locked(synth: Synthesized, without_tls: str) -> None:
    """Each source job's sourceWithoutTls is a NonOverridableArguments entry (Glue lets a run's Arguments change
    DefaultArguments, never these), and nowhere a run could change it."""
    for job in SOURCE_JOBS:
        assert _arguments(synth, job, "NonOverridableArguments") == {"--source_without_tls": without_tls}
        assert "--source_without_tls" not in _arguments(synth, job)
    for _, trigger in resources_of_type(synth, "AWS::Glue::Trigger").items():
        assert all("--source_without_tls" not in a.get("Arguments", {}) for a in trigger["Properties"]["Actions"])


def _packaged_ca(synth: Synthesized) -> str:
    with zipfile.ZipFile(synth.stack.glue.library_zip) as library:
        return library.read(SOURCE_CA_ARCNAME).decode("ascii")


def test_dms_checks_the_source_certificate_against_the_rds_bundle_the_jobs_carry(demo: Synthesized) -> None:
    bundle = source_ca_bundle()
    assert bundle.count("-----BEGIN CERTIFICATE-----") >= 100  # every Region's roots
    _, certificate = only(resources_of_type(demo, "AWS::DMS::Certificate"))
    assert certificate["Properties"]["CertificatePem"] == bundle
    assert "CertificateIdentifier" not in certificate["Properties"]
    demo.template.has_resource_properties(
        "AWS::DMS::Endpoint",
        {
            "EndpointType": "source",
            "SslMode": "verify-full",
            "CertificateArn": {"Fn::GetAtt": [Match.string_like_regexp("SourceCa"), "CertificateArn"]},
        },
    )
    assert _packaged_ca(demo) == bundle
    _assert_locked(demo, "false")
    assert not Annotations.from_stack(demo.stack).find_warning("*", Match.string_like_regexp("sourceWithoutTls"))


def test_the_jobs_find_the_bundle_in_their_library_zip(demo: Synthesized) -> None:
    """Read as the Glue job reads it: the library zip on sys.path, in a fresh interpreter."""
    code = "from cdc_lake.ops.source_tls import bundled_ca_file; print(open(bundled_ca_file()).read(), end='')"
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(demo.stack.glue.library_zip)!r}); {code}"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert hashlib.sha256(done.stdout.encode()).digest() == hashlib.sha256(_packaged_ca(demo).encode()).digest()


def test_source_ca_file_replaces_the_rds_bundle(tmp_path: Path) -> None:
    own = make_authority(tmp_path / "own", "a company CA")
    synth = synthesize(tmp_path / "synth", {"sourceCaFile": str(own.ca)})
    pem = own.ca.read_text()
    assert only(resources_of_type(synth, "AWS::DMS::Certificate"))[1]["Properties"]["CertificatePem"] == pem
    assert _packaged_ca(synth) == pem


def test_a_source_ca_file_that_is_no_pem_bundle_stops_the_synth(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("not a certificate\n")
    with pytest.raises(Exception, match=r"sourceCaFile .*ca.pem: not a PEM bundle"):
        synthesize(tmp_path / "synth", {"sourceCaFile": str(tmp_path / "ca.pem")})


def test_source_without_tls_turns_every_check_off_and_says_so(without_tls: Synthesized) -> None:
    assert not resources_of_type(without_tls, "AWS::DMS::Certificate")
    without_tls.template.has_resource_properties(
        "AWS::DMS::Endpoint", {"EndpointType": "source", "SslMode": "none", "CertificateArn": Match.absent()}
    )
    _assert_locked(without_tls, "true")
    warnings = Annotations.from_stack(without_tls.stack).find_warning("*", Match.string_like_regexp("sourceWithoutTls"))
    assert len(warnings) == 1


def test_a_run_cannot_turn_the_check_off(demo: Synthesized, demo_stack: DeployedStack) -> None:
    """As Glue runs the deployed jobs (``DeployedJob.arguments``: defaults, the run's, then the locked ones), read
    by the jobs' own argument declarations."""
    for kind in ("source_check", "drift"):
        arguments = demo_stack.job_arguments(kind, {"--source_without_tls": "true"})
        assert arguments["--source_without_tls"] == "false"
        assert SourceArguments.from_options(arguments).source_without_tls is False
    demo.template.has_resource_properties(
        "AWS::Glue::Job", {"Name": "cdclake-repair", "NonOverridableArguments": {"--source_without_tls": "false"}}
    )
