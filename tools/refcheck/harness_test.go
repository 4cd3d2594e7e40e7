// Throwaway differential harness (NOT part of KAI): runs a scenario JSON (made by
// /tmp/goref/to_go.py) through the reference scheduler's own actions, building the
// session the way pkg/scheduler/test_utils does (jobs_fake / nodes_fake builders, the
// default plugin tiers, a cache mock so that the predicates plugin runs), settling
// between cycles the way integration_tests_utils does.
//
//	HARNESS_INPUT=/path/scenario.json go test -run TestHarness ./pkg/scheduler/actions/zzharness/
//
// Prints one line "HARNESS_RESULT:<json>".
package zzharness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	. "go.uber.org/mock/gomock"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	kaiv1alpha1 "github.com/NVIDIA/KAI-scheduler/pkg/apis/kai/v1alpha1"
	enginev2 "github.com/NVIDIA/KAI-scheduler/pkg/apis/scheduling/v2"
	enginev2alpha2 "github.com/NVIDIA/KAI-scheduler/pkg/apis/scheduling/v2alpha2"
	"github.com/NVIDIA/KAI-scheduler/pkg/common/constants"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/actions/allocate"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/actions/consolidation"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/actions/preempt"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/actions/reclaim"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/actions/stalegangeviction"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/api"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/api/common_info"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/api/eviction_info"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/api/node_info"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/api/pod_info"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/api/pod_status"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/api/podgroup_info"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/api/podgroup_info/subgroup_info"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/api/queue_info"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/api/resource_info"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/cache"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/cache/cluster_info"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/conf"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/framework"
	k8splugins "github.com/NVIDIA/KAI-scheduler/pkg/scheduler/k8s_internal/plugins"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/k8s_utils"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/test_utils"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/test_utils/jobs_fake"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/test_utils/nodes_fake"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/test_utils/tasks_fake"
)

// ---- input ---------------------------------------------------------------------------------

type Quant struct {
	GPU    float64 `json:"gpu"`
	CPU    float64 `json:"cpu"`
	Memory float64 `json:"memory"` // already in the CRD's unit (MB); -1 unlimited
}

type QueueSpec struct {
	Name                     string   `json:"name"`
	Parent                   string   `json:"parent"`
	Priority                 int      `json:"priority"`
	Deserved                 Quant    `json:"deserved"`
	Limit                    Quant    `json:"limit"`
	OverQuotaWeight          Quant    `json:"overQuotaWeight"`
	CreationOrder            int      `json:"creationOrder"`
	PreemptMinRuntimeSeconds *float64 `json:"preemptMinRuntimeSeconds"`
	ReclaimMinRuntimeSeconds *float64 `json:"reclaimMinRuntimeSeconds"`
}

type NodeSpec struct {
	Name            string            `json:"name"`
	GPUs            int               `json:"gpus"`
	GPUMemoryMiB    int               `json:"gpuMemoryMiB"`
	GPUMemorySynced *bool             `json:"gpuMemorySynced"`
	CPUMillis       float64           `json:"cpuMillis"`
	MemoryBytes     float64           `json:"memoryBytes"`
	MaxPods         *int              `json:"maxPods"`
	Labels          map[string]string `json:"labels"`
	MigStrategy     string            `json:"migStrategy"`
	Mig             map[string]int    `json:"mig"`
	Unschedulable   bool              `json:"unschedulable"`
}

type TaskSpec struct {
	Name                   string            `json:"name"`
	State                  string            `json:"state"`
	Node                   string            `json:"node"`
	GPUGroups              []string          `json:"gpuGroups"`
	SubGroup               string            `json:"subGroup"`
	RequiredGPUs           *int64            `json:"requiredGPUs"`
	Mig                    map[string]int    `json:"mig"`
	Priority               *int              `json:"priority"`
	NodeAffinity           []string          `json:"nodeAffinity"`
	PodLabels              map[string]string `json:"podLabels"`
	PodAffinityTopologyKey string            `json:"podAffinityTopologyKey"`
	PodAntiAffinityKey     string            `json:"podAntiAffinityTopologyKey"`
	LegacyMig              bool              `json:"legacyMig"`
	// PodRequest, when given, is the pod's whole request, written onto the pod as the production
	// cache would read it (container requests and the GPU-sharing annotations)
	PodRequest *PodRequest `json:"podRequest"`
	// OwnLabels, when given, are the pod's own labels where they differ from its affinity's selector
	// (PodLabels, which the fake builder also puts on the pod)
	OwnLabels map[string]string `json:"ownLabels"`
}

// PodRequest: a pod's request as a real pod carries it. CPU in cores, memory in bytes, GPUs whole
// (container request nvidia.com/gpu) or a fraction (the gpu-fraction annotation), GPU memory in MiB
// (the gpu-memory annotation), and the gpu-fraction-num-devices annotation for multi-device
// fractions. The reference's fake jobs cannot say this per task, turn a zero CPU or memory into 1
// CPU and 1G, and never write the number of devices onto the pod.
type PodRequest struct {
	CPU          float64 `json:"cpu"`
	Memory       float64 `json:"memory"`
	GPUs         float64 `json:"gpus"`
	GPUMemoryMiB int64   `json:"gpuMemoryMiB"`
	GPUDevices   int64   `json:"gpuDevices"`
}

type TopologyConstraintSpec struct {
	Topology       string `json:"topology"`
	RequiredLevel  string `json:"requiredLevel"`
	PreferredLevel string `json:"preferredLevel"`
}

