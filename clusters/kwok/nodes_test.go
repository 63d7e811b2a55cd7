package kwok

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gangbench/gangbench/fakegpu"
)

func TestNodeNames(t *testing.T) {
	tests := []struct {
		n         int
		first     string
		last      string
		wantCount int
	}{
		{n: 0},
		{n: -3},
		{n: 1, first: "gpu-node-0", last: "gpu-node-0", wantCount: 1},
		{n: 10, first: "gpu-node-0", last: "gpu-node-9", wantCount: 10},
		{n: 11, first: "gpu-node-00", last: "gpu-node-10", wantCount: 11},
		{n: 500, first: "gpu-node-000", last: "gpu-node-499", wantCount: 500},
		{n: 1001, first: "gpu-node-0000", last: "gpu-node-1000", wantCount: 1001},
	}
	for _, tc := range tests {
		got := NodeNames("gpu-node", tc.n)
		if len(got) != tc.wantCount {
			t.Fatalf("NodeNames(%d) has %d names, want %d", tc.n, len(got), tc.wantCount)
		}
		if tc.wantCount == 0 {
			continue
		}
		if got[0] != tc.first || got[len(got)-1] != tc.last {
			t.Errorf("NodeNames(%d) = %s … %s, want %s … %s", tc.n, got[0], got[len(got)-1], tc.first, tc.last)
		}
		if !slices.IsSorted(got) {
			t.Errorf("NodeNames(%d) does not sort lexically", tc.n)
		}
	}
}

func TestCreateNodes(t *testing.T) {
	ctx := context.Background()
	// One node exists already: CreateNodes must not fail on it nor change it.
	existing := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-03", Labels: map[string]string{"pre": "existing"}}}
	cs := fake.NewClientset(existing)
	names := NodeNames("gpu-node", 20)

	if err := CreateNodes(ctx, cs, names, fakegpu.Default(), fakegpu.NodeOptions{}, 4); err != nil {
		t.Fatalf("CreateNodes: %v", err)
	}
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(names) {
		t.Fatalf("%d nodes, want %d", len(list.Items), len(names))
	}
	for _, n := range list.Items {
		if n.Name == existing.Name {
			if n.Labels["pre"] != "existing" {
				t.Errorf("existing node was replaced: %v", n.Labels)
			}
			continue
		}
		for _, rl := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
			gpu := rl[corev1.ResourceName(fakegpu.DefaultResourceName)]
			cpu := rl[corev1.ResourceCPU]
			mem := rl[corev1.ResourceMemory]
			if gpu.Value() != 8 || cpu.Value() != 32 || mem.Cmp(resource.MustParse("256Gi")) != 0 {
				t.Errorf("node %s resources = %v, want 8 GPUs, 32 CPUs, 256Gi", n.Name, rl)
			}
		}
		if n.Annotations[fakegpu.AnnotationKwokNode] != "fake" || n.Labels["kubernetes.io/hostname"] != n.Name {
			t.Errorf("node %s lacks kwok annotation or hostname label: %v %v", n.Name, n.Annotations, n.Labels)
		}
	}
}

func TestCreateNodesErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("invalid inventory creates nothing", func(t *testing.T) {
		cs := fake.NewClientset()
		err := CreateNodes(ctx, cs, NodeNames("n", 3), fakegpu.Inventory{Count: 100}, fakegpu.NodeOptions{}, 2)
		if err == nil || !strings.Contains(err.Error(), "count") {
			t.Fatalf("want a count error, got %v", err)
		}
		if len(cs.Actions()) != 0 {
			t.Errorf("no API call expected, got %v", cs.Actions())
		}
	})
	t.Run("failures are joined and named", func(t *testing.T) {
		cs := fake.NewClientset()
		cs.PrependReactor("create", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
			n := a.(k8stesting.CreateAction).GetObject().(*corev1.Node)
			if n.Name == "n-1" || n.Name == "n-3" {
				return true, nil, apierrors.NewForbidden(corev1.Resource("nodes"), n.Name, errors.New("quota"))
			}
			return false, nil, nil
		})
		err := CreateNodes(ctx, cs, NodeNames("n", 5), fakegpu.Default(), fakegpu.NodeOptions{}, 3)
		if err == nil {
			t.Fatal("want error")
		}
		for _, want := range []string{"node n-1:", "node n-3:", "quota"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
		if strings.Contains(err.Error(), "n-0") {
			t.Errorf("error names a node that was created: %q", err)
		}
		list, _ := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if len(list.Items) != 3 {
			t.Errorf("%d nodes created, want 3", len(list.Items))
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		cs := fake.NewClientset()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := CreateNodes(cctx, cs, NodeNames("n", 10), fakegpu.Default(), fakegpu.NodeOptions{}, 2)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("want context.Canceled, got %v", err)
		}
	})
}

