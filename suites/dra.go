package suites

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/suites/framework"
)

// Gangs that claim fake GPUs through dynamic resource allocation (workload-features-v1.37 §5): each
// node publishes a ResourceSlice with one device per GPU, pods ask through ResourceClaims, and the
// scheduler allocates every member's claim in the gang's cycle (DRA is GA and on everywhere in
// v1.37). The lanes publish their own slices (LaneSpec.GPUAPI), so the suite runs on every cluster
// that serves resource.k8s.io/v1, whatever --gpu-api its own nodes use; its nodes publish no
// nvidia.com/gpu, so a claim is the only way to a GPU. Claims a PodGroup shares among its members
// (DRAWorkloadResourceClaims, beta, off by default) need `--features workload-claims`.

const (
	draRef = "workload-features §5"
	// draClaim is the name of every member's own GPU claim in its pod spec.
	draClaim = "gpus"
	// draOtherProduct is the product of a lane's second kind of node.
	draOtherProduct = "NVIDIA-A100-SXM4-80GB"
)

var draWorkloadGates = []string{"DRAWorkloadResourceClaims"}

func draFeatures() []framework.Feature {
	lane := func(nodes int) framework.LaneSpec {
		return framework.LaneSpec{Nodes: nodes, GPUsPerNode: 8, GPUAPI: fakegpu.APIDRA}
	}
	return []framework.Feature{
		{
			Suite: "dra", Name: "dra: a gang of claims binds whole", Lane: lane(4),
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "DRA-01", Statement: "on 4 nodes publishing 8 GPUs each in a ResourceSlice (and no nvidia.com/gpu), a gang of 4 members (minCount 4) each claiming 8 GPUs through a ResourceClaimTemplate binds whole within 60s; each member's claim is allocated 8 distinct devices of the driver from the pool of the node the member is bound to, and reserved for that member", Ref: draRef + ".3; §7 item 50"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						ms := draGang(ctx, t, l, "whole", 4, 4, 8)
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), ms...)
						nodes := map[string]string{}
						for _, m := range ms {
							pod, c := draMemberClaim(ctx, t, l, m)
							draCheckAllocated(t, pod, c, 8)
							if other, ok := nodes[pod.Spec.NodeName]; ok {
								t.Errorf("members %s and %s both bound to %s, which has 8 GPUs for their 16", other, m, pod.Spec.NodeName)
							}
							nodes[pod.Spec.NodeName] = m
						}
					}},
			},
		},
		draRejectedFeature(lane(2)),
		draPreemptionFeature(lane(2)),
		draProductFeature(),
		draUnhealthyFeature(lane(1)),
		draSharedClaimFeature(lane(2)),
		draGateFeature(lane(1)),
		draKubeletFeature(),
	}
}

