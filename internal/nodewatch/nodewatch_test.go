package nodewatch

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
)

func node(name string, lbl map[string]string, zone string) *corev1.Node {
	l := map[string]string{"zone": zone}
	maps.Copy(l, lbl)
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

func zoneOf(n *corev1.Node) string { return n.Labels["zone"] }

func TestUntilJudgesOnlyMatchingNodes(t *testing.T) {
	cs := fake.NewClientset(
		node("a", map[string]string{"pool": "gpu"}, "1"),
		node("b", map[string]string{"pool": "gpu"}, "2"),
		node("c", map[string]string{"pool": "cpu"}, "3"),
	)
	sel := labels.SelectorFromSet(labels.Set{"pool": "gpu"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := Until(ctx, cs, sel, zoneOf, func(v map[string]string) bool { return len(v) == 2 })
	if err != nil {
		t.Fatalf("Until: %v", err)
	}
	if want := map[string]string{"a": "1", "b": "2"}; !maps.Equal(got, want) {
		t.Errorf("verdicts = %v, want %v (node c does not match the selector)", got, want)
	}
}

func TestUntilFollowsTheWatch(t *testing.T) {
	cs := fake.NewClientset(node("a", nil, "waiting"), node("b", nil, "waiting"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		verdicts map[string]string
		err      error
	}
	done := make(chan result, 1)
	go func() {
		v, err := Until(ctx, cs, labels.Everything(), zoneOf, func(v map[string]string) bool {
			// Done when b is gone and a turned ready; c must be seen too.
			_, hasB := v["b"]
			return !hasB && v["a"] == "ready" && v["c"] == "ready"
		})
		done <- result{v, err}
	}()
	nodes := cs.CoreV1().Nodes()
	if err := nodes.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.Create(ctx, node("c", nil, "ready"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.Update(ctx, node("a", nil, "ready"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("Until: %v (last verdicts %v)", r.err, r.verdicts)
	}
	if want := map[string]string{"a": "ready", "c": "ready"}; !maps.Equal(r.verdicts, want) {
		t.Errorf("verdicts = %v, want %v", r.verdicts, want)
	}
}

func TestUntilTimeoutKeepsTheLastVerdicts(t *testing.T) {
	cs := fake.NewClientset(node("a", nil, "1"))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	got, err := Until(ctx, cs, labels.Everything(), zoneOf, func(map[string]string) bool { return false })
	if err == nil {
		t.Fatal("Until returned nil although the condition never held")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("ctx.Err() = %v, want DeadlineExceeded (callers tell a timeout by it)", ctx.Err())
	}
	if want := map[string]string{"a": "1"}; !maps.Equal(got, want) {
		t.Errorf("verdicts = %v, want %v", got, want)
	}
}

func TestLeasesWatchesKubeNodeLease(t *testing.T) {
	holder := "kwok"
	lease := func(ns, name string, held bool) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if held {
			l.Spec.HolderIdentity = &holder
		}
		return l
	}
	cs := fake.NewClientset(
		lease(corev1.NamespaceNodeLease, "a", false),
		lease("kube-system", "kube-scheduler", true), // not a node's Lease
	)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	isHeld := func(l *coordinationv1.Lease) bool { return l.Spec.HolderIdentity != nil }
	done := make(chan map[string]bool, 1)
	errs := make(chan error, 1)
	go func() {
		v, err := Leases(ctx, cs, isHeld, func(v map[string]bool) bool { return v["a"] && v["b"] })
		errs <- err
		done <- v
	}()
	leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	if _, err := leases.Update(ctx, lease(corev1.NamespaceNodeLease, "a", true), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Create(ctx, lease(corev1.NamespaceNodeLease, "b", true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err != nil {
		t.Fatalf("Leases: %v", err)
	}
	if got, want := <-done, map[string]bool{"a": true, "b": true}; !maps.Equal(got, want) {
		t.Errorf("verdicts = %v, want %v (only kube-node-lease counts)", got, want)
	}
}