// setReady gives n only a Ready condition, as kwok's node-initialize stage (or its absence) would.
func setReady(n *corev1.Node, status corev1.ConditionStatus, reason string) {
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: reason}}
}

// watchStarted returns a channel closed when the first watch of resource (nodes, leases) is opened,
// so a test changes objects only once WaitNodesReady is past that initial list; the reactor
// declines, so the fake's own watch reactor still serves the watch.
func watchStarted(cs *fake.Clientset, resource string) <-chan struct{} {
	ch := make(chan struct{})
	var once sync.Once
	cs.PrependWatchReactor(resource, func(k8stesting.Action) (bool, watch.Interface, error) {
		once.Do(func() { close(ch) })
		return false, nil, nil
	})
	return ch
}

// nodeLease is the Lease kwok (or a kubelet) holds for a node, last renewed at renewed.
func nodeLease(node string, renewed time.Time, seconds int32) *coordinationv1.Lease {
	holder := node
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: corev1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &metav1.MicroTime{Time: renewed},
		},
	}
}

// TestWaitNodesReady: nodes are created Ready, as a kubelet registers them; they are up once kwok
// holds their leases, and a lease of a node outside the selector does not count.
func TestWaitNodesReady(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	names := NodeNames("gpu-node", 3)
	if err := CreateNodes(ctx, cs, names, fakegpu.Default(), fakegpu.NodeOptions{}, 2); err != nil {
		t.Fatal(err)
	}
	// A Ready node outside the selector must not count, even with its lease.
	other := fakegpu.SimulatedNode("other", fakegpu.Default(), fakegpu.NodeOptions{Labels: map[string]string{"pool": "b"}})
	if _, err := cs.CoreV1().Nodes().Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, nodeLease("other", time.Now(), 40), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	started := watchStarted(cs, "leases")
	created := make(chan error, 1)
	go func() {
		<-started
		// Play kwok: take each node's lease.
		for _, name := range names {
			if _, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, nodeLease(name, time.Now(), 40), metav1.CreateOptions{}); err != nil {
				created <- err
				return
			}
		}
		created <- nil
	}()
	if err := WaitNodesReady(ctx, cs, "gangbench.dev/managed=true,pool!=b", len(names), 30*time.Second); err != nil {
		t.Fatalf("WaitNodesReady: %v", err)
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
}

// TestWaitNodesReadyTurnsReady: a node created without conditions (kind's workers register
// NotReady) is waited for until it turns Ready.
func TestWaitNodesReadyTurnsReady(t *testing.T) {
	ctx := context.Background()
	n := fakegpu.SimulatedNode("n-0", fakegpu.Default(), fakegpu.NodeOptions{})
	setReady(n, corev1.ConditionFalse, "KubeletNotReady")
	cs := fake.NewClientset(n, nodeLease("n-0", time.Now(), 40))
	started := watchStarted(cs, "nodes")
	updated := make(chan error, 1)
	go func() {
		<-started
		setReady(n, corev1.ConditionTrue, "KubeletReady")
		_, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		updated <- err
	}()
	if err := WaitNodesReady(ctx, cs, "", 1, 30*time.Second); err != nil {
		t.Fatalf("WaitNodesReady: %v", err)
	}
	if err := <-updated; err != nil {
		t.Fatal(err)
	}
}

// TestWaitNodesReadyLeaseTimeout: Ready nodes whose lease is missing, unheld or lapsed are not up,
// and the error says which and why.
func TestWaitNodesReadyLeaseTimeout(t *testing.T) {
	objs := []runtime.Object{nodeLease("n-0", time.Now(), 40), nodeLease("n-2", time.Now().Add(-5*time.Minute), 40)}
	unheld := nodeLease("n-3", time.Now(), 40)
	unheld.Spec.HolderIdentity = nil
	objs = append(objs, unheld)
	for _, name := range NodeNames("n", 4) {
		objs = append(objs, fakegpu.SimulatedNode(name, fakegpu.Default(), fakegpu.NodeOptions{}))
	}
	err := WaitNodesReady(context.Background(), fake.NewClientset(objs...), "", 4, 300*time.Millisecond)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a timeout, got %v", err)
	}
	for _, want := range []string{"1 of 4 nodes Ready and holding a renewed Lease", "n-1: no Lease", "n-2: Lease last renewed 5m0s ago (duration 40s)", "n-3: Lease not held"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "n-0:") {
		t.Errorf("error %q names n-0, which is up", err)
	}
}

