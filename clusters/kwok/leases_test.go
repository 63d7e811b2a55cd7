package kwok

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/internal/poll"
)

const oldKwok = "host_0b6c1a4e-old"

func leaseWorldNode(name string, sim bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if sim {
		n.Annotations = map[string]string{fakegpu.AnnotationKwokNode: fakegpu.AnnotationKwokNodeValue}
	}
	return n
}

var renewed = metav1.NewMicroTime(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))

func heldLease(name string, holder *string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: holder, LeaseDurationSeconds: new(int32(40)), RenewTime: &renewed},
	}
}

// leaseWorld: two simulated nodes held by the stopped kwok, one simulated node whose Lease nobody
// holds, a real kubelet's node (holder = its name), a real node held by something kwok-like (not
// ours to touch: not simulated), and a Lease whose node is gone.
func leaseWorld() []runtime.Object {
	return []runtime.Object{
		leaseWorldNode("sim-a", true), leaseWorldNode("sim-b", true), leaseWorldNode("sim-free", true),
		leaseWorldNode("real", false), leaseWorldNode("other", false),
		heldLease("sim-a", new(oldKwok)), heldLease("sim-b", new(oldKwok)), heldLease("sim-free", nil),
		heldLease("real", new("real")), heldLease("other", new(oldKwok)), heldLease("gone", new(oldKwok)),
	}
}

func TestReleaseNodeLeases(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(leaseWorld()...)
	rel, err := ReleaseNodeLeases(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rel.Names(), []string{"sim-a", "sim-b"}; !slices.Equal(got, want) {
		t.Fatalf("released %v, want %v", got, want)
	}
	if rel["sim-a"] != oldKwok {
		t.Errorf("released holder %q, want %q", rel["sim-a"], oldKwok)
	}
	for _, name := range []string{"sim-a", "sim-b"} {
		if _, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("lease %s: %v, want it deleted", name, err)
		}
	}
	want := map[string]*string{"sim-free": nil, "real": new("real"), "other": new(oldKwok), "gone": new(oldKwok)}
	for name, holder := range want {
		l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if (l.Spec.HolderIdentity == nil) != (holder == nil) || (holder != nil && *l.Spec.HolderIdentity != *holder) {
			t.Errorf("lease %s holder %v, want %v", name, l.Spec.HolderIdentity, holder)
		}
		if !l.Spec.RenewTime.Equal(&renewed) || *l.Spec.LeaseDurationSeconds != 40 {
			t.Errorf("lease %s renewTime %v duration %d changed", name, l.Spec.RenewTime, *l.Spec.LeaseDurationSeconds)
		}
	}
	// A second release finds nothing held: idempotent.
	rel2, err := ReleaseNodeLeases(ctx, cs)
	if err != nil || len(rel2) != 0 {
		t.Errorf("second release: %v %v", rel2, err)
	}
}

func TestNotRetaken(t *testing.T) {
	rel := ReleasedLeases{"a": oldKwok, "b": oldKwok, "c": oldKwok, "d": oldKwok, "e": oldKwok, "f": oldKwok}
	nodes := []corev1.Node{*leaseWorldNode("a", true), *leaseWorldNode("b", true), *leaseWorldNode("c", true), *leaseWorldNode("d", true), *leaseWorldNode("f", true)}
	leases := []coordinationv1.Lease{
		*heldLease("a", new("host_new")), // taken by the new process
		*heldLease("b", nil),             // not yet
		*heldLease("c", new(oldKwok)),    // still the old holder
		*heldLease("d", new("")),         // empty is nobody
		*heldLease("e", nil),             // its node is gone: nothing to take
		// f's Lease is gone (released, not created again yet)
	}
	if got, want := notRetaken(rel, nodes, leases), []string{"b", "c", "d", "f"}; !slices.Equal(got, want) {
		t.Errorf("notRetaken %v, want %v", got, want)
	}
}

func TestWaitNodeLeasesRetaken(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(leaseWorld()...)
	rel, err := ReleaseNodeLeases(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	err = WaitNodeLeasesRetaken(ctx, cs, rel, 300*time.Millisecond)
	var te *poll.TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("wait with nobody taking the leases: %v, want a timeout", err)
	}
	// The new kwok process takes them.
	go func() {
		time.Sleep(100 * time.Millisecond)
		for _, name := range rel.Names() {
			l := heldLease(name, new("host_new"))
			_, _ = cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, l, metav1.CreateOptions{})
		}
	}()
	if err := WaitNodeLeasesRetaken(ctx, cs, rel, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := WaitNodeLeasesRetaken(ctx, cs, nil, 0); err != nil {
		t.Errorf("nothing released: %v", err)
	}
}
