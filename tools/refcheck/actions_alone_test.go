// The reference's benchmark shapes with only the actions timed, for bench/README.md's comparison
// with kaipolicy on the same machine. The reference's own benchmarks build the session inside the
// timer, and building one waits on a fake informer's cache sync (about 100 ms an op), which
// swamps the actions. setup.sh copies this file beside those benchmarks, whose shape builders it
// uses; run it from the reference's tree:
//
//	go test -run XXX -bench ActionsAlone -benchtime 5x ./pkg/scheduler/actions/

package actions_test

import (
	"fmt"
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

// BenchmarkActionsAlone times each action, and all five in turn, on the reference's shapes: its
// allocate shape (every job pending) and its mixed one (half the jobs running).
func BenchmarkActionsAlone(b *testing.B) {
	allocateOnly := func() []framework.Action { return []framework.Action{allocate.New()} }
	preemptOnly := func() []framework.Action { return []framework.Action{preempt.New()} }
	consolidationOnly := func() []framework.Action { return []framework.Action{consolidation.New()} }
	everyAction := func() []framework.Action {
		return []framework.Action{allocate.New(), consolidation.New(), reclaim.New(), preempt.New(),
			stalegangeviction.New()}
	}
	shapes := []struct {
		name        string
		nodes, jobs int
		mixed       bool
		actions     func() []framework.Action
	}{
		{"Allocate", 10, 50, false, allocateOnly},
		{"Allocate", 50, 200, false, allocateOnly},
		{"Allocate", 100, 500, false, allocateOnly},
		{"Preempt", 10, 50, true, preemptOnly},
		{"Preempt", 50, 200, true, preemptOnly},
		{"Consolidation", 10, 50, true, consolidationOnly},
		{"Consolidation", 50, 200, true, consolidationOnly},
		{"FullCycle", 10, 50, true, everyAction},
		{"FullCycle", 50, 200, true, everyAction},
		{"FullCycle", 100, 500, true, everyAction},
	}
	for _, shape := range shapes {
		b.Run(fmt.Sprintf("%s%dx%d", shape.name, shape.nodes, shape.jobs), func(b *testing.B) {
			build := createBenchmarkTopology
			if shape.mixed {
				build = createBenchmarkTopologyWithMixedJobs
			}
			topology := build(shape.nodes, shape.jobs)
			timeActions(b, topology, shape.actions()...)
		})
	}
}