// draKubeletFeature: on real kubelets (kind workers with --gpu-api dra or both) a container with a
// claim starts only once the kubelet had the driver prepare it (NodePrepareResources through the
// fake GPUs' kubelet plugin), so a running gang is the DRA path end to end.
func draKubeletFeature() framework.Feature {
	return framework.Feature{
		Suite: "dra", Name: "dra: a gang runs on real kubelets through the DRA plugin", Serial: true, NeedsKubelets: true,
		Lane: framework.LaneSpec{Nodes: 2, PluginNodes: true, GPUAPI: fakegpu.APIDRA},
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "DRA-11", Statement: "on 2 real kubelets whose fake GPUs go through the DRA kubelet plugin, a gang of 2 members (minCount 2) each claiming all of one node's GPUs binds whole, one member per node, and both containers start (Running and ready within 90s: the kubelet had the plugin prepare each claim); once the gang is deleted, its claims are gone within 60s (unprepared and deleted)", Ref: draRef + ".3 (kind nodes with real kubelets: NodePrepareResources before the container starts)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					ms := draGang(ctx, t, l, "real", 2, 2, int64(l.GPUs))
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), ms...)
					var claims []string
					for _, m := range ms {
						pod, c := draMemberClaim(ctx, t, l, m)
						draCheckAllocated(t, pod, c, l.GPUs)
						claims = append(claims, c.Name)
					}
					framework.Eventually(ctx, t, l.Env.Scaled(90*time.Second), fmt.Sprintf("pods %v running and ready", ms), func(ctx context.Context) (bool, string, error) {
						var states []string
						ok := true
						for _, m := range ms {
							p, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, m, metav1.GetOptions{})
							if err != nil {
								return false, "", err
							}
							ready := false
							for _, c := range p.Status.Conditions {
								ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
							}
							ok = ok && p.Status.Phase == corev1.PodRunning && ready
							states = append(states, fmt.Sprintf("%s %s ready=%v", m, p.Status.Phase, ready))
						}
						return ok, strings.Join(states, ", "), nil
					})
					for _, m := range ms {
						if err := l.Client.CoreV1().Pods(l.Name).Delete(ctx, m, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
							t.Fatalf("delete %s: %v", m, err)
						}
					}
					framework.Eventually(ctx, t, l.Env.Scaled(60*time.Second), fmt.Sprintf("claims %v gone", claims), func(ctx context.Context) (bool, string, error) {
						left := 0
						for _, name := range claims {
							_, err := l.Client.ResourceV1().ResourceClaims(l.Name).Get(ctx, name, metav1.GetOptions{})
							switch {
							case err == nil:
								left++
							case !apierrors.IsNotFound(err):
								return false, "", err
							}
						}
						return left == 0, fmt.Sprintf("%d of %d left", left, len(claims)), nil
					})
				}},
		},
	}
}

// draRejectedFeature: a gang of 3 × 8 GPUs on 2 nodes of 8, then a third node.
func draRejectedFeature(lane framework.LaneSpec) framework.Feature {
	var ms []string
	return framework.Feature{
		Suite: "dra", Name: "dra: a gang that does not fit allocates nothing", Lane: lane,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "DRA-02", Statement: "on 2 nodes of 8 GPUs, a gang of 3 members (minCount 3) each claiming 8 GPUs: every member gets FailedScheduling, none binds for 10s, and none of the 3 claims is allocated or reserved at any moment of that window (the two members that fit are never half-placed on the devices)", Ref: draRef + " (claims are written only in PreBind, after the gang's Permit; a rejected gang's in-memory allocations are released in Unreserve, dynamicresources.go:1585-1620)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					ms = draGang(ctx, t, l, "toobig", 3, 3, 8)
					for _, m := range ms {
						l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), m, "FailedScheduling")
					}
					framework.Consistently(ctx, t, l.Env.Scaled(bmHoldWindow), "no member bound and no claim allocated", func(ctx context.Context) (bool, string, error) {
						return draNothingHeld(ctx, l, ms)
					})
					l.Canary(ctx, t)
				}},
			{A: framework.Assertion{ID: "DRA-03", Statement: "a third node of 8 GPUs joins: the rejected gang binds whole within 60s, its 3 claims allocated on 3 different nodes", Ref: draRef + " (a new ResourceSlice requeues the gang; nothing of the rejected attempt stays allocated in the scheduler's view)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if len(ms) == 0 {
						t.Fatal("DRA-02 did not create the gang")
					}
					if _, err := l.AddNode(ctx); err != nil {
						t.Fatal(err)
					}
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), ms...)
					seen := map[string]bool{}
					for _, m := range ms {
						pod, c := draMemberClaim(ctx, t, l, m)
						draCheckAllocated(t, pod, c, 8)
						seen[pod.Spec.NodeName] = true
					}
					if len(seen) != 3 {
						t.Errorf("the gang's members are on %d nodes, want 3", len(seen))
					}
				}},
		},
	}
}