type TopologySpec struct {
	Name   string   `json:"name"`
	Levels []string `json:"levels"` // node label keys, widest first
}

type SubGroupSpec struct {
	Name               string                  `json:"name"`
	Parent             string                  `json:"parent"`
	MinAvailable       *int32                  `json:"minAvailable"`
	TopologyConstraint *TopologyConstraintSpec `json:"topologyConstraint"`
}

type JobSpec struct {
	Name                string                  `json:"name"`
	Namespace           string                  `json:"namespace"`
	Queue               string                  `json:"queue"`
	Priority            int32                   `json:"priority"`
	Preemptible         *bool                   `json:"preemptible"`
	MinAvailable        int32                   `json:"minAvailable"`
	SubGroups           []SubGroupSpec          `json:"subGroups"`
	TopologyConstraint  *TopologyConstraintSpec `json:"topologyConstraint"`
	CreatedMinutesAgo   float64                 `json:"createdMinutesAgo"`
	StaleSeconds        *float64                `json:"staleSeconds"`
	LastStartMinutesAgo *float64                `json:"lastStartMinutesAgo"`
	Deleted             bool                    `json:"deleted"`
	GPUs                float64                 `json:"gpus"`
	GPUMemoryMiB        uint64                  `json:"gpuMemoryMiB"`
	GPUDevices          *uint64                 `json:"gpuDevices"`
	CPUMillis           float64                 `json:"cpuMillis"`
	MemoryBytes         float64                 `json:"memoryBytes"`
	Tasks               []*TaskSpec             `json:"tasks"`
}

type Params struct {
	MaxConsolidationPreemptees int     `json:"maxConsolidationPreemptees"` // Go's value (-1 unlimited)
	AllowConsolidatingReclaim  bool    `json:"allowConsolidatingReclaim"`
	UseSchedulingSignatures    bool    `json:"useSchedulingSignatures"`
	DetailedFitErrors          bool    `json:"detailedFitErrors"`
	StaleGracePeriodSeconds    float64 `json:"staleGracePeriodSeconds"`
}

type Scenario struct {
	Actions             []string       `json:"actions"`
	Cycles              int            `json:"cycles"`
	Params              Params         `json:"params"`
	Tiers               []conf.Tier    `json:"tiers"`
	QueueDepthPerAction map[string]int `json:"queueDepthPerAction"`
	Queues              []QueueSpec    `json:"queues"`
	Nodes               []NodeSpec     `json:"nodes"`
	Jobs                []*JobSpec     `json:"jobs"`
	Topologies          []TopologySpec `json:"topologies"`
}

// ---- output --------------------------------------------------------------------------------

type TaskOut struct {
	Job       string   `json:"job"`
	Name      string   `json:"name"`
	Status    string   `json:"status"`
	Node      string   `json:"node"`
	GPUGroups []string `json:"gpuGroups"`
}

type BindOut struct {
	Pod       string   `json:"pod"`
	Node      string   `json:"node"`
	GPUGroups []string `json:"gpuGroups"`
}

type CycleOut struct {
	Binds     []BindOut `json:"binds"`
	Evictions []string  `json:"evictions"`
	Pipelined []string  `json:"pipelined"`
}

type Result struct {
	Panic    string            `json:"panic,omitempty"`
	Tasks    []TaskOut         `json:"tasks"`
	PerCycle []CycleOut        `json:"perCycle"`
	FitErrs  map[string]string `json:"fitErrors"`
}

// ---- helpers -------------------------------------------------------------------------------

var statusByName = func() map[string]pod_status.PodStatus {
	m := map[string]pod_status.PodStatus{}
	for _, s := range []pod_status.PodStatus{pod_status.Pending, pod_status.Gated, pod_status.Allocated,
		pod_status.Pipelined, pod_status.Binding, pod_status.Bound, pod_status.Running, pod_status.Releasing,
		pod_status.Succeeded, pod_status.Failed, pod_status.Unknown, pod_status.Deleted} {
		m[s.String()] = s
	}
	return m
}()

func quotaOf(x Quant) (enginev2.QueueResource, enginev2.QueueResource, enginev2.QueueResource) {
	return enginev2.QueueResource{Quota: x.GPU}, enginev2.QueueResource{Quota: x.CPU}, enginev2.QueueResource{Quota: x.Memory}
}

func buildQueues(specs []QueueSpec, base time.Time) map[common_info.QueueID]*queue_info.QueueInfo {
	out := map[common_info.QueueID]*queue_info.QueueInfo{}
	for _, q := range specs {
		prio := q.Priority
		qr := &enginev2.QueueResources{
			GPU:    enginev2.QueueResource{Quota: q.Deserved.GPU, Limit: q.Limit.GPU, OverQuotaWeight: q.OverQuotaWeight.GPU},
			CPU:    enginev2.QueueResource{Quota: q.Deserved.CPU, Limit: q.Limit.CPU, OverQuotaWeight: q.OverQuotaWeight.CPU},
			Memory: enginev2.QueueResource{Quota: q.Deserved.Memory, Limit: q.Limit.Memory, OverQuotaWeight: q.OverQuotaWeight.Memory},
		}
		queue := enginev2.Queue{
			ObjectMeta: metav1.ObjectMeta{
				Name:              q.Name,
				UID:               types.UID(q.Name),
				CreationTimestamp: metav1.Time{Time: base.Add(time.Minute * time.Duration(q.CreationOrder))},
			},
			Spec: enginev2.QueueSpec{
				DisplayName: q.Name,
				ParentQueue: q.Parent,
				Priority:    &prio,
				Resources:   qr,
			},
		}
		if q.PreemptMinRuntimeSeconds != nil {
			queue.Spec.PreemptMinRuntime = &metav1.Duration{Duration: time.Duration(*q.PreemptMinRuntimeSeconds * float64(time.Second))}
		}
		if q.ReclaimMinRuntimeSeconds != nil {
			queue.Spec.ReclaimMinRuntime = &metav1.Duration{Duration: time.Duration(*q.ReclaimMinRuntimeSeconds * float64(time.Second))}
		}
		qi := queue_info.NewQueueInfo(&queue)
		out[qi.UID] = qi
	}
	cluster_info.UpdateQueueHierarchy(out)
	return out
}

