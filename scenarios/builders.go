// Package scenarios describes workloads and builds the API objects they consist of: PodGroups,
// Workloads, Pods and PriorityClasses in the scheduling.k8s.io/v1beta1 shape Kubernetes v1.37 serves.
// It reaches a cluster only through client-go interfaces.
package scenarios

import (
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/fakegpu"
)

// ManagedLabel marks every object gangbench creates, so cleanup deletes only what is ours. It is
// fakegpu.LabelManaged, which simulated nodes carry and clusters/existing deletes by.
const ManagedLabel = fakegpu.LabelManaged

// PauseImage is what every test pod runs (see fakegpu.PodImage).
const PauseImage = fakegpu.PodImage

// GPUResource is the default fake GPU resource.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// Group describes a PodGroup.
type Group struct {
	Name string
	// MinCount > 0 makes a gang with that quorum; 0 makes a basic group.
	MinCount int32
	// DisruptionAll selects disruptionMode {all: {}}; the API default is single.
	DisruptionAll     bool
	PriorityClassName string
	// Workload and Template set spec.workloadRef.
	Workload, Template string
	Labels             map[string]string
	// TopologyKey, when set, asks that every member land in one domain of that node label
	// (spec.schedulingConstraints.topology; TopologyAwareWorkloadScheduling).
	TopologyKey string
	// PreemptionPolicy, when set, is spec.preemptionPolicy (PodGroupPreemptionPolicy).
	PreemptionPolicy schedv1beta1.PreemptionPolicy
	// Parent, when set, is spec.parentCompositePodGroupName (CompositePodGroup); the API then
	// requires a workloadRef, so Workload must be set too.
	Parent string
	// Claims are spec.resourceClaims, claims the members share (DRAWorkloadResourceClaims).
	Claims []Claim
}

// PodGroup builds a v1beta1 PodGroup.
func PodGroup(namespace string, g Group) *schedv1beta1.PodGroup {
	pg := &schedv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: g.Name, Namespace: namespace, Labels: labels(g.Labels)},
		Spec: schedv1beta1.PodGroupSpec{
			SchedulingPolicy:  policy(g.MinCount),
			PriorityClassName: g.PriorityClassName,
		},
	}
	if g.DisruptionAll {
		pg.Spec.DisruptionMode = &schedv1beta1.DisruptionMode{All: &schedv1beta1.AllDisruptionMode{}}
	}
	if g.Workload != "" {
		pg.Spec.WorkloadRef = &schedv1beta1.WorkloadReference{WorkloadName: g.Workload, TemplateName: g.Template}
	}
	if g.Parent != "" {
		parent := g.Parent
		pg.Spec.ParentCompositePodGroupName = &parent
	}
	if g.PreemptionPolicy != "" {
		pp := g.PreemptionPolicy
		pg.Spec.PreemptionPolicy = &pp
	}
	if g.TopologyKey != "" {
		pg.Spec.SchedulingConstraints = &schedv1beta1.PodGroupSchedulingConstraints{Topology: []schedv1beta1.TopologyConstraint{{Key: g.TopologyKey}}}
	}
	for _, c := range g.Claims {
		pg.Spec.ResourceClaims = append(pg.Spec.ResourceClaims, c.podGroupClaim())
	}
	return pg
}

func policy(minCount int32) schedv1beta1.PodGroupSchedulingPolicy {
	if minCount > 0 {
		return schedv1beta1.PodGroupSchedulingPolicy{Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: minCount}}
	}
	return schedv1beta1.PodGroupSchedulingPolicy{Basic: &schedv1beta1.BasicSchedulingPolicy{}}
}

// Template describes one podGroupTemplate of a Workload.
type Template struct {
	Name              string
	MinCount          int32
	PriorityClassName string
}

// Workload builds a v1beta1 Workload with the given templates.
func Workload(namespace, name string, templates ...Template) *schedv1beta1.Workload {
	w := &schedv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels(nil)}}
	for _, t := range templates {
		w.Spec.PodGroupTemplates = append(w.Spec.PodGroupTemplates, schedv1beta1.PodGroupTemplate{
			Name: t.Name, SchedulingPolicy: policy(t.MinCount), PriorityClassName: t.PriorityClassName,
		})
	}
	return w
}

// Member describes a Pod.
type Member struct {
	Name string
	// Group is spec.schedulingGroup.podGroupName; empty makes a standalone pod.
	Group string
	// GPUs is the nvidia.com/gpu limit.
	GPUs              int64
	PriorityClassName string
	// SchedulerName empty means the default scheduler.
	SchedulerName string
	// Gated adds a scheduling gate named gangbench.dev/hold.
	Gated bool
	// NodeName pre-binds the pod (it bypasses the scheduler).
	NodeName string
	Labels   map[string]string
	// Claims are the pod's DRA claims (spec.resourceClaims), each used by its container. A claim
	// that matches one of its group's Claims (same name and source) is the group's shared claim.
	Claims []Claim
}

// HoldGate is the scheduling gate Member.Gated adds.
const HoldGate = "gangbench.dev/hold"

// Pod builds a Pod that asks for GPUs and joins its group.
func Pod(namespace string, m Member) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: namespace, Labels: labels(m.Labels)},
		Spec: corev1.PodSpec{
			RestartPolicy:     corev1.RestartPolicyNever,
			PriorityClassName: m.PriorityClassName,
			SchedulerName:     m.SchedulerName,
			NodeName:          m.NodeName,
			// Simulated pods never run a process; a zero grace period keeps deletes (and preemption)
			// from waiting 30 s for nothing.
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name:  "worker",
				Image: PauseImage,
			}},
		},
	}
	if m.GPUs > 0 {
		q := *resource.NewQuantity(m.GPUs, resource.DecimalSI)
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{GPUResource: q},
			Requests: corev1.ResourceList{GPUResource: q},
		}
	}
	for _, c := range m.Claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, c.podClaim())
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: c.Name})
	}
	if m.Group != "" {
		g := m.Group
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &g}
	}
	if m.Gated {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: HoldGate}}
	}
	return p
}

// PriorityClass builds a PriorityClass; never=true sets preemptionPolicy Never.
func PriorityClass(name string, value int32, never bool) *schedulingv1.PriorityClass {
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels(nil)}, Value: value}
	if never {
		p := corev1.PreemptNever
		pc.PreemptionPolicy = &p
	}
	return pc
}

func labels(extra map[string]string) map[string]string {
	l := map[string]string{ManagedLabel: "true"}
	for k, v := range extra {
		l[k] = v
	}
	return l
}
