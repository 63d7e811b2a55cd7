package kwok

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// WaitSchedulable waits until want nodes matching selector are Ready and carry no NoSchedule or
// NoExecute taint. A fresh node is tainted not-ready by the node lifecycle controller; measuring
// before the taint is gone makes the first gang cycles fail for a reason that has nothing to do with
// the scheduler (seen: 60 unschedulable PodGroup attempts in a 100-gang smoke run started right
// after create). The controller re-evaluates that taint only when the node object changes, and a
// kwok node whose Ready status it saw late is not updated again for minutes (seen: 93 of 500 nodes
// still tainted 110 s after create). So after staleAfter, the harness removes the not-ready taint
// from nodes that are Ready, as the controller would, and says so in the run's notes.
func WaitSchedulable(ctx context.Context, cs kubernetes.Interface, selector string, want int, timeout, staleAfter time.Duration, note func(string, ...any), tolerated ...string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	cleared := false
	for {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: "0"})
		ok, example := 0, ""
		var stale []string
		if err == nil {
			for i := range list.Items {
				n := &list.Items[i]
				switch why := unschedulable(n, tolerated); {
				case why == "":
					ok++
				case why == "taint "+corev1.TaintNodeNotReady && ReadyNode(n):
					stale = append(stale, n.Name)
					fallthrough
				default:
					if example == "" {
						example = n.Name + ": " + why
					}
				}
			}
			if ok >= want {
				return nil
			}
		}
		if len(stale) > 0 && time.Since(start) >= staleAfter {
			if err := clearNotReadyTaint(ctx, cs, stale); err != nil {
				return err
			}
		}
		if len(stale) > 0 && time.Since(start) >= staleAfter && !cleared && note != nil {
			cleared = true
			note("%d of %d Ready nodes still carried the %s taint %s after the cluster was ready; the harness removed it (the node lifecycle controller had not re-evaluated them)",
				len(stale), want, corev1.TaintNodeNotReady, staleAfter)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d nodes schedulable after %s (e.g. %s; last error %v): %w",
				ok, want, time.Since(start).Round(time.Second), example, err, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// clearNotReadyTaint removes the not-ready NoSchedule taint from the named nodes.
func clearNotReadyTaint(ctx context.Context, cs kubernetes.Interface, names []string) error {
	for _, name := range names {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !ReadyNode(n) {
				return nil // the node went away from Ready: the taint is right after all
			}
			kept := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool {
				return t.Key == corev1.TaintNodeNotReady && t.Effect == corev1.TaintEffectNoSchedule
			})
			if len(kept) == len(n.Spec.Taints) {
				return nil
			}
			n.Spec.Taints = kept
			_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("remove stale %s taint from node %s: %w", corev1.TaintNodeNotReady, name, err)
		}
	}
	return nil
}

func ReadyNode(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// unschedulable says why pods cannot land on n, ignoring taints whose key is tolerated (the lanes'
// own taint, which their pods tolerate).
func unschedulable(n *corev1.Node, tolerated []string) string {
	if n.Spec.Unschedulable {
		return "cordoned"
	}
	for _, t := range n.Spec.Taints {
		if slices.Contains(tolerated, t.Key) {
			continue
		}
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return "taint " + t.Key
		}
	}
	if !ReadyNode(n) {
		return "not Ready"
	}
	return ""
}