func crConstraint(tc *TopologyConstraintSpec) *enginev2alpha2.TopologyConstraint {
	if tc == nil {
		return nil
	}
	return &enginev2alpha2.TopologyConstraint{
		Topology:               tc.Topology,
		RequiredTopologyLevel:  tc.RequiredLevel,
		PreferredTopologyLevel: tc.PreferredLevel,
	}
}

// podGroupSpec is the job's PodGroup spec as the production cache reads it: MinMember, the
// topology constraint and the subgroups (with theirs).
func podGroupSpec(j *JobSpec) enginev2alpha2.PodGroupSpec {
	spec := enginev2alpha2.PodGroupSpec{Queue: j.Queue, MinMember: j.MinAvailable}
	if tc := crConstraint(j.TopologyConstraint); tc != nil {
		spec.TopologyConstraint = *tc
	}
	for _, g := range j.SubGroups {
		sg := enginev2alpha2.SubGroup{Name: g.Name, TopologyConstraint: crConstraint(g.TopologyConstraint)}
		if g.MinAvailable != nil {
			sg.MinMember = *g.MinAvailable
		}
		if g.Parent != "" {
			p := g.Parent
			sg.Parent = &p
		}
		spec.SubGroups = append(spec.SubGroups, sg)
	}
	return spec
}

// specSubGroupOrder: HARNESS_SPEC_SUBGROUP_ORDER=1 builds the subgroup tree in the scenario's
// order (the harness's earlier builder); by default the production factory builds it
// (subgroup_info.FromPodGroup, which walks a map: children in Go map order).
func specSubGroupOrder() bool { return os.Getenv("HARNESS_SPEC_SUBGROUP_ORDER") == "1" }

func rootSubGroups(j *JobSpec) *subgroup_info.SubGroupSet {
	if !specSubGroupOrder() || j.TopologyConstraint != nil {
		pg := &enginev2alpha2.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: j.Namespace},
			Spec:       podGroupSpec(j),
		}
		root, err := subgroup_info.FromPodGroup(pg)
		if err != nil {
			panic(fmt.Sprintf("job %s: %v", j.Name, err))
		}
		if len(j.SubGroups) == 0 {
			// as PodGroupInfo.setSubGroups does for a podgroup without subgroups: the default pod
			// set (without a constraint of its own) under the root that carries the job's
			root.AddPodSet(subgroup_info.NewPodSet(podgroup_info.DefaultSubGroup, j.MinAvailable, nil))
		}
		return root
	}
	if len(j.SubGroups) == 0 {
		return jobs_fake.DefaultSubGroup(j.MinAvailable)
	}
	root := subgroup_info.NewSubGroupSet(subgroup_info.RootSubGroupSetName, nil)
	sets := map[string]*subgroup_info.SubGroupSet{"": root}
	for _, g := range j.SubGroups {
		if g.MinAvailable == nil {
			sets[g.Name] = subgroup_info.NewSubGroupSet(g.Name, nil)
		}
	}
	for _, g := range j.SubGroups {
		if g.TopologyConstraint != nil {
			panic("HARNESS_SPEC_SUBGROUP_ORDER=1 does not build subgroup topology constraints")
		}
		parent := sets[g.Parent]
		if parent == nil {
			panic(fmt.Sprintf("job %s: subgroup %s has unknown parent %s", j.Name, g.Name, g.Parent))
		}
		if g.MinAvailable == nil {
			parent.AddSubGroup(sets[g.Name])
		} else {
			parent.AddPodSet(subgroup_info.NewPodSet(g.Name, *g.MinAvailable, nil))
		}
	}
	return root
}

