package measure

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/observe/timeline"
)

// TestClaimAllocationItem: the rate counts the measured phases' claims allocated in the window, by
// the phase of the pod that owns each claim, over the binding rate's window; a claim not allocated
// yet counts among the claims but not the allocations, and a claim of no known pod not at all.
func TestClaimAllocationItem(t *testing.T) {
	t0 := time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	seen := []ClaimSeen{
		{Claim: "a-0-gpus", Pod: "a-0", Seen: at(0.1), AllocatedAt: at(1)},
		{Claim: "a-1-gpus", Pod: "a-1", Seen: at(0.1), AllocatedAt: at(2)},
		{Claim: "a-2-gpus", Pod: "a-2", Seen: at(0.2), AllocatedAt: at(4)},
		{Claim: "a-3-gpus", Pod: "a-3", Seen: at(0.2)},                         // never allocated
		{Claim: "pre-0-gpus", Pod: "pre-0", Seen: at(-9), AllocatedAt: at(-8)}, // a prefill phase's
		{Claim: "handmade", Seen: at(0.3), AllocatedAt: at(1)},                 // no pod of the run
	}
	phases := map[string]string{"a-0": "gangs", "a-1": "gangs", "a-2": "gangs", "a-3": "gangs", "pre-0": "prefill"}
	it, withheld, unowned := ClaimAllocationItem(t0, seen, phases, []string{"gangs"})
	if it.Name != ItemClaimAllocationRate || it.Unit != UnitClaimsPerSecond {
		t.Errorf("item %s in %s", it.Name, it.Unit)
	}
	// 3 allocations over [t0, t0+4s].
	if d := it.Data; d["Count"] != 3 || d["Claims"] != 4 || !near(d["Average"], 0.75) || !near(d["DurationSeconds"], 4) {
		t.Errorf("data %v: want 3 of 4 claims allocated at 0.75/s over 4 s", d)
	}
	if unowned != 1 || !strings.Contains(withheld, "allocations over 4.0 s") {
		t.Errorf("unowned %d, withheld %q", unowned, withheld)
	}
	if got := PodPhases([]timeline.Event{{Kind: timeline.PodCreated, Pod: "p", Phase: "x"}, {Kind: timeline.PodGroupCreated, Group: "g", Phase: "x"}}); len(got) != 1 || got["p"] != "x" {
		t.Errorf("pod phases %v", got)
	}
}

// TestClaimAllocationWatch: the watch records each claim once, with its pod, the moment it is first
// seen allocated; later changes (its reservation, a deallocation) move nothing.
func TestClaimAllocationWatch(t *testing.T) {
	t0 := time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	now := t0
	m := newClaimAllocation(&Env{GPUAPI: clusters.GPUAPIDRA}).(*claimAllocation)
	m.clock = func() time.Time { return now }
	claim := func(allocated bool) *resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "g-0-gpus-x", Namespace: "ns",
			OwnerReferences: []metav1.OwnerReference{{Kind: "Pod", Name: "g-0", Controller: ptr.To(true)}}}}
		if allocated {
			c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{Driver: fakegpu.DRADriver, Device: "gpu-0"}}}}
		}
		return c
	}
	m.observe(claim(false))
	now = t0.Add(time.Second)
	m.observe(claim(true))
	now = t0.Add(2 * time.Second)
	m.observe(claim(true))
	m.observe(claim(false))
	s := m.claims["g-0-gpus-x"]
	if s == nil || s.Pod != "g-0" || !s.Seen.Equal(t0) || !s.AllocatedAt.Equal(t0.Add(time.Second)) {
		t.Errorf("seen %+v: want pod g-0, seen at 0 s, allocated at 1 s", s)
	}
	// The informer keeps a slim copy that still says whether the claim is allocated.
	slim, err := slimClaim(claim(true))
	if err != nil {
		t.Fatal(err)
	}
	if c := slim.(*resourcev1.ResourceClaim); c.Status.Allocation == nil || ownerPod(c) != "g-0" || len(c.Status.Allocation.Devices.Results) != 0 {
		t.Errorf("slim claim %+v", c)
	}
	if ownerPod(&resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "Pod", Name: "x"}}}}) != "" {
		t.Error("an owner that is not the controller is not the claim's pod")
	}
}

