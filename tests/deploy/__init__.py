"""Tests of the deployment artifacts: manifests/, the Helm chart, the Dockerfile."""