// draPreemptionFeature: a high-priority gang needs the devices of a bound low-priority one.
//
// v1.37.2's preemption cannot see devices that evicting a pod would free: DynamicResources has no
// PreFilterExtensions (dynamicresources.go:868-871), so the dry run keeps the victims' claims
// allocated and finds no victims ("cannot allocate all claims"). A scheduler that does preempt for
// devices is not wrong for it, so the step accepts either outcome and reports which; what it
// requires is what must hold both ways: never half a gang evicted, and the devices released with
// the victims and given to the waiting gang whole.
func draPreemptionFeature(lane framework.LaneSpec) framework.Feature {
	return framework.Feature{
		Suite: "dra", Name: "dra: the victims' devices go to the preemptor", Lane: lane,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "DRA-04", Statement: "on 2 nodes of 8 GPUs filled by a bound priority-100 gang of 2 members claiming 8 GPUs each, a priority-1000 gang of the same shape: for 15s either both victims stay bound or both go (preempted), never one; none of the preemptors binds while a victim holds its devices; once the victims are gone (preempted, or deleted after the window), their claims are released and the preemptor's 2 claims are allocated, within 60s, the 16 devices the victims' claims held", Ref: draRef + "; gang-semantics (workload-aware preemption); DynamicResources has no PreFilterExtensions (dynamicresources.go:868-871), so v1.37.2 does not preempt for devices"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					low := l.PriorityClass(ctx, t, "low", lowValue, false)
					high := l.PriorityClass(ctx, t, "high", highValue, false)
					victims := draGangOf(ctx, t, l, "victim", 2, 2, 8, low)
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), victims...)
					held := map[string]bool{}
					var victimClaims []string
					for _, m := range victims {
						pod, c := draMemberClaim(ctx, t, l, m)
						draCheckAllocated(t, pod, c, 8)
						for _, d := range draDevices(c) {
							held[d] = true
						}
						victimClaims = append(victimClaims, c.Name)
					}
					preemptors := draGangOf(ctx, t, l, "preemptor", 2, 2, 8, high)
					l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), preemptors[0], "FailedScheduling")
					// The window: count the victims still bound; a preemption deletes both at once,
					// so one alone for more than a few seconds is half a gang evicted.
					var oneSince time.Time
					framework.Consistently(ctx, t, l.Env.Scaled(15*time.Second), "both victims bound or both gone, no preemptor bound beside a victim", func(ctx context.Context) (bool, string, error) {
						pods, err := l.Pods(ctx)
						if err != nil {
							return false, "", err
						}
						bound := map[string]int{}
						for _, p := range pods {
							if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
								bound[strings.SplitN(p.Name, "-", 2)[0]]++
							}
						}
						state := fmt.Sprintf("bound: %d victims, %d preemptors", bound["victim"], bound["preemptor"])
						if bound["victim"] > 0 && bound["preemptor"] > 0 {
							return false, state, nil
						}
						if bound["victim"] == 1 {
							if oneSince.IsZero() {
								oneSince = time.Now()
							}
							return time.Since(oneSince) < 5*time.Second, state, nil
						}
						oneSince = time.Time{}
						return true, state, nil
					})
					pods, err := l.Pods(ctx)
					if err != nil {
						t.Fatal(err)
					}
					left := 0
					for _, p := range pods {
						if strings.HasPrefix(p.Name, "victim-") && p.DeletionTimestamp == nil {
							left++
						}
					}
					if left > 0 {
						t.Logf("the scheduler did not preempt the victims for their devices in 15s (as v1.37.2, whose preemption does not simulate freeing devices); deleting them")
						for _, m := range victims {
							if err := l.Client.CoreV1().Pods(l.Name).Delete(ctx, m, metav1.DeleteOptions{}); err != nil {
								t.Fatalf("delete victim %s: %v", m, err)
							}
						}
					} else {
						t.Logf("the scheduler preempted both victims for their devices")
					}
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), preemptors...)
					for _, m := range preemptors {
						pod, c := draMemberClaim(ctx, t, l, m)
						draCheckAllocated(t, pod, c, 8)
						for _, d := range draDevices(c) {
							if !held[d] {
								t.Errorf("preemptor %s was allocated %s, which no victim held (the lane has only the victims' 16 devices)", m, d)
							}
						}
					}
					for _, name := range victimClaims {
						c, err := l.Client.ResourceV1().ResourceClaims(l.Name).Get(ctx, name, metav1.GetOptions{})
						if err == nil && c.Status.Allocation != nil && len(c.Status.ReservedFor) > 0 {
							t.Errorf("victim claim %s is still allocated and reserved for %v after its pod went", name, c.Status.ReservedFor)
						}
					}
				}},
		},
	}
}

