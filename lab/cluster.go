package lab

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/internal/poll"
	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/scenarios/gangapi"
)

// The lab's namespaces.
const (
	nsBasic   = "native-basic"
	nsGang    = "native-gang"
	nsElastic = "native-elastic"
)

// gpuResource is what the lab's pods ask for.
const gpuResource = corev1.ResourceName("nvidia.com/gpu")

// runner holds a run's clients and options.
type runner struct {
	cs   kubernetes.Interface
	gang *gangapi.Client
	o    Options
	// dra: the pods claim DRA GPUs (Options.GPUAPI is dra), see dra.go.
	dra bool
}

// podState is what the lab reads of a pod: where it is and whether the scheduler gave up on it.
type podState struct {
	Name, Group, Phase, Node string
	// Unschedulable: PodScheduled=False with reason Unschedulable (the scheduler looked and
	// could not place it).
	Unschedulable bool
	// GPUs is the nvidia.com/gpu the pod's containers ask for (0 when they claim DRA GPUs).
	GPUs int64
}

func (p podState) bound() bool   { return p.Node != "" }
func (p podState) decided() bool { return p.bound() || p.Unschedulable }

// snapshot is a namespace's pods and PodGroups at one moment.
type snapshot struct {
	Pods   []podState
	Groups []schedv1beta1.PodGroup
	// WorkerGPUs is the GPUs the pods on the lab's worker hold (describe node's requests and
	// limits, which are equal: the pods set limits only; with DRA GPUs, the devices allocated from
	// the worker's pool).
	WorkerGPUs int64
}

func (s snapshot) bound(group string) int {
	n := 0
	for _, p := range s.Pods {
		if p.Group == group && p.bound() {
			n++
		}
	}
	return n
}

func (s snapshot) pending(group string) int {
	n := 0
	for _, p := range s.Pods {
		if p.Group == group && !p.bound() {
			n++
		}
	}
	return n
}

func (s snapshot) group(name string) *schedv1beta1.PodGroup {
	for i := range s.Groups {
		if s.Groups[i].Name == name {
			return &s.Groups[i]
		}
	}
	return nil
}

func (s snapshot) String() string {
	var b strings.Builder
	for _, p := range s.Pods {
		fmt.Fprintf(&b, "%s=%s@%s ", p.Name, p.Phase, orNone(p.Node))
	}
	fmt.Fprintf(&b, "worker GPUs %d", s.WorkerGPUs)
	return b.String()
}

// condition returns the PodGroupInitiallyScheduled condition of g, or nil.
func condition(g *schedv1beta1.PodGroup) *metav1.Condition {
	if g == nil {
		return nil
	}
	for i := range g.Status.Conditions {
		if g.Status.Conditions[i].Type == conditionType {
			return &g.Status.Conditions[i]
		}
	}
	return nil
}

// conditionType is the PodGroup condition v1.37 writes (the lab's v1alpha2 named it
// PodGroupScheduled).
const conditionType = "PodGroupInitiallyScheduled"

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// observe reads ns's pods and PodGroups and the GPUs in use on the worker.
func (r *runner) observe(ctx context.Context, ns string) (snapshot, error) {
	var s snapshot
	pods, err := r.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, fmt.Errorf("list pods in %s: %w", ns, err)
	}
	for _, p := range pods.Items {
		ps := podState{Name: p.Name, Phase: string(p.Status.Phase), Node: p.Spec.NodeName}
		if p.Spec.SchedulingGroup != nil && p.Spec.SchedulingGroup.PodGroupName != nil {
			ps.Group = *p.Spec.SchedulingGroup.PodGroupName
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				ps.Unschedulable = true
			}
		}
		ps.GPUs = podGPUs(&p)
		s.Pods = append(s.Pods, ps)
	}
	slices.SortFunc(s.Pods, func(a, b podState) int { return strings.Compare(a.Name, b.Name) })
	groups, err := r.gang.PodGroups(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, fmt.Errorf("list PodGroups in %s: %w", ns, err)
	}
	s.Groups = groups.Items
	slices.SortFunc(s.Groups, func(a, b schedv1beta1.PodGroup) int { return strings.Compare(a.Name, b.Name) })
	if s.WorkerGPUs, err = r.workerGPUs(ctx); err != nil {
		return s, err
	}
	return s, nil
}

