#!/usr/bin/env bash
# Set up the differential harness against the reference scheduler in /tmp/goref (the scripts here
# expect that place): the reference's source at a pinned commit in /tmp/goref/kai, this
# directory's harness test added to it, the test binary built as /tmp/goref/harness.test, and the
# scripts copied beside it. See README.md.
#
# usage: tools/refcheck/setup.sh [REFERENCE_GIT_DIR]
#   REFERENCE_GIT_DIR: a clone or bare mirror of github.com/NVIDIA/KAI-Scheduler holding COMMIT
#   (without it, the commit is fetched from GitHub).
set -euo pipefail
COMMIT=72de64fc          # the reference's commit the harness was written and validated against
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${GOREF_DIR:-/tmp/goref}"   # the scripts expect /tmp/goref; another place only builds the binary
if [ -e "$OUT/kai" ]; then
  echo "setup.sh: $OUT/kai exists; move it away first" >&2
  exit 1
fi
mkdir -p "$OUT/kai" "$OUT/tmp"
if [ $# -ge 1 ]; then
  git --git-dir="$1" archive "$COMMIT" | tar -x -C "$OUT/kai"
else
  tmp="$(mktemp -d)"
  git clone --quiet --filter=blob:none https://github.com/NVIDIA/KAI-Scheduler "$tmp/kai"
  git -C "$tmp/kai" archive "$COMMIT" | tar -x -C "$OUT/kai"
  rm -rf "$tmp"
fi
# One switch into the reference's node accounting, off unless GOREF_EXACT_MOVES=1 is in the
# environment of a run (README, "Known drift in the reference"): a shared-GPU pod added again to
# its node on another GPU group has the copy it replaces removed first, as a pod is removed.
NODE_INFO="$OUT/kai/pkg/scheduler/api/node_info/node_info.go"
perl -0pi -e 's/^import \(\n/import (\n\t"os"\n/m unless /^\t"os"$/m;
  s/^(\t+)(if task\.IsSharedGPUAllocation\(\) && allowTaskToExistOnDifferentGPU \{\n)/$1$2$1\tif replaced, held := ni.PodInfos[key]; held && os.Getenv("GOREF_EXACT_MOVES") == "1" {\n$1\t\tif err := ni.RemoveTask(replaced); err != nil {\n$1\t\t\treturn err\n$1\t\t}\n$1\t}\n/m' "$NODE_INFO"
if ! grep -q GOREF_EXACT_MOVES "$NODE_INFO"; then
  echo "setup.sh: the GOREF_EXACT_MOVES switch found no place in $NODE_INFO" >&2
  exit 1
fi
# A second switch, off unless GOREF_EXACT_GUARDS=1: the checks that take a whole GPU off a node's
# idle GPUs as a shared GPU fills, and give it back as it empties, compare the node's GPUs with
# idle plus used, and used counts the whole GPUs of pipelined pods, which wait on releasing GPUs.
# On a node holding such pods the giving back stops while the taking goes on, and each eviction
# and roll-back of a fractional pod there costs an idle GPU. With the switch the checks leave
# those GPUs out, which also removes the loss within one eviction that kaipolicy reproduces
# (README, "Known drift in the reference": a seed that differs only with it on is no lead).
SHARING_INFO="$OUT/kai/pkg/scheduler/api/node_info/gpu_sharing_node_info.go"
perl -0pi -e 's/^import \(\n/import (\n\t"os"\n/m unless /^\t"os"$/m;
  s/int\(ni\.Idle\.GPUs\(\)\)\+ni\.getNumberOfUsedGPUs\(\)/int(ni.Idle.GPUs())+ni.gorefGuardUsedGPUs()/g' "$SHARING_INFO"
if [ "$(grep -c 'gorefGuardUsedGPUs()' "$SHARING_INFO")" != 4 ]; then
  echo "setup.sh: the GOREF_EXACT_GUARDS switch did not find its four places in $SHARING_INFO" >&2
  exit 1
fi
cat >> "$SHARING_INFO" <<'GO'

// gorefGuardUsedGPUs is the used whole GPUs the idle-GPU checks compare with: with
// GOREF_EXACT_GUARDS=1 (the refcheck harness's switch) less those of pipelined pods.
func (ni *NodeInfo) gorefGuardUsedGPUs() int {
	used := ni.getNumberOfUsedGPUs()
	if os.Getenv("GOREF_EXACT_GUARDS") != "1" {
		return used
	}
	waiting := 0.0
	for _, pod := range ni.PodInfos {
		if pod.Status == pod_status.Pipelined && !pod.IsSharedGPUAllocation() {
			waiting += getAcceptedTaskResourceWithoutSharedGPU(pod).GPUs()
		}
	}
	return used - int(waiting)
}
GO
# A third switch, off unless GOREF_EXACT_MOVE_ROLLBACKS=1: the moves leak above undone on the
# roll-back alone. A move within the node leaves the replaced copy counted, as stock Go does (and
# as kaipolicy does); rolling the move back then takes that copy off too, so the pod's un-eviction
# that follows leaves the node as it was (kaipolicy restores it exactly). Moves that stand keep
# the leak, which GOREF_EXACT_MOVES removes as well (with that switch on, this one does nothing:
# the replaced copy is gone already; README, "Known drift in the reference").
STATEMENT="$OUT/kai/pkg/scheduler/framework/statement.go"
perl -0pi -e 's/^import \(\n/import (\n\t"os"\n/m unless /^\t"os"$/m;
  s/^(\tpreviousStatus := task\.Status\n)/\tvar gorefReplaced *pod_info.PodInfo \/\/ the copy a move within the node replaced\n$1/m;
  s/^(\t\tpreviousGpuGroup = taskOnNode\.GPUGroups\n)/$1\t\tgorefReplaced = taskOnNode\n/m;
  s/^(\t\treverseOperation: func\(\) error \{\n)\t\t\treturn (s\.unpipeline\(task, previousNode, previousStatus, previousGpuGroup, previousResourceClaimInfo, previousIsVirtualStatus\))\n/$1\t\t\terr := $2\n\t\t\tif gorefReplaced != nil && os.Getenv("GOREF_EXACT_MOVE_ROLLBACKS") == "1" && os.Getenv("GOREF_EXACT_MOVES") != "1" {\n\t\t\t\tif n, found := s.ssn.ClusterInfo.Nodes[hostname]; found {\n\t\t\t\t\tkey := pod_info.PodKey(gorefReplaced.Pod)\n\t\t\t\t\tif _, held := n.PodInfos[key]; !held {\n\t\t\t\t\t\tn.PodInfos[key] = gorefReplaced\n\t\t\t\t\t\tif rerr := n.RemoveTask(gorefReplaced); rerr != nil {\n\t\t\t\t\t\t\treturn rerr\n\t\t\t\t\t\t}\n\t\t\t\t\t}\n\t\t\t\t}\n\t\t\t}\n\t\t\treturn err\n/m' "$STATEMENT"
if [ "$(grep -c gorefReplaced "$STATEMENT")" -lt 5 ]; then
  echo "setup.sh: the GOREF_EXACT_MOVE_ROLLBACKS switch did not find its places in $STATEMENT" >&2
  exit 1
fi
# A fourth switch, off unless GOREF_SORTED_VICTIM_NODES=1: the nodes of a scenario's latest
# victim job are tried in name order (as kaipolicy tries them) instead of a Go map's order. It
# removes one source of map order only; a seed whose Go outcomes collapse to kaipolicy's with it
# on differed by that order.
SOLVER="$OUT/kai/pkg/scheduler/actions/common/solvers/by_pod_solver.go"
perl -0pi -e 's/^import \(\n/import (\n\t"os"\n\t"sort"\n/m unless /^\t"sort"$/m;
  s/^\treturn maps\.Keys\(pjNodeNames\)\n/\tkeys := maps.Keys(pjNodeNames)\n\tif os.Getenv("GOREF_SORTED_VICTIM_NODES") == "1" {\n\t\tsort.Strings(keys)\n\t}\n\treturn keys\n/m' "$SOLVER"
if ! grep -q GOREF_SORTED_VICTIM_NODES "$SOLVER"; then
  echo "setup.sh: the GOREF_SORTED_VICTIM_NODES switch found no place in $SOLVER" >&2
  exit 1
fi
mkdir -p "$OUT/kai/pkg/scheduler/actions/zzharness"
cp "$HERE/harness_test.go" "$OUT/kai/pkg/scheduler/actions/zzharness/"
# the reference's benchmark shapes with the actions alone timed (run with go test -bench ActionsAlone)
cp "$HERE/actions_alone_test.go" "$OUT/kai/pkg/scheduler/actions/"
cp "$HERE"/*.py "$OUT/"
(cd "$OUT/kai" && GOFLAGS=-buildvcs=false go test -c -o ../harness.test ./pkg/scheduler/actions/zzharness/)
echo "built $OUT/harness.test"