// draProductFeature: GPUs of one product, chosen by a CEL selector on the device attribute.
func draProductFeature() framework.Feature {
	sel := fmt.Sprintf("device.attributes[%q].%s == %q", fakegpu.DRADriver, fakegpu.AttrProduct, draOtherProduct)
	return framework.Feature{
		Suite: "dra", Name: "dra: a CEL selector picks the product",
		Lane: framework.LaneSpec{Nodes: 2, GPUsPerNode: 8, GPUAPI: fakegpu.APIDRA, Products: []string{fakegpu.DefaultProduct, draOtherProduct}},
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "DRA-05", Statement: fmt.Sprintf("one node of 8 %s and one of 8 %s: a gang of 2 × 4 GPUs whose claims select productName %s binds whole, both members on the %s node with devices of that product; a second such gang (8 more %s GPUs, none left) stays unbound for 10s with FailedScheduling although the other node's 8 GPUs are free", fakegpu.DefaultProduct, draOtherProduct, draOtherProduct, draOtherProduct, draOtherProduct), Ref: draRef + ".3 (CEL selectors on device attributes)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					req := scenarios.GPURequest(4, sel)
					tmpl := draTemplate(ctx, t, l, "a100x4", req)
					first := draGangWith(ctx, t, l, "first", 2, 2, tmpl, "")
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), first...)
					want := l.Nodes[1]
					for _, m := range first {
						pod, c := draMemberClaim(ctx, t, l, m)
						draCheckAllocated(t, pod, c, 4)
						if pod.Spec.NodeName != want {
							t.Errorf("member %s bound to %s, want %s (the only %s node)", m, pod.Spec.NodeName, want, draOtherProduct)
						}
					}
					second := draGangWith(ctx, t, l, "second", 2, 2, tmpl, "")
					l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), second[0], "FailedScheduling")
					bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Unbound: second})
					l.Canary(ctx, t)
				}},
		},
	}
}

// draUnhealthyFeature: devices withdrawn from the slice are never allocated.
func draUnhealthyFeature(lane framework.LaneSpec) framework.Feature {
	return framework.Feature{
		Suite: "dra", Name: "dra: withdrawn devices are never allocated", Lane: lane, NeedsGPUs: true,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "DRA-06", Statement: "a node of 8 GPUs whose last 4 are marked unhealthy (withdrawn from its ResourceSlice): a gang of 2 × 4 GPUs stays unbound for 10s with FailedScheduling; a single member of 4 GPUs binds, allocated only devices still published (gpu-0 … gpu-3)", Ref: draRef + ".3 (the allocator sees only published devices)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					node := l.Nodes[0]
					if err := l.Env.Cluster.GPUs.SetUnhealthyGPUs(ctx, node, 4); err != nil {
						t.Fatalf("mark 4 GPUs of %s unhealthy: %v", node, err)
					}
					framework.Eventually(ctx, t, l.Env.Scaled(30*time.Second), "the slices of "+node+" to publish 4 devices", func(ctx context.Context) (bool, string, error) {
						n, err := framework.PublishedGPUs(ctx, l.Client, node)
						return n == 4, fmt.Sprintf("%d devices", n), err
					})
					pair := draGang(ctx, t, l, "pair", 2, 2, 4)
					l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), pair[0], "FailedScheduling")
					bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Unbound: pair})
					for _, m := range pair {
						if err := l.Client.CoreV1().Pods(l.Name).Delete(ctx, m, metav1.DeleteOptions{}); err != nil {
							t.Fatalf("delete %s: %v", m, err)
						}
					}
					single := draGang(ctx, t, l, "single", 1, 1, 4)
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), single...)
					pod, c := draMemberClaim(ctx, t, l, single[0])
					draCheckAllocated(t, pod, c, 4)
					for _, d := range draDevices(c) {
						if _, dev, _ := strings.Cut(d, "/"); !slices.Contains([]string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}, dev) {
							t.Errorf("claim %s was allocated %s, a device withdrawn from the slice", c.Name, d)
						}
					}
				}},
		},
	}
}