func podGPUs(p *corev1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		n += c.Resources.Limits.Name(gpuResource, "").Value()
	}
	return n
}

// workerGPUs sums the GPU limits of the non-terminated pods on the worker, as `kubectl describe
// node` does for its "Allocated resources"; with DRA GPUs it counts the devices allocated from the
// worker's pool instead (the pods ask for no nvidia.com/gpu).
func (r *runner) workerGPUs(ctx context.Context) (int64, error) {
	if r.dra {
		return r.workerClaimedGPUs(ctx)
	}
	pods, err := r.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + r.o.Worker})
	if err != nil {
		return 0, fmt.Errorf("list pods on %s: %w", r.o.Worker, err)
	}
	var n int64
	for _, p := range pods.Items {
		// The field selector is checked again: not every client (a fake one) applies it.
		if p.Spec.NodeName != r.o.Worker || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		n += podGPUs(&p)
	}
	return n, nil
}

// poll calls cond every 200 ms until it holds or the run's timeout passes; the error says what was
// awaited and what was last seen.
func (r *runner) poll(ctx context.Context, what string, cond poll.Cond) error {
	return poll.Until(ctx, what, 200*time.Millisecond, r.o.Timeout, cond)
}

// apply creates a manifest's objects in order, as `kubectl apply -f` does, printing kubectl's
// lines. In a basic manifest each pod is created once the scheduler has decided on the one before:
// the lab's kubectl sends one request per object, and its scheduler placed each pod before the next
// arrived; a client as fast as this one would hand the scheduler several pods in one cycle, and
// the 2+2 split of the control run would then depend on timing rather than on the policy.
func (r *runner) apply(ctx context.Context, file string, onePodAtATime bool) (string, error) {
	b, err := Manifest(file, r.o.Image)
	if err != nil {
		return "", err
	}
	objs, err := Decode(file, b)
	if err != nil {
		return "", err
	}
	if r.dra {
		if objs, err = withDRAGPUs(file, objs); err != nil {
			return "", err
		}
		r.say("$ kubectl apply -f ~/native-gang-lab/%s   # with DRA GPUs: each nvidia.com/gpu: N is a claim from ResourceClaimTemplate gpu-N (DeviceClass %s)", file, fakegpu.DeviceClassName)
	} else {
		r.say("$ kubectl apply -f ~/native-gang-lab/%s", file)
	}
	var ns string
	for _, obj := range objs {
		line, err := r.create(ctx, obj)
		if err != nil {
			return "", fmt.Errorf("%s: %w", file, err)
		}
		r.say("%s", line)
		switch o := obj.(type) {
		case *corev1.Namespace:
			ns = o.Name
		case *corev1.Pod:
			if onePodAtATime {
				if err := r.waitDecided(ctx, o.Namespace, o.Name); err != nil {
					return "", err
				}
			}
		}
	}
	r.say("")
	return ns, nil
}

// create creates one object and returns kubectl's line for it.
func (r *runner) create(ctx context.Context, obj runtime.Object) (string, error) {
	switch o := obj.(type) {
	case *corev1.Namespace:
		// Marked as gangbench's, so `gangbench cluster delete` cleanup finds what a kept lab left.
		if o.Labels == nil {
			o.Labels = map[string]string{}
		}
		o.Labels[scenarios.ManagedLabel] = "true"
		if _, err := r.cs.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{}); err != nil {
			return "", fmt.Errorf("create namespace %s: %w", o.Name, err)
		}
		return "namespace/" + o.Name + " created", nil
	case *schedv1beta1.PodGroup:
		if _, err := r.gang.PodGroups(o.Namespace).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			return "", fmt.Errorf("create PodGroup %s/%s: %w", o.Namespace, o.Name, err)
		}
		return "podgroup.scheduling.k8s.io/" + o.Name + " created", nil
	case *corev1.Pod:
		if _, err := r.cs.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			return "", fmt.Errorf("create pod %s/%s: %w", o.Namespace, o.Name, err)
		}
		return "pod/" + o.Name + " created", nil
	case *resourcev1.ResourceClaimTemplate:
		if _, err := r.cs.ResourceV1().ResourceClaimTemplates(o.Namespace).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			return "", fmt.Errorf("create ResourceClaimTemplate %s/%s: %w", o.Namespace, o.Name, err)
		}
		return "resourceclaimtemplate.resource.k8s.io/" + o.Name + " created", nil
	}
	return "", fmt.Errorf("unexpected object %T", obj)
}