func TestWaitNodesReadyAlreadyReady(t *testing.T) {
	ctx := context.Background()
	n := fakegpu.SimulatedNode("n-0", fakegpu.Default(), fakegpu.NodeOptions{})
	cs := fake.NewClientset(n, nodeLease("n-0", time.Now(), 40))
	if err := WaitNodesReady(ctx, cs, "", 1, 30*time.Second); err != nil {
		t.Fatalf("WaitNodesReady: %v", err)
	}
	if err := WaitNodesReady(ctx, cs, "", 0, time.Millisecond); err != nil {
		t.Fatalf("want 0 must succeed at once: %v", err)
	}
	if err := WaitNodesReady(ctx, cs, "a in (", 1, time.Second); err == nil || !strings.Contains(err.Error(), "selector") {
		t.Fatalf("bad selector: got %v", err)
	}
}

func TestWaitNodesReadyTimeout(t *testing.T) {
	ctx := context.Background()
	var objs []runtime.Object
	add := func(name string, inv fakegpu.Inventory, mutate func(*corev1.Node)) {
		n := fakegpu.SimulatedNode(name, inv, fakegpu.NodeOptions{})
		mutate(n)
		objs = append(objs, n)
	}
	add("gpu-node-0", fakegpu.Default(), func(n *corev1.Node) { setReady(n, corev1.ConditionTrue, "KubeletReady") })
	add("gpu-node-1", fakegpu.Default(), func(n *corev1.Node) { setReady(n, corev1.ConditionFalse, "KubeletNotReady") })
	add("gpu-node-2", fakegpu.Default(), func(n *corev1.Node) { n.Status.Conditions = nil })
	// Ready, labelled as a GPU node, but its device plugin never advertised anything (kind).
	add("gpu-node-3", fakegpu.Default(), func(n *corev1.Node) {
		setReady(n, corev1.ConditionTrue, "KubeletReady")
		delete(n.Status.Allocatable, fakegpu.DefaultResourceName)
	})
	add("gpu-node-4", fakegpu.Default(), func(n *corev1.Node) { setReady(n, corev1.ConditionUnknown, "NodeStatusUnknown") })
	// A CPU node (no GPU labels) is Ready without GPUs.
	add("cpu-node-0", fakegpu.Inventory{}, func(n *corev1.Node) { setReady(n, corev1.ConditionTrue, "KubeletReady") })
	cs := fake.NewClientset(objs...)

	start := time.Now()
	err := WaitNodesReady(ctx, cs, "", 6, 300*time.Millisecond)
	if err == nil {
		t.Fatal("want a timeout error")
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("took %s for a 300ms timeout", elapsed)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error should wrap context.DeadlineExceeded: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{
		"2 of 6 nodes Ready",
		"gpu-node-1: Ready=False (KubeletNotReady)",
		"gpu-node-2: no Ready condition yet",
		"gpu-node-3: Ready but no allocatable GPU",
		"gpu-node-4: Ready=Unknown (NodeStatusUnknown)",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	for _, notWant := range []string{"gpu-node-0", "cpu-node-0"} {
		if strings.Contains(msg, notWant) {
			t.Errorf("error %q names Ready node %s", msg, notWant)
		}
	}
}

func TestWaitNodesReadyListsAtMostFive(t *testing.T) {
	var objs []runtime.Object
	for _, name := range NodeNames("n", 8) {
		n := fakegpu.SimulatedNode(name, fakegpu.Default(), fakegpu.NodeOptions{})
		n.Status.Conditions = nil
		objs = append(objs, n)
	}
	err := WaitNodesReady(context.Background(), fake.NewClientset(objs...), "", 8, 300*time.Millisecond)
	if err == nil {
		t.Fatal("want a timeout error")
	}
	msg := err.Error()
	for i, name := range NodeNames("n", 8) {
		if got, want := strings.Contains(msg, name+":"), i < 5; got != want {
			t.Errorf("node %s listed = %v, want %v: %q", name, got, want, msg)
		}
	}
	if !strings.Contains(msg, "and 3 more") {
		t.Errorf("error %q should say how many more", msg)
	}
}

func TestReadiness(t *testing.T) {
	n := fakegpu.SimulatedNode("n", fakegpu.Inventory{Count: 2, ResourceName: "example.com/gpu"}, fakegpu.NodeOptions{})
	setReady(n, corev1.ConditionTrue, "KubeletReady")
	if s := readiness(n); !s.ready {
		t.Errorf("a custom GPU resource should count: %+v", s)
	}
	n.Status.Allocatable["example.com/gpu"] = resource.MustParse("0")
	if s := readiness(n); s.ready {
		t.Errorf("zero GPUs must not count as ready")
	}
}

func TestWaitNodesReadyNoNodes(t *testing.T) {
	err := WaitNodesReady(context.Background(), fake.NewClientset(), "pool=a", 2, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "0 of 2 nodes Ready") || !strings.Contains(err.Error(), "no matching node seen") {
		t.Fatalf("got %v", err)
	}
}