// draSharedClaimFeature: a PodGroup's own claim, shared by its members.
func draSharedClaimFeature(lane framework.LaneSpec) framework.Feature {
	const group = "shared"
	var claimName string
	return framework.Feature{
		Suite: "dra", Name: "dra: a PodGroup's claim is shared by its members", Lane: lane, NeedsGates: draWorkloadGates,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "DRA-07", Statement: "a PodGroup with resourceClaims [{name: shared, resourceClaimTemplateName: t}] gets exactly one ResourceClaim within 30s, controlled by the PodGroup, annotated resource.kubernetes.io/pod-claim-name: shared, and named in the PodGroup's status.resourceClaimStatuses [{name: shared, resourceClaimName: <it>}]", Ref: draRef + ".2 (resource-claim-controller, resourceclaim/controller.go:1203-1355); §7 item 47"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					tmpl := draTemplate(ctx, t, l, "one-gpu", scenarios.GPURequest(1))
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: group, MinCount: 2, Claims: []scenarios.Claim{{Name: "shared", Template: tmpl}}})
					framework.Eventually(ctx, t, l.Env.Scaled(30*time.Second), "PodGroup "+group+"'s claim and its status", func(ctx context.Context) (bool, string, error) {
						pg, err := l.PodGroup(ctx, group)
						if err != nil {
							return false, "", err
						}
						if len(pg.Spec.ResourceClaims) == 0 {
							return false, "", fmt.Errorf("the apiserver dropped PodGroup %s's spec.resourceClaims (DRAWorkloadResourceClaims off on the apiserver?)", group)
						}
						owned, err := draClaimsOwnedBy(ctx, l, "PodGroup", group)
						if err != nil {
							return false, "", err
						}
						st := pg.Status.ResourceClaimStatuses
						state := fmt.Sprintf("claims owned by the PodGroup %v, status.resourceClaimStatuses %v", claimNames(owned), st)
						if len(owned) != 1 || len(st) != 1 {
							return false, state, nil
						}
						c := owned[0]
						if c.Annotations["resource.kubernetes.io/pod-claim-name"] != "shared" {
							return false, "", fmt.Errorf("claim %s is annotated pod-claim-name %q, want shared", c.Name, c.Annotations["resource.kubernetes.io/pod-claim-name"])
						}
						if st[0].Name != "shared" || st[0].ResourceClaimName == nil || *st[0].ResourceClaimName != c.Name {
							return false, state, nil
						}
						claimName = c.Name
						return true, state, nil
					})
				}},
			{A: framework.Assertion{ID: "DRA-08", Statement: "its 2 members, each with the claim shared (same name and template) and 3 GPUs of their own, bind within 60s; the shared claim is allocated once, and its status.reservedFor holds exactly one entry: {scheduling.k8s.io, podgroups, shared}, not the members", Ref: draRef + ".2 (one reservation for the group, dynamicresources.go:514-535; integration \"Claim should stay reserved only for the PodGroup\"); §7 item 48"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if claimName == "" {
						t.Fatal("DRA-07 found no group claim")
					}
					own := draTemplate(ctx, t, l, "three-gpus", scenarios.GPURequest(3))
					ms := framework.Members(group, 2, 0)
					for i := range ms {
						ms[i].Claims = []scenarios.Claim{{Name: "shared", Template: "one-gpu"}, {Name: draClaim, Template: own}}
					}
					l.CreatePods(ctx, t, ms...)
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), names(ms)...)
					var last string
					framework.Eventually(ctx, t, l.Env.Scaled(30*time.Second), "claim "+claimName+" reserved for the PodGroup alone", func(ctx context.Context) (bool, string, error) {
						c, err := l.Client.ResourceV1().ResourceClaims(l.Name).Get(ctx, claimName, metav1.GetOptions{})
						if err != nil {
							return false, "", err
						}
						last = fmt.Sprintf("allocation %v, reservedFor %v", c.Status.Allocation != nil, c.Status.ReservedFor)
						return c.Status.Allocation != nil && len(c.Status.ReservedFor) > 0, last, nil
					})
					c, err := l.Client.ResourceV1().ResourceClaims(l.Name).Get(ctx, claimName, metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					r := c.Status.ReservedFor
					if len(r) != 1 || r[0].APIGroup != "scheduling.k8s.io" || r[0].Resource != "podgroups" || r[0].Name != group {
						t.Errorf("claim %s is reserved for %v, want exactly [{scheduling.k8s.io podgroups %s}]", claimName, r, group)
					}
				}},
			{A: framework.Assertion{ID: "DRA-09", Statement: "the group's claim is on one node's slice, so both members are on that node; a second group of the same kind whose members need 4 GPUs each (1 + 4 + 4 > the 7 left on any node with the claim) stays unbound for 10s with FailedScheduling although the other node has 8 free: members are confined to where their group's claim is available", Ref: draRef + ".2 (an allocated claim carries its slice's node selector); §7 item 49"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					pods, err := l.Pods(ctx)
					if err != nil {
						t.Fatal(err)
					}
					nodes := map[string]bool{}
					for _, p := range pods {
						if strings.HasPrefix(p.Name, group+"-") {
							nodes[p.Spec.NodeName] = true
						}
					}
					if len(nodes) != 1 {
						t.Errorf("group %s's members are on nodes %v, want one (its claim's devices are on one node)", group, nodes)
					}
					four := draTemplate(ctx, t, l, "four-gpus", scenarios.GPURequest(4))
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "confined", MinCount: 2, Claims: []scenarios.Claim{{Name: "shared", Template: "one-gpu"}}})
					ms := framework.Members("confined", 2, 0)
					for i := range ms {
						ms[i].Claims = []scenarios.Claim{{Name: "shared", Template: "one-gpu"}, {Name: draClaim, Template: four}}
					}
					l.CreatePods(ctx, t, ms...)
					l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), ms[0].Name, "FailedScheduling")
					bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Unbound: names(ms)})
					l.Canary(ctx, t)
				}},
		},
	}
}