// waitDecided waits until the scheduler bound the named pods or marked them unschedulable (all of
// ns's pods when none are named).
func (r *runner) waitDecided(ctx context.Context, ns string, names ...string) error {
	return r.poll(ctx, fmt.Sprintf("the scheduler to decide on the pods of %s %v", ns, names), func(ctx context.Context) (bool, string, error) {
		s, err := r.observe(ctx, ns)
		if err != nil {
			return false, "", err
		}
		seen := 0
		for _, p := range s.Pods {
			if len(names) > 0 && !slices.Contains(names, p.Name) {
				continue
			}
			seen++
			if !p.decided() {
				return false, s.String(), nil
			}
		}
		return seen > 0 && (len(names) == 0 || seen == len(names)), s.String(), nil
	})
}

// waitRunning waits until every bound pod of ns runs (on kind a real container starts; kwok marks
// it Running), as the lab's tables show them.
func (r *runner) waitRunning(ctx context.Context, ns string) (snapshot, error) {
	var s snapshot
	err := r.poll(ctx, "the bound pods of "+ns+" to run", func(ctx context.Context) (bool, string, error) {
		var err error
		if s, err = r.observe(ctx, ns); err != nil {
			return false, "", err
		}
		for _, p := range s.Pods {
			if p.bound() && p.Phase != string(corev1.PodRunning) {
				return false, s.String(), nil
			}
		}
		return true, s.String(), nil
	})
	return s, err
}

// deleteNamespaces deletes the namespaces and waits until they are gone and the worker's GPUs are
// back to 0, which the lab checks between runs.
func (r *runner) deleteNamespaces(ctx context.Context, names ...string) error {
	for _, ns := range names {
		err := r.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete namespace %s: %w", ns, err)
		}
	}
	return r.poll(ctx, fmt.Sprintf("namespaces %v to be gone and %s's GPUs free", names, r.o.Worker), func(ctx context.Context) (bool, string, error) {
		var left []string
		for _, ns := range names {
			_, err := r.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			switch {
			case err == nil:
				left = append(left, ns)
			case !apierrors.IsNotFound(err):
				return false, "", err
			}
		}
		gpus, err := r.workerGPUs(ctx)
		if err != nil {
			return false, "", err
		}
		return len(left) == 0 && gpus == 0, fmt.Sprintf("namespaces left %v, %d GPUs in use on %s", left, gpus, r.o.Worker), nil
	})
}

// describeCluster prints the nodes as the scheduler sees them: the lab's messages count them.
func (r *runner) describeCluster(ctx context.Context) error {
	nodes, err := r.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	if r.dra {
		// Without the DeviceClass the claims could never be allocated, and every verdict would
		// differ for a reason that is not the scheduler's.
		if _, err := r.cs.ResourceV1().DeviceClasses().Get(ctx, fakegpu.DeviceClassName, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("the lab's DRA GPUs need DeviceClass %s: %w", fakegpu.DeviceClassName, err)
		}
	}
	// Where the GPUs are (also) DRA devices, each node's are shown next to its nvidia.com/gpu.
	sliceColumn := r.o.GPUAPI.DRA()
	var sliced map[string]int
	if sliceColumn {
		if sliced, err = r.slicedGPUs(ctx); err != nil {
			return err
		}
	}
	r.say("cluster: %s, %d nodes", r.o.Here, len(nodes.Items))
	found := false
	for _, n := range nodes.Items {
		var taints []string
		for _, t := range n.Spec.Taints {
			taints = append(taints, t.Key+":"+string(t.Effect))
		}
		gpu := n.Status.Allocatable.Name(gpuResource, "")
		if sliceColumn {
			r.say("  %-28s nvidia.com/gpu %-3s DRA devices (%s) %-3d taints %v", n.Name, gpu.String(), fakegpu.DRADriver, sliced[n.Name], taints)
		} else {
			r.say("  %-28s nvidia.com/gpu %-3s taints %v", n.Name, gpu.String(), taints)
		}
		found = found || n.Name == r.o.Worker
	}
	r.say("")
	if !found {
		return fmt.Errorf("the lab's GPU worker %q is not a node of the cluster", r.o.Worker)
	}
	return nil
}