// TestClaimAllocationMeasurement: on a fake cluster, claims allocated before Start are seen by the
// initial list and gathered against the timeline's pods; without DRA nothing is watched or
// reported.
func TestClaimAllocationMeasurement(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alloc := &resourcev1.AllocationResult{}
	cs := fake.NewClientset(
		&resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "g-0-gpus", Namespace: "ns", OwnerReferences: []metav1.OwnerReference{{Kind: "Pod", Name: "g-0", Controller: ptr.To(true)}}},
			Status: resourcev1.ResourceClaimStatus{Allocation: alloc}},
		&resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "g-1-gpus", Namespace: "ns", OwnerReferences: []metav1.OwnerReference{{Kind: "Pod", Name: "g-1", Controller: ptr.To(true)}}}},
		&resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "elsewhere"}, Status: resourcev1.ResourceClaimStatus{Allocation: alloc}},
	)
	t0 := time.Now()
	tl := timeline.NewTimeline(nil)
	tl.Add(timeline.Event{Time: t0, Kind: timeline.PodCreated, Phase: "gangs", Group: "g", Pod: "g-0"})
	tl.Add(timeline.Event{Time: t0, Kind: timeline.PodCreated, Phase: "gangs", Group: "g", Pod: "g-1"})
	var notes []string
	env := &Env{Client: cs, Namespace: "ns", Timeline: tl, Measured: []string{"gangs"}, GPUAPI: clusters.GPUAPIDRA,
		Note: func(f string, a ...any) { notes = append(notes, f) }}
	m := newClaimAllocation(env).(*claimAllocation)
	// Start reads the clock first (the window's earliest start), the watch's sightings after.
	calls := 0
	m.clock = func() time.Time {
		calls++
		if calls == 1 {
			return t0
		}
		return t0.Add(time.Second)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	items, err := m.Gather(ctx)
	if err != nil {
		t.Fatal(err)
	}
	it := item(t, items, ItemClaimAllocationRate)
	if it.Data["Count"] != 1 || it.Data["Claims"] != 2 || !near(it.Data["Average"], 1) {
		t.Errorf("data %v: want 1 of the namespace's 2 claims allocated, 1 s after the first create", it.Data)
	}
	if len(notes) != 2 || !strings.Contains(notes[1], "not allocated by the end") {
		t.Errorf("notes %q", notes)
	}
	// Pods that claim nothing (CPU-only phases on a DRA cluster) give no item, not a rate of 0.
	m = newClaimAllocation(&Env{Client: fake.NewClientset(), Namespace: "ns", Timeline: tl, Measured: []string{"gangs"}, GPUAPI: clusters.GPUAPIDRA}).(*claimAllocation)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if items, err := m.Gather(ctx); err != nil || items != nil {
		t.Errorf("no claims: items %v, err %v", items, err)
	}
	// The device plugin's cluster: no claims to watch (the Env has no client, so a watch opened anyway
	// would panic).
	m = newClaimAllocation(&Env{Timeline: tl, GPUAPI: clusters.GPUAPIDevicePlugin}).(*claimAllocation)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if items, err := m.Gather(ctx); err != nil || items != nil {
		t.Errorf("without DRA: items %v, err %v", items, err)
	}
}