// draGateFeature runs whatever the gate, as ppolGateFeature does: the default cluster checks the
// drop, a --features workload-claims cluster that the field persists and is immutable.
func draGateFeature(lane framework.LaneSpec) framework.Feature {
	return framework.Feature{
		Suite: "dra", Name: "dra: a PodGroup's claims follow the apiserver's gate", Lane: lane,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "DRA-10", Statement: "with DRAWorkloadResourceClaims off on the apiserver (its kubernetes_feature_enabled metric), a PodGroup created with spec.resourceClaims reads back without them; with it on, they persist and a change to them is refused as immutable", Ref: draRef + ".1 (podgroup/strategy.go:187-218); §7 item 46"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					on := l.APIServerGate(ctx, t, draWorkloadGates[0])
					pg := l.CreatePodGroup(ctx, t, scenarios.Group{Name: "claims", MinCount: 1, Claims: []scenarios.Claim{{Name: "shared", Template: "t"}}})
					if !on {
						if len(pg.Spec.ResourceClaims) != 0 {
							t.Errorf("gate off: PodGroup claims reads back spec.resourceClaims %v, want the field dropped", pg.Spec.ResourceClaims)
						}
						return
					}
					if len(pg.Spec.ResourceClaims) != 1 {
						t.Fatalf("gate on: PodGroup claims reads back spec.resourceClaims %v, want the one it was created with", pg.Spec.ResourceClaims)
					}
					patch := []byte(`{"spec":{"resourceClaims":[{"name":"shared","resourceClaimTemplateName":"other"}]}}`)
					if _, err := l.Gang.PodGroups(l.Name).Patch(ctx, "claims", types.MergePatchType, patch, metav1.PatchOptions{}); err == nil || !strings.Contains(err.Error(), "immutable") {
						t.Errorf("gate on: changing PodGroup claims' spec.resourceClaims: %v, want refused as immutable", err)
					}
				}},
		},
	}
}