func testJobs(s *Scenario) []*jobs_fake.TestJobBasic {
	var out []*jobs_fake.TestJobBasic
	for _, j := range s.Jobs {
		tj := &jobs_fake.TestJobBasic{
			Name:                                j.Name,
			Namespace:                           j.Namespace,
			QueueName:                           j.Queue,
			Priority:                            j.Priority,
			RequiredGPUsPerTask:                 j.GPUs,
			RequiredGpuMemory:                   j.GPUMemoryMiB,
			RequiredCPUsPerTask:                 j.CPUMillis,
			RequiredMemoryPerTask:               j.MemoryBytes,
			RequiredMultiFractionDevicesPerTask: j.GPUDevices,
			RootSubGroupSet:                     rootSubGroups(j),
			JobAgeInMinutes:                     1, // overwritten below with the exact creation time
		}
		if j.Preemptible != nil {
			if *j.Preemptible {
				tj.Preemptibility = enginev2alpha2.Preemptible
			} else {
				tj.Preemptibility = enginev2alpha2.NonPreemptible
			}
		}
		for _, t := range j.Tasks {
			st, ok := statusByName[t.State]
			if !ok {
				panic("unknown state " + t.State)
			}
			tt := &tasks_fake.TestTaskBasic{
				State:                      st,
				NodeName:                   t.Node,
				GPUGroups:                  append([]string(nil), t.GPUGroups...),
				SubGroupName:               t.SubGroup,
				RequiredGPUs:               t.RequiredGPUs,
				Priority:                   t.Priority,
				NodeAffinityNames:          t.NodeAffinity,
				PodAffinityLabels:          t.PodLabels,
				PodAffinityTopologyKey:     t.PodAffinityTopologyKey,
				PodAntiAffinityTopologyKey: t.PodAntiAffinityKey,
				IsLegacyMigTask:            t.LegacyMig,
			}
			if len(t.Mig) > 0 {
				tt.RequiredMigInstances = map[v1.ResourceName]int{}
				for k, v := range t.Mig {
					tt.RequiredMigInstances[v1.ResourceName(k)] = v
				}
			}
			tj.Tasks = append(tj.Tasks, tt)
		}
		out = append(out, tj)
	}
	return out
}

func testNodes(s *Scenario) map[string]nodes_fake.TestNodeBasic {
	out := map[string]nodes_fake.TestNodeBasic{}
	for _, n := range s.Nodes {
		tn := nodes_fake.TestNodeBasic{
			GPUs:            n.GPUs,
			GPUMemory:       n.GPUMemoryMiB,
			CPUMillis:       n.CPUMillis,
			CPUMemory:       n.MemoryBytes,
			GpuMemorySynced: n.GPUMemorySynced,
			Labels:          n.Labels,
			MigStrategy:     node_info.MigStrategy(n.MigStrategy),
		}
		if n.MaxPods != nil && *n.MaxPods != 110 && !prodNodePods() {
			// the fixture's own maxPods path (HARNESS_NODE_PODS=0); see setNodePods for the default
			mp := *n.MaxPods
			tn.MaxTaskNum = &mp
		}
		if len(n.Mig) > 0 {
			tn.MigInstances = map[v1.ResourceName]int{}
			for k, v := range n.Mig {
				tn.MigInstances[v1.ResourceName(k)] = v
			}
		}
		out[n.Name] = tn
	}
	return out
}

// topologies are the Topology CRs (cluster-scoped), as the production snapshot lists them
// (cluster_info.snapshotTopologies); their levels are node label keys, widest first.
func topologies(s *Scenario) []*kaiv1alpha1.Topology {
	var out []*kaiv1alpha1.Topology
	for _, t := range s.Topologies {
		topo := &kaiv1alpha1.Topology{
			ObjectMeta: metav1.ObjectMeta{Name: t.Name, UID: types.UID(t.Name)},
		}
		for _, l := range t.Levels {
			topo.Spec.Levels = append(topo.Spec.Levels, kaiv1alpha1.TopologyLevel{NodeLabel: l})
		}
		out = append(out, topo)
	}
	return out
}

// applyPodRequest writes the request onto the task's pod and builds its PodInfo again from the pod
// (pod_info.NewTaskInfo, as the production cache does), in place: the job, its pod sets and the
// node map hold the same *PodInfo. The fields the fake job builder sets after NewTaskInfo are kept.
func applyPodRequest(ti *pod_info.PodInfo, r *PodRequest, vectorMap *resource_info.ResourceVectorMap) {
	pod := ti.Pod
	old := pod.Spec.Containers[0].Resources.Requests
	reqs := v1.ResourceList{v1.ResourcePods: resource.MustParse("1")}
	if r.CPU > 0 {
		reqs[v1.ResourceCPU] = resource.MustParse(strconv.FormatFloat(r.CPU, 'f', -1, 64))
	}
	if r.Memory > 0 {
		reqs[v1.ResourceMemory] = resource.MustParse(strconv.FormatFloat(r.Memory, 'f', -1, 64))
	}
	whole := r.GPUs >= 1 && r.GPUs == float64(int64(r.GPUs))
	fraction := r.GPUs > 0 && r.GPUs < 1
	if whole {
		reqs[resource_info.GPUResourceName] = resource.MustParse(strconv.FormatInt(int64(r.GPUs), 10))
	} else if r.GPUs != 0 && !fraction {
		panic(fmt.Sprintf("pod %s: gpus %v", pod.Name, r.GPUs))
	}
	mig := false
	for name, q := range old {
		if strings.HasPrefix(string(name), "nvidia.com/mig-") {
			reqs[name] = q
			mig = true
		}
	}
	pod.Spec.Containers[0].Resources.Requests = reqs
	delete(pod.Annotations, common_info.GPUFraction)
	delete(pod.Annotations, pod_info.GpuMemoryAnnotationName)
	delete(pod.Annotations, constants.GpuFractionsNumDevices)
	if fraction {
		pod.Annotations[common_info.GPUFraction] = strconv.FormatFloat(r.GPUs, 'f', -1, 64)
	}
	if r.GPUMemoryMiB > 0 {
		pod.Annotations[pod_info.GpuMemoryAnnotationName] = strconv.FormatInt(r.GPUMemoryMiB, 10)
	}
	if r.GPUDevices > 0 {
		pod.Annotations[constants.GpuFractionsNumDevices] = strconv.FormatInt(r.GPUDevices, 10)
	}
	if _, found := pod.Annotations[pod_info.ReceivedResourceTypeAnnotationName]; found {
		received := pod_info.ReceivedTypeRegular
		if fraction || r.GPUMemoryMiB > 0 {
			received = pod_info.ReceivedTypeFraction
		}
		if mig {
			received = pod_info.ReceivedTypeMigInstance
		}
		pod.Annotations[pod_info.ReceivedResourceTypeAnnotationName] = string(received)
	}
	vectorMap.AddResourceList(reqs)
	status, groups, subGroup, legacy := ti.Status, ti.GPUGroups, ti.SubGroupName, ti.IsLegacyMIGtask
	*ti = *pod_info.NewTaskInfo(pod, nil, vectorMap)
	ti.Status, ti.GPUGroups, ti.SubGroupName, ti.IsLegacyMIGtask = status, groups, subGroup, legacy
}

