#!/usr/bin/env bash
# Copy the CRDs (crds/) and the default rule bundle (policies/) into the Helm chart, which must
# carry its own copies (a chart cannot reach outside its folder). Run after changing either:
# tests/deploy/test_chart.py fails while the chart's copies differ.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
chart="$root/deploy/helm/kaipolicy"
rm -f "$chart"/crds/*.yaml "$chart"/files/policies/*.yaml
cp "$root"/crds/*.yaml "$chart/crds/"
cp "$root"/policies/*.yaml "$chart/files/policies/"
echo "chart synced: $(ls "$chart/crds" | wc -l) CRDs, $(ls "$chart/files/policies" | wc -l) rule files" >&2