// draTemplate creates a ResourceClaimTemplate in the lane and returns its name.
func draTemplate(ctx context.Context, t *testing.T, l *framework.Lane, name string, req resourcev1.DeviceRequest) string {
	t.Helper()
	if _, err := l.Client.ResourceV1().ResourceClaimTemplates(l.Name).Create(ctx, scenarios.ClaimTemplate(l.Name, name, req), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ResourceClaimTemplate %s/%s: %v", l.Name, name, err)
	}
	return name
}

// draGang creates a gang of n members, each claiming gpus GPUs from a template of its own.
func draGang(ctx context.Context, t *testing.T, l *framework.Lane, name string, minCount int32, n int, gpus int64) []string {
	t.Helper()
	return draGangOf(ctx, t, l, name, minCount, n, gpus, "")
}

// draGangOf is draGang with a PriorityClass (none when class is empty).
func draGangOf(ctx context.Context, t *testing.T, l *framework.Lane, name string, minCount int32, n int, gpus int64, class string) []string {
	t.Helper()
	tmpl := draTemplate(ctx, t, l, fmt.Sprintf("%s-%dgpus", name, gpus), scenarios.GPURequest(gpus))
	return draGangWith(ctx, t, l, name, minCount, n, tmpl, class)
}

// draGangWith creates the PodGroup and n members, each with its own claim from template tmpl.
func draGangWith(ctx context.Context, t *testing.T, l *framework.Lane, name string, minCount int32, n int, tmpl, class string) []string {
	t.Helper()
	l.CreatePodGroup(ctx, t, scenarios.Group{Name: name, MinCount: minCount, PriorityClassName: class})
	ms := framework.Members(name, n, 0)
	for i := range ms {
		ms[i].Claims = []scenarios.Claim{{Name: draClaim, Template: tmpl}}
		ms[i].PriorityClassName = class
	}
	l.CreatePods(ctx, t, ms...)
	return names(ms)
}

// draMemberClaim returns a bound member and the claim generated for its own GPU claim (the pod's
// status.resourceClaimStatuses names it).
func draMemberClaim(ctx context.Context, t *testing.T, l *framework.Lane, member string) (*corev1.Pod, *resourcev1.ResourceClaim) {
	t.Helper()
	var pod *corev1.Pod
	var claim *resourcev1.ResourceClaim
	framework.Eventually(ctx, t, l.Env.Scaled(30*time.Second), "the claim of "+member+" allocated", func(ctx context.Context) (bool, string, error) {
		p, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, member, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		pod = p
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.Name != draClaim || s.ResourceClaimName == nil {
				continue
			}
			c, err := l.Client.ResourceV1().ResourceClaims(l.Name).Get(ctx, *s.ResourceClaimName, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			claim = c
			return c.Status.Allocation != nil, fmt.Sprintf("claim %s allocated: %v", c.Name, c.Status.Allocation != nil), nil
		}
		return false, fmt.Sprintf("pod status names no claim %q: %v", draClaim, p.Status.ResourceClaimStatuses), nil
	})
	return pod, claim
}

