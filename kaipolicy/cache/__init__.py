"""Cluster sources: scenario files and Kubernetes; snapshots, binds and evictions."""
