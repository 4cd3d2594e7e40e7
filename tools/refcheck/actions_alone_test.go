// The reference's benchmark shapes with only the actions timed, for bench/README.md's comparison
// with kaipolicy on the same machine. The reference's own benchmarks build the session inside the
// timer, and building one waits on a fake informer's cache sync (about 100 ms an op), which
// swamps the actions. setup.sh copies this file beside those benchmarks, whose shape builders it
// uses; run it from the reference's tree:
//
//	go test -run XXX -bench ActionsAlone -benchtime 5x ./pkg/scheduler/actions/

package actions_test

import (
	"testing"

	"go.uber.org/mock/gomock"

	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/actions/allocate"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/actions/consolidation"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/actions/preempt"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/actions/reclaim"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/actions/stalegangeviction"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/framework"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/test_utils"
)

// timeActions runs the actions on a session built afresh for each op, the build untimed.
func timeActions(b *testing.B, topology test_utils.TestTopologyBasic, actions ...framework.Action) {
	ctrl := gomock.NewController(b)
	defer ctrl.Finish()
	b.ResetTimer()
	for op := 0; op < b.N; op++ {
		b.StopTimer()
		ssn := test_utils.BuildSession(topology, ctrl)
		b.StartTimer()
		for _, action := range actions {
			action.Execute(ssn)
		}
	}
}

func everyAction() []framework.Action {
	return []framework.Action{allocate.New(), consolidation.New(), reclaim.New(), preempt.New(),
		stalegangeviction.New()}
}

func BenchmarkActionsAloneAllocate10x50(b *testing.B) {
	timeActions(b, createBenchmarkTopology(10, 50), allocate.New())
}

func BenchmarkActionsAloneAllocate50x200(b *testing.B) {
	timeActions(b, createBenchmarkTopology(50, 200), allocate.New())
}

func BenchmarkActionsAloneAllocate100x500(b *testing.B) {
	timeActions(b, createBenchmarkTopology(100, 500), allocate.New())
}

func BenchmarkActionsAlonePreempt10x50(b *testing.B) {
	timeActions(b, createBenchmarkTopologyWithMixedJobs(10, 50), preempt.New())
}

func BenchmarkActionsAlonePreempt50x200(b *testing.B) {
	timeActions(b, createBenchmarkTopologyWithMixedJobs(50, 200), preempt.New())
}

func BenchmarkActionsAloneConsolidation10x50(b *testing.B) {
	timeActions(b, createBenchmarkTopologyWithMixedJobs(10, 50), consolidation.New())
}

func BenchmarkActionsAloneConsolidation50x200(b *testing.B) {
	timeActions(b, createBenchmarkTopologyWithMixedJobs(50, 200), consolidation.New())
}

func BenchmarkActionsAloneFullCycle10x50(b *testing.B) {
	timeActions(b, createBenchmarkTopologyWithMixedJobs(10, 50), everyAction()...)
}

func BenchmarkActionsAloneFullCycle50x200(b *testing.B) {
	timeActions(b, createBenchmarkTopologyWithMixedJobs(50, 200), everyAction()...)
}

func BenchmarkActionsAloneFullCycle100x500(b *testing.B) {
	timeActions(b, createBenchmarkTopologyWithMixedJobs(100, 500), everyAction()...)
}