// draCheckAllocated checks that c holds n distinct devices of the fake driver from the pool of the
// node pod is bound to (pools are named after their node), and is reserved for pod.
func draCheckAllocated(t *testing.T, pod *corev1.Pod, c *resourcev1.ResourceClaim, n int) {
	t.Helper()
	if c.Status.Allocation == nil {
		t.Errorf("claim %s of %s is not allocated", c.Name, pod.Name)
		return
	}
	res := c.Status.Allocation.Devices.Results
	seen := map[string]bool{}
	for _, r := range res {
		if r.Driver != fakegpu.DRADriver || r.Pool != pod.Spec.NodeName {
			t.Errorf("claim %s of %s (bound to %s) holds %s/%s/%s, want driver %s, pool %s", c.Name, pod.Name, pod.Spec.NodeName, r.Driver, r.Pool, r.Device, fakegpu.DRADriver, pod.Spec.NodeName)
		}
		seen[r.Pool+"/"+r.Device] = true
	}
	if len(res) != n || len(seen) != n {
		t.Errorf("claim %s of %s holds %d results (%d distinct devices), want %d", c.Name, pod.Name, len(res), len(seen), n)
	}
	reserved := false
	for _, r := range c.Status.ReservedFor {
		reserved = reserved || r.UID == pod.UID
	}
	if !reserved {
		t.Errorf("claim %s is reserved for %v, not for its pod %s", c.Name, c.Status.ReservedFor, pod.Name)
	}
}

// draDevices lists the devices allocated to c, each as pool/device, sorted.
func draDevices(c *resourcev1.ResourceClaim) []string {
	if c.Status.Allocation == nil {
		return nil
	}
	var out []string
	for _, r := range c.Status.Allocation.Devices.Results {
		out = append(out, r.Pool+"/"+r.Device)
	}
	sort.Strings(out)
	return out
}

// draNothingHeld reports whether none of the members is bound and no claim in the lane is
// allocated or reserved.
func draNothingHeld(ctx context.Context, l *framework.Lane, members []string) (bool, string, error) {
	pods, err := l.Pods(ctx)
	if err != nil {
		return false, "", err
	}
	for _, p := range pods {
		if slices.Contains(members, p.Name) && p.Spec.NodeName != "" {
			return false, fmt.Sprintf("pod %s was bound to %s", p.Name, p.Spec.NodeName), nil
		}
	}
	claims, err := l.Client.ResourceV1().ResourceClaims(l.Name).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, "", err
	}
	for _, c := range claims.Items {
		if c.Status.Allocation != nil || len(c.Status.ReservedFor) > 0 {
			return false, fmt.Sprintf("claim %s is allocated (%v) and reserved for %v", c.Name, draDevices(&c), c.Status.ReservedFor), nil
		}
	}
	return true, fmt.Sprintf("%d claims, none allocated", len(claims.Items)), nil
}

// draClaimsOwnedBy lists the lane's claims whose controller is the named object of kind.
func draClaimsOwnedBy(ctx context.Context, l *framework.Lane, kind, name string) ([]resourcev1.ResourceClaim, error) {
	claims, err := l.Client.ResourceV1().ResourceClaims(l.Name).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []resourcev1.ResourceClaim
	for _, c := range claims.Items {
		if o := metav1.GetControllerOf(&c); o != nil && o.Kind == kind && o.Name == name {
			out = append(out, c)
		}
	}
	return out, nil
}

func claimNames(cs []resourcev1.ResourceClaim) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}