type recorder struct {
	cur *CycleOut
}

// cacheMock mirrors test_utils.GetTestCacheMock, recording binds, evictions and pipelines.
func cacheMock(controller *Controller, rec *recorder, clusterPodAffinityInfo *cache.K8sClusterPodAffinityInfo) *cache.MockCache {
	cm := cache.NewMockCache(controller)
	cm.EXPECT().Bind(Any(), Any(), Any()).AnyTimes().DoAndReturn(
		func(pi *pod_info.PodInfo, host string, _ map[string]string) error {
			rec.cur.Binds = append(rec.cur.Binds, BindOut{Pod: pi.Name, Node: host, GPUGroups: append([]string(nil), pi.GPUGroups...)})
			return nil
		})
	cm.EXPECT().Evict(Any(), Any(), Any(), Any()).AnyTimes().DoAndReturn(
		func(pod *v1.Pod, _ *podgroup_info.PodGroupInfo, _ eviction_info.EvictionMetadata, _ string) error {
			rec.cur.Evictions = append(rec.cur.Evictions, pod.Name)
			return nil
		})
	cm.EXPECT().TaskPipelined(Any(), Any()).AnyTimes().Do(
		func(pi *pod_info.PodInfo, _ string) {
			rec.cur.Pipelined = append(rec.cur.Pipelined, pi.Name)
		})
	cm.EXPECT().RecordJobStatusEvent(Any()).AnyTimes().Return(nil)

	fakeClient := fake.NewSimpleClientset()
	cm.EXPECT().KubeClient().AnyTimes().Return(fakeClient)
	informerFactory := informers.NewSharedInformerFactory(fakeClient, 0)
	informerFactory.Resource().V1().ResourceClaims().Informer()
	informerFactory.Resource().V1().ResourceSlices().Informer()
	informerFactory.Resource().V1().DeviceClasses().Informer()
	ctx := context.Background()
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	cm.EXPECT().KubeInformerFactory().AnyTimes().Return(informerFactory)
	cm.EXPECT().SnapshotSharedLister().AnyTimes().Return(clusterPodAffinityInfo)
	k8sPlugins := k8splugins.InitializeInternalPlugins(fakeClient, informerFactory, clusterPodAffinityInfo)
	cm.EXPECT().InternalK8sPlugins().AnyTimes().Return(k8sPlugins)

	helpersMock := k8s_utils.NewMockInterface(controller)
	k8s_utils.Helpers = helpersMock
	helpersMock.EXPECT().PatchPodAnnotationsAndLabelsInterface(Any(), Any(), Any(), Any()).Return(nil).AnyTimes()
	return cm
}

// Production-cache fidelity (all ON by default). HARNESS_TEST_FIXTURES=1 turns all three off
// (plain KAI test-fixture behaviour); each can also be turned off alone with its switch =0.
func envOff(name string) bool {
	return os.Getenv("HARNESS_TEST_FIXTURES") == "1" || os.Getenv(name) == "0"
}
func prodPodPriority() bool        { return !envOff("HARNESS_POD_PRIORITY") }
func prodAllocated() bool          { return !envOff("HARNESS_REAL_ALLOCATED") }
func prodSnapshotSignatures() bool { return !envOff("HARNESS_SNAP_SIG") }

// Scenario time (both ON by default, off with =0 or HARNESS_TEST_FIXTURES=1):
//   - HARNESS_NO_FAKE_START: a job without lastStartMinutesAgo has never started (LastStartTimestamp nil,
//     as a podgroup without the last-start annotation in production); jobs_fake stamps now-1min on every
//     job with allocated pods, which makes it min-runtime protected.
//   - HARNESS_SCENARIO_CLOCK: last-start and stale-since times are kept on the scenario clock (seconds,
//     0 at cycle 1, +1 s per cycle, as kaipolicy's simulate does) and mapped to wall time at each session
//     build relative to time.Now(); a time an action sets during the cycle (allocate's start,
//     stalegangeviction's stale stamp) is read back as that cycle's scenario time.
func noFakeStart() bool   { return !envOff("HARNESS_NO_FAKE_START") }
func scenarioClock() bool { return !envOff("HARNESS_SCENARIO_CLOCK") }

func prodNodePods() bool { return !envOff("HARNESS_NODE_PODS") }

