package kwok

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/internal/nodewatch"
)

// maxListedNotReady bounds how many not-Ready nodes a timeout error names.
const maxListedNotReady = 5

// nodeState is what WaitNodesReady remembers of one node.
type nodeState struct {
	ready  bool
	reason string // why it is not ready, for the timeout message
}

// readiness judges a node. It is Ready when its Ready condition is True; a GPU node (GFD label
// nvidia.com/gpu.present=true, set by fakegpu) must also have allocatable GPUs, because a node that is
// Ready before its device plugin registered (kind) or with its capacity lost cannot take a gang.
// The GPU resource is any extended resource (a name with a domain outside kubernetes.io) with a
// positive allocatable quantity, so inventories with a custom ResourceName are judged alike.
func readiness(n *corev1.Node) nodeState {
	var cond *corev1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			cond = &n.Status.Conditions[i]
			break
		}
	}
	switch {
	case cond == nil:
		return nodeState{reason: "no Ready condition yet"}
	case cond.Status != corev1.ConditionTrue:
		reason := cond.Reason
		if reason == "" {
			reason = "no reason"
		}
		return nodeState{reason: fmt.Sprintf("Ready=%s (%s)", cond.Status, reason)}
	}
	// A node whose GPUs are only in a ResourceSlice has no extended resource to wait for.
	if n.Labels[fakegpu.LabelPresent] == "true" && fakegpu.API(n.Labels[fakegpu.LabelGPUAPI]).ExtendedResource() && !hasAllocatableGPU(n) {
		return nodeState{reason: "Ready but no allocatable GPU"}
	}
	return nodeState{ready: true}
}

func hasAllocatableGPU(n *corev1.Node) bool {
	for name, q := range n.Status.Allocatable {
		domain, _, found := strings.Cut(string(name), "/")
		if !found || domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io") {
			continue
		}
		if q.Sign() > 0 {
			return true
		}
	}
	return false
}

// WaitNodesReady waits until at least want nodes matching the label selector are up: Ready (see
// readiness for what counts; GPU nodes also need allocatable GPUs) and holding a node Lease renewed
// within its duration. The Lease is what says something runs the node: simulated nodes are created
// Ready, as a kubelet registers its node, and kwok (or the kubelet) then takes and renews the Lease,
// which is also what the node lifecycle controller judges nodes by. It lists and then watches nodes,
// then leases (no polling), so it returns as soon as the last one is up. On timeout or ctx end the
// error says how many of want were up and names up to five nodes with what they lack. want <= 0
// returns nil at once.
func WaitNodesReady(ctx context.Context, cs kubernetes.Interface, selector string, want int, timeout time.Duration) error {
	if want <= 0 {
		return nil
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return fmt.Errorf("kwok: wait for nodes: selector %q: %w", selector, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	states, err := nodewatch.Until(ctx, cs, sel, readiness, func(states map[string]nodeState) bool {
		ready := 0
		for _, s := range states {
			if s.ready {
				ready++
			}
		}
		return ready >= want
	})
	if err == nil {
		var ready []string
		for name, st := range states {
			if st.ready {
				ready = append(ready, name)
			}
		}
		return waitLeases(ctx, cs, ready, want, timeout)
	}
	if ctx.Err() == nil {
		// Not a timeout: a broken selector on the server side or similar.
		return fmt.Errorf("kwok: wait for nodes (%s): %w", describeSelector(selector), err)
	}
	return notReadyError(states, selector, want, timeout, ctx.Err())
}

func describeSelector(selector string) string {
	if selector == "" {
		return "all nodes"
	}
	return "selector " + selector
}

func notReadyError(states map[string]nodeState, selector string, want int, timeout time.Duration, cause error) error {
	ready := 0
	var notReady []string
	for _, name := range slices.Sorted(maps.Keys(states)) {
		if states[name].ready {
			ready++
		} else {
			notReady = append(notReady, name)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "kwok: %d of %d nodes Ready after %s (%s, %d nodes seen)",
		ready, want, timeout, describeSelector(selector), len(states))
	if len(states) == 0 {
		// Nothing listed at all: kwok cannot be the problem, the selector or the apiserver is.
		b.WriteString("; no matching node seen (wrong selector, nodes not created, or apiserver unreachable)")
	}
	if len(notReady) > 0 {
		b.WriteString("; not Ready: ")
		for i, name := range notReady[:min(len(notReady), maxListedNotReady)] {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s: %s", name, states[name].reason)
		}
		if extra := len(notReady) - maxListedNotReady; extra > 0 {
			fmt.Fprintf(&b, " and %d more", extra)
		}
	}
	return fmt.Errorf("%s: %w", b.String(), cause)
}

// leaseState judges a node's Lease at now: "" when it is held and renewed within its duration, else
// what is wrong, for the timeout message.
func leaseState(l *coordinationv1.Lease, now time.Time) string {
	switch {
	case l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "":
		return "Lease not held"
	case l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil:
		return "Lease never renewed"
	}
	age := now.Sub(l.Spec.RenewTime.Time)
	if d := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second; age > d {
		return fmt.Sprintf("Lease last renewed %s ago (duration %s)", age.Round(time.Second), d)
	}
	return ""
}

// waitLeases waits until at least want of the nodes hold a renewed Lease in kube-node-lease (a
// node's Lease has its name). ctx already carries the overall deadline of WaitNodesReady.
func waitLeases(ctx context.Context, cs kubernetes.Interface, nodes []string, want int, timeout time.Duration) error {
	// Each Lease's verdict is what it lacks ("" once it is held and renewed); a node without one
	// lacks a Lease.
	lacking := func(leases map[string]string, node string) string {
		if why, ok := leases[node]; ok {
			return why
		}
		return "no Lease"
	}
	leases, err := nodewatch.Leases(ctx, cs, func(l *coordinationv1.Lease) string {
		return leaseState(l, time.Now())
	}, func(leases map[string]string) bool {
		up := 0
		for _, n := range nodes {
			if lacking(leases, n) == "" {
				up++
			}
		}
		return up >= want
	})
	if err == nil {
		return nil
	}
	if ctx.Err() == nil {
		return fmt.Errorf("kwok: wait for node leases: %w", err)
	}
	byNode := make(map[string]string, len(nodes))
	for _, n := range nodes {
		byNode[n] = lacking(leases, n)
	}
	return noLeaseError(byNode, want, timeout, ctx.Err())
}

func noLeaseError(lacking map[string]string, want int, timeout time.Duration, cause error) error {
	var without []string
	for _, name := range slices.Sorted(maps.Keys(lacking)) {
		if lacking[name] != "" {
			without = append(without, name)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "kwok: %d of %d nodes Ready and holding a renewed Lease (%s) after %s; %d Ready nodes without one (is kwok running and managing them?): ",
		len(lacking)-len(without), want, corev1.NamespaceNodeLease, timeout, len(without))
	for i, name := range without[:min(len(without), maxListedNotReady)] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %s", name, lacking[name])
	}
	if extra := len(without) - maxListedNotReady; extra > 0 {
		fmt.Fprintf(&b, " and %d more", extra)
	}
	return fmt.Errorf("%s: %w", b.String(), cause)
}