// TestDRAFit: on DRA nodes the fit check counts the devices the slices publish and the pods' claims
// take or ask for. Without that, pods that request no nvidia.com/gpu would all look fitting.
func TestDRAFit(t *testing.T) {
	slice := func(node string, devices int, gen int64) resourcev1.ResourceSlice {
		return *fakegpu.ResourceSlice(node, fakegpu.Inventory{Count: devices}, fakegpu.SliceOptions{Generation: gen})
	}
	got := SliceDevices([]resourcev1.ResourceSlice{slice("n1", 8, 1), slice("n2", 8, 1), slice("n2", 5, 2), {Spec: resourcev1.ResourceSliceSpec{Driver: "other", NodeName: ptr.To("n1"), Devices: make([]resourcev1.Device, 3)}}}, fakegpu.DRADriver)
	if len(got) != 2 || got["n1"] != 8 || got["n2"] != 5 {
		t.Errorf("slice devices %v: want n1 8, n2 5 (its newest generation), other drivers not counted", got)
	}
	ready := corev1.NodeStatus{Allocatable: nodeAlloc(0), Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	delete(ready.Allocatable, "nvidia.com/gpu")
	pod := func(name, group, node string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: corev1.PodSpec{NodeName: node, SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: &group},
				ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("gpus-4")}},
				Containers:     []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpus"}}}}}},
		}
		if node != "" {
			p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To(name + "-gpus")}}
		}
		return p
	}
	// a-0 on n1 holds an 8-device claim although its template asks 4: what it was allocated counts.
	results := make([]resourcev1.DeviceRequestAllocationResult, 8)
	for i := range results {
		results[i] = resourcev1.DeviceRequestAllocationResult{Driver: fakegpu.DRADriver, Pool: "n1", Device: fakegpu.DeviceName(i)}
	}
	held := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "a-0-gpus", Namespace: "ns"},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: results}}}}
	tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "gpus-4", Namespace: "ns"}}
	tmpl.Spec.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: fakegpu.DeviceClassName, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 4}}}
	t0 := time.Now()
	tl := timeline.NewTimeline(nil)
	tl.Add(timeline.Event{Time: t0, Kind: timeline.PodGroupCreated, Phase: "p", Group: "a", Policy: "gang", MinCount: 1})
	tl.Add(timeline.Event{Time: t0, Kind: timeline.PodGroupCreated, Phase: "p", Group: "b", Policy: "gang", MinCount: 2})
	for _, tc := range []struct {
		name    string
		n2      int
		api     clusters.GPUAPI
		fitting float64
	}{
		{"gang b's 2 × 4 devices fit in n2's 8", 8, clusters.GPUAPIDRA, 2},
		{"n2 publishes 4 (4 withdrawn): one member fits, the quorum of 2 does not", 4, clusters.GPUAPIDRA, 0},
		{"counted as the device plugin's, devices unseen: both look fitting anywhere", 4, clusters.GPUAPIDevicePlugin, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s1, s2 := slice("n1", 8, 1), slice("n2", tc.n2, 1)
			cs := fake.NewClientset(
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: ready},
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Status: ready},
				&s1, &s2, held, tmpl,
				pod("a-0", "a", "n1"), pod("b-0", "b", ""), pod("b-1", "b", ""),
			)
			m := newInvariants(&Env{Client: cs, Namespace: "ns", Timeline: tl, Measured: []string{"p"}, GPUAPI: tc.api}).(*invariants)
			rep, err := m.fit(context.Background(), tl.Events())
			if err != nil {
				t.Fatal(err)
			}
			if float64(rep.Fitting) != tc.fitting || rep.Pending != 2 {
				t.Errorf("%s; want %.0f of 2 fitting", rep, tc.fitting)
			}
		})
	}
	inv := DRAInventory{Claims: map[string]int64{"ns/a-0-gpus": 8}, Templates: map[string]int64{"ns/gpus-4": 4}}
	if d := inv.PodDevices(pod("a-0", "a", "n1")); d != 8 {
		t.Errorf("a bound pod's allocated claim: %d devices, want 8", d)
	}
	if d := inv.PodDevices(pod("b-0", "b", "")); d != 4 {
		t.Errorf("a pending pod whose claim is not made yet: %d devices, want its template's 4", d)
	}
}