// setNodePods gives a node with maxPods the pod slots production gives it (HARNESS_NODE_PODS, on
// by default). The fixture builds every node with allocatable pods 110 and lets NewNodeInfo and
// AddTask account its pods as production does: Idle = 110 - the pods that are not Pipelined,
// Releasing = Releasing pods - Pipelined pods (node_info.go addTaskResources). Its maxPods path
// (nodes_fake/nodes.go BuildNodesInfoMap, TestNodeBasic.MaxTaskNum) then overwrites Idle with
// maxPods - Used, and Used counts the Pipelined pods too, so each Pipelined pod is taken off
// twice (once from Releasing, once from Idle) and Idle is clamped at 0. In production the
// node's status.allocatable carries maxPods and NewNodeInfo (resource_info.go
// ResourceFromResourceList) starts Idle and Allocatable there, and each pod is taken off once.
// The accounting is plain addition, so the production node is the fixture's 110-pod node with
// Allocatable and Idle (scalar and vector) moved by maxPods - 110; the v1.Node's allocatable
// and capacity and MaxTaskNum (node_info.go NewNodeInfo) are set to maxPods as well.
func setNodePods(ni *node_info.NodeInfo, maxPods int, vectorMap *resource_info.ResourceVectorMap) {
	pods := v1.ResourcePods
	delta := float64(maxPods) - ni.Allocatable.Get(pods)
	set := func(r *resource_info.Resource, v float64) {
		if v == 0 {
			delete(r.ScalarResources(), pods)
		} else {
			r.ScalarResources()[pods] = int64(v)
		}
	}
	set(ni.Allocatable, ni.Allocatable.Get(pods)+delta)
	set(ni.Idle, ni.Idle.Get(pods)+delta)
	idx := vectorMap.GetIndex(string(pods))
	ni.AllocatableVector.Set(idx, ni.AllocatableVector.Get(idx)+delta)
	ni.IdleVector.Set(idx, ni.IdleVector.Get(idx)+delta)
	q := *resource.NewQuantity(int64(maxPods), resource.DecimalSI)
	ni.Node.Status.Allocatable[pods] = q
	ni.Node.Status.Capacity[pods] = q
	ni.MaxTaskNum = maxPods
}

type jobClock struct {
	lastStart *time.Time
	staleAt   *time.Time
	// scenario-clock seconds (HARNESS_SCENARIO_CLOCK)
	lastStartS *float64
	staleAtS   *float64
	// what buildSession set, to tell whether an action changed it
	setStart *time.Time
	setStale *time.Time
	built    time.Time
}

// scenarioSeconds reads a wall time an action set back onto the scenario clock: a time set during
// the cycle (time.Now() in an action, within a second of the session build) is the cycle's time.
func scenarioSeconds(ts time.Time, built time.Time, scnNow float64) *float64 {
	d := ts.Sub(built).Seconds()
	x := scnNow
	if d < -1 || d > 1 {
		x = scnNow + d
	}
	return &x
}

func buildSession(s *Scenario, controller *Controller, rec *recorder, clocks map[string]*jobClock, scnNow float64) *framework.Session {
	now := time.Now()
	wall := func(sec float64) *time.Time {
		t := now.Add(time.Duration((sec - scnNow) * float64(time.Second)))
		return &t
	}
	vectorMap := resource_info.NewResourceVectorMap()
	tjobs := testJobs(s)
	jobsInfoMap, tasksToNodeMap, _ := jobs_fake.BuildJobsAndTasksMaps(tjobs, vectorMap)
	for _, j := range s.Jobs {
		pgi := jobsInfoMap[common_info.PodGroupID(j.Name)]
		for i, t := range j.Tasks {
			if t.OwnLabels != nil {
				pod := pgi.GetAllPodsMap()[common_info.PodID(fmt.Sprintf("%s-%d", j.Name, i))].Pod
				for k := range t.PodLabels {
					delete(pod.Labels, k)
				}
				for k, v := range t.OwnLabels {
					pod.Labels[k] = v
				}
			}
			if t.PodRequest != nil {
				applyPodRequest(pgi.GetAllPodsMap()[common_info.PodID(fmt.Sprintf("%s-%d", j.Name, i))], t.PodRequest, vectorMap)
			}
		}
	}
	if prodPodPriority() {
		// As in a real cluster, every pod carries its job's (priority class's) priority; the
		// fixture's pods carry none, and the production signature hashes pod.Spec.Priority.
		for _, pgi := range jobsInfoMap {
			for _, t := range pgi.GetAllPodsMap() {
				pr := pgi.Priority
				t.Pod.Spec.Priority = &pr
			}
		}
	}
	if prodAllocated() {
		// As the production cache builds it: AddTaskInfo (api/podgroup_info/job_info.go) adds each
		// allocated-status pod's ResReq. The fixture counts only the first fractional pod per node.
		for _, pgi := range jobsInfoMap {
			alloc := resource_info.EmptyResource()
			for _, t := range pgi.GetAllPodsMap() {
				if pod_status.AllocatedStatus(t.Status) {
					alloc.AddResourceRequirements(t.ResReq)
				}
			}
			pgi.Allocated = alloc
			pgi.AllocatedVector = alloc.ToVector(vectorMap)
		}
	}
	for _, j := range s.Jobs {
		pgi := jobsInfoMap[common_info.PodGroupID(j.Name)]
		created := now.Add(-time.Duration(j.CreatedMinutesAgo * float64(time.Minute)))
		pgi.CreationTimestamp = metav1.Time{Time: created}
		pgi.PodGroup.CreationTimestamp = metav1.Time{Time: created}
		pgSpec := podGroupSpec(j) // the CR's spec, as the production cache holds it
		pgSpec.Queue = pgi.PodGroup.Spec.Queue
		pgi.PodGroup.Spec = pgSpec
		c := clocks[j.Name]
		pgi.StalenessInfo.TimeStamp = nil
		pgi.StalenessInfo.Stale = false
		if scenarioClock() {
			c.setStale, c.setStart, c.built = nil, nil, now
			if c.staleAtS != nil {
				c.setStale = wall(*c.staleAtS)
				t := *c.setStale
				pgi.StalenessInfo.TimeStamp = &t
				pgi.StalenessInfo.Stale = true
			}
			if c.lastStartS != nil {
				c.setStart = wall(*c.lastStartS)
				t := *c.setStart
				pgi.LastStartTimestamp = &t
			} else if noFakeStart() {
				pgi.LastStartTimestamp = nil
			}
			continue
		}
		if c.staleAt != nil {
			t := *c.staleAt
			pgi.StalenessInfo.TimeStamp = &t
			pgi.StalenessInfo.Stale = true
		}
		if c.lastStart != nil {
			t := *c.lastStart
			pgi.LastStartTimestamp = &t
		} else if noFakeStart() {
			pgi.LastStartTimestamp = nil
		}
	}
	clusterPodAffinityInfo := cache.NewK8sClusterPodAffinityInfo()
	nodesInfoMap := nodes_fake.BuildNodesInfoMap(testNodes(s), tasksToNodeMap, clusterPodAffinityInfo, vectorMap)
	for _, n := range s.Nodes {
		if n.MaxPods != nil && *n.MaxPods != 110 && prodNodePods() {
			setNodePods(nodesInfoMap[n.Name], *n.MaxPods, vectorMap)
		}
		if n.Unschedulable {
			nodesInfoMap[n.Name].Node.Spec.Unschedulable = true
		}
	}
	queues := buildQueues(s.Queues, now)

	tiers := s.Tiers
	if tiers == nil {
		tiers = test_utils.BuildPlugins(test_utils.TestTopologyBasic{})
	}
	ssn := &framework.Session{
		Config: &conf.SchedulerConfiguration{Tiers: tiers, QueueDepthPerAction: s.QueueDepthPerAction},
		ClusterInfo: &api.ClusterInfo{
			Nodes:             nodesInfoMap,
			Queues:            queues,
			PodGroupInfos:     jobsInfoMap,
			MinNodeGPUMemory:  node_info.DefaultGpuMemory,
			ResourceVectorMap: vectorMap,
			Topologies:        topologies(s),
		},
		SchedulerParams: conf.SchedulerParams{
			QueueLabelKey:           constants.DefaultQueueLabel,
			UseSchedulingSignatures: s.Params.UseSchedulingSignatures,
			DetailedFitErrors:       s.Params.DetailedFitErrors,
		},
	}
	ssn.OverrideMaxNumberConsolidationPreemptees(s.Params.MaxConsolidationPreemptees)
	ssn.OverrideAllowConsolidatingReclaim(s.Params.AllowConsolidatingReclaim)
	ssn.OverrideSchedulerName("kai-scheduler")
	ssn.OverrideGlobalDefaultStalenessGracePeriod(time.Duration(s.Params.StaleGracePeriodSeconds * float64(time.Second)))
	ssn.Cache = cacheMock(controller, rec, clusterPodAffinityInfo)
	if prodSnapshotSignatures() {
		// As the production snapshot (cache/cluster_info/cluster_info.go) does before the session
		// opens: every job's signature is computed once here and the job keeps it for the session.
		for _, pgi := range ssn.ClusterInfo.PodGroupInfos {
			_ = pgi.GetSchedulingConstraintsSignature()
		}
	}
	for _, tier := range tiers {
		for _, p := range tier.Plugins {
			pb, found := framework.GetPluginBuilder(p.Name)
			if !found {
				panic("unknown plugin " + p.Name)
			}
			pb(p.Arguments).OnSessionOpen(ssn)
		}
	}
	time.Sleep(time.Millisecond)
	return ssn
}

func actionByName(name string) framework.Action {
	switch name {
	case "allocate":
		return allocate.New()
	case "consolidation":
		return consolidation.New()
	case "reclaim":
		return reclaim.New()
	case "preempt":
		return preempt.New()
	case "stalegangeviction":
		return stalegangeviction.New()
	}
	panic("unknown action " + name)
}

// runAction runs one action; a panic in the reference's code is returned as its message and the
// innermost reference frame (the session is left as the panic left it).
func runAction(action framework.Action, ssn *framework.Session) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			stack := string(debug.Stack())
			where := ""
			for _, line := range strings.Split(stack, "\n") {
				if strings.Contains(line, "/pkg/scheduler/") && !strings.Contains(line, "zzharness") && where == "" &&
					strings.HasPrefix(strings.TrimSpace(line), "/") {
					where = strings.TrimSpace(line)
				}
			}
			msg = fmt.Sprintf("PANIC %v at %s", r, where)
		}
	}()
	action.Execute(ssn)
	return ""
}

func TestHarness(t *testing.T) {
	path := os.Getenv("HARNESS_INPUT")
	if path == "" {
		t.Skip("HARNESS_INPUT not set")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s Scenario
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	test_utils.InitTestingInfrastructure()
	controller := NewController(t)
	defer controller.Finish()

	now := time.Now()
	clocks := map[string]*jobClock{}
	for _, j := range s.Jobs {
		c := &jobClock{}
		if j.StaleSeconds != nil {
			x := now.Add(-time.Duration(*j.StaleSeconds * float64(time.Second)))
			c.staleAt = &x
			xs := -*j.StaleSeconds
			c.staleAtS = &xs
		}
		if j.LastStartMinutesAgo != nil {
			x := now.Add(-time.Duration(*j.LastStartMinutesAgo * float64(time.Minute)))
			c.lastStart = &x
			xs := -60 * *j.LastStartMinutesAgo
			c.lastStartS = &xs
		}
		clocks[j.Name] = c
	}

	res := Result{FitErrs: map[string]string{}}
	cycles := s.Cycles
	if cycles < 1 {
		cycles = 1
	}
	var ssn *framework.Session
	scnNow := 0.0
	for cycle := 0; cycle < cycles; cycle++ {
		scnNow = float64(cycle)
		rec := &recorder{cur: &CycleOut{Binds: []BindOut{}, Evictions: []string{}, Pipelined: []string{}}}
		ssn = buildSession(&s, controller, rec, clocks, scnNow)
		for _, a := range s.Actions {
			action := actionByName(a)
			if os.Getenv("HARNESS_TRACE") != "" {
				fmt.Fprintf(os.Stderr, "HARNESS_TRACE cycle %d action %s\n", cycle+1, a)
			}
			if msg := runAction(action, ssn); msg != "" {
				res.Panic = fmt.Sprintf("cycle %d action %s: %s", cycle+1, a, msg)
				break
			}
			if os.Getenv("HARNESS_NODES") != "" {
				// diagnostic: each node's GPU accounting after the action (the idle-GPU scenario filter's inputs)
				names := make([]string, 0, len(ssn.ClusterInfo.Nodes))
				for n := range ssn.ClusterInfo.Nodes {
					names = append(names, n)
				}
				sort.Strings(names)
				for _, n := range names {
					ni := ssn.ClusterInfo.Nodes[n]
					idle, _ := ni.GetSumOfIdleGPUs()
					rel, _ := ni.GetSumOfReleasingGPUs()
					fmt.Fprintf(os.Stderr, "HARNESS_NODES cycle %d after %s %s idleSum=%g releasingSum=%g idleWhole=%g releasingWhole=%g\n",
						cycle+1, a, n, idle, rel, ni.Idle.GPUs(), ni.Releasing.GPUs())
				}
			}
		}
		res.PerCycle = append(res.PerCycle, *rec.cur)
		if cycle == cycles-1 || res.Panic != "" {
			break
		}
		// settle, as integration_tests_utils.runSchedulerOneRound does
		for _, j := range s.Jobs {
			pgi := ssn.ClusterInfo.PodGroupInfos[common_info.PodGroupID(j.Name)]
			c := clocks[j.Name]
			if scenarioClock() {
				// an action that set a time set it to time.Now(): this cycle's scenario time
				if ts := pgi.LastStartTimestamp; ts != nil && (c.setStart == nil || !ts.Equal(*c.setStart)) {
					c.lastStartS = scenarioSeconds(*ts, c.built, scnNow)
				}
				if ts := pgi.StalenessInfo.TimeStamp; ts == nil {
					c.staleAtS = nil
				} else if c.setStale == nil || !ts.Equal(*c.setStale) {
					c.staleAtS = scenarioSeconds(*ts, c.built, scnNow)
				}
			}
			if pgi.LastStartTimestamp != nil {
				x := *pgi.LastStartTimestamp
				c.lastStart = &x
			}
			if pgi.StalenessInfo.TimeStamp != nil {
				x := *pgi.StalenessInfo.TimeStamp
				c.staleAt = &x
			} else {
				c.staleAt = nil
			}
			for i, ts := range j.Tasks {
				task := pgi.GetAllPodsMap()[common_info.PodID(fmt.Sprintf("%s-%d", j.Name, i))]
				switch task.Status {
				case pod_status.Releasing:
					if j.Deleted {
						ts.Node = task.NodeName
						ts.GPUGroups = append([]string(nil), task.GPUGroups...)
						ts.State = "Releasing"
					} else {
						ts.Node = ""
						ts.State = "Pending"
					}
				case pod_status.Pipelined:
					ts.Node = ""
					ts.State = "Pending"
				case pod_status.Binding:
					ts.State = "Running"
					ts.Node = task.NodeName
					ts.GPUGroups = append([]string(nil), task.GPUGroups...)
				default:
					ts.State = task.Status.String()
					ts.Node = task.NodeName
					ts.GPUGroups = append([]string(nil), task.GPUGroups...)
				}
			}
		}
	}
	for _, j := range s.Jobs {
		pgi := ssn.ClusterInfo.PodGroupInfos[common_info.PodGroupID(j.Name)]
		for i := range j.Tasks {
			name := fmt.Sprintf("%s-%d", j.Name, i)
			task := pgi.GetAllPodsMap()[common_info.PodID(name)]
			res.Tasks = append(res.Tasks, TaskOut{Job: j.Name, Name: name, Status: task.Status.String(),
				Node: task.NodeName, GPUGroups: append([]string{}, task.GPUGroups...)})
		}
		if len(pgi.JobFitErrors) > 0 {
			res.FitErrs[j.Name] = common_info.JobFitErrorsToDetailedMessage(pgi.JobFitErrors)
		}
	}
	out, _ := json.Marshal(res)
	fmt.Println("HARNESS_RESULT:" + string(out))
}
