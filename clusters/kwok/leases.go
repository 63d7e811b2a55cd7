package kwok

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/internal/poll"
)

// Why a restarted kwok controller needs its nodes' Leases released
//
// A kubelet renews its node's Lease (kube-node-lease/<node>) under the node's name, so a restarted
// kubelet is the same holder and takes the node back at once. kwok v0.8.0 cannot be told who it is:
// its identity is os.Hostname() + "_" + a fresh UUID per process (pkg/kwok/controllers/controller.go
// Identity, l.643; pkg/kwok/cmd/root.go l.123; no flag or config field sets it). A new kwok process
// therefore finds every Lease held by a stranger, the stopped process:
//
//   - node_lease_controller.go sync: tryAcquireOrRenew is false until renewTime+leaseDurationSeconds
//     (40 s) has passed, so sync returns (nil, nil) and syncWorker retries every renewInterval
//     (leaseDuration/4 = 10 s, controller.go l.250): the node is taken over 40-50 s after the old
//     process's last renewal, later on a loaded machine;
//   - until then the node is "read only" (controller.go l.289: readOnlyFunc = !nodeLeases.Held), and
//     the pod controller drops every event of a pod on it (pod_controller.go l.499, "Skip pod",
//     reason "read only", at debug level), so a pod bound meanwhile stays Pending;
//   - at the takeover renewLease reports a transition and onNodeManaged queues the node for
//     podsOnNodeSyncWorker (controller.go l.281, l.580), which lists the node's pods and sends them to
//     the pod controller once. That is the only replay: later renewals are not transitions. The pod
//     controller judges each of them with Held, which reads kwok's Lease informer cache
//     (controller.go l.258), not the Lease that renewLease has just written. When the cache has not
//     yet seen the takeover (the List of pods beat the Lease watch event: likely on a loaded
//     machine), Held is still false, every pod is dropped again, and nothing ever replays them:
//     the pod stays Pending until something else changes it or the pod watch re-lists, minutes
//     later. (Read from the source: the failed runs kept no kwok log, and kwok logs dropped pods
//     only at debug level. The node controller avoids this race with c.nodes.ManageNode, "Avoid slow cache
//     synchronization", controller.go l.334; the pod path has no such bypass.)
//
// Releasing the Leases the stopped process held before the new one starts gives kwok what a
// restarted kubelet has: its nodes' Leases free to take at once. They are deleted, not handed over by
// clearing spec.holderIdentity, because of how kwok starts: its node informer and its Lease informer
// start together and nobody waits for either to sync (pkg/utils/informer/informer.go WatchWithCache),
// so the first sync of a node can find no Lease in the cache yet. For a Lease that does not exist that
// is right, and sync creates it (ensureLease) and manages the node at once; for a cleared Lease that
// still exists the create fails with AlreadyExists and the node waits a renewInterval (10 s) for the
// next try. (Measured: with cleared holders one restart in three took 10.3 s instead of 0.4 s.)
// WaitNodeLeasesRetaken then waits until the new process holds every one of them, so that a restart
// "is back" when kwok holds its nodes again, as a kubelet is back when it renews its lease, and pods
// bound after it are judged against a Lease cache that already says so.
//
// A missing Lease for the moment between the delete and kwok's create costs nothing: the node
// lifecycle controller only takes a Lease whose renewTime is newer than the one it saw as a
// heartbeat, and keeps its last heartbeat time otherwise, so no heartbeat is made up and a node whose
// kwok stayed down long still goes NotReady as with a dead kubelet. kwok sets the Lease's owner
// reference to the node again when it creates it (setNodeOwnerFunc). Nothing here touches pods, nodes
// or the scheduler.

// leaseReleaseParallelism bounds concurrent Lease deletes when many nodes are released.
const leaseReleaseParallelism = 16

// ReleasedLeases names the node Leases ReleaseNodeLeases released, with the holder each had.
type ReleasedLeases map[string]string

// Names returns the released Leases' names, sorted.
func (r ReleasedLeases) Names() []string {
	out := make([]string, 0, len(r))
	for n := range r {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// simulated reports whether kwok manages node n (the annotation ManageNodesAnnotationSelector selects).
func simulated(n *corev1.Node) bool {
	return n.Annotations[fakegpu.AnnotationKwokNode] == fakegpu.AnnotationKwokNodeValue
}

// toRelease picks, from the node Leases, those a stopped kwok controller held: the Lease of a node
// kwok simulates, with a holder that is not the node's own name (a kubelet's identity; never kwok's).
// Leases of other nodes (a kind cluster's real kubelets) and Leases nobody holds are left alone.
func toRelease(nodes []corev1.Node, leases []coordinationv1.Lease) ReleasedLeases {
	sim := map[string]bool{}
	for i := range nodes {
		if simulated(&nodes[i]) {
			sim[nodes[i].Name] = true
		}
	}
	out := ReleasedLeases{}
	for _, l := range leases {
		if !sim[l.Name] || l.Spec.HolderIdentity == nil {
			continue
		}
		h := *l.Spec.HolderIdentity
		if h == "" || h == l.Name {
			continue
		}
		out[l.Name] = h
	}
	return out
}

// ReleaseNodeLeases deletes the node Leases a kwok controller held, for the nodes kwok simulates. Call it after that controller has exited and before a new one starts (see
// the comment at the top of this file for why). It returns what it released.
func ReleaseNodeLeases(ctx context.Context, cs kubernetes.Interface) (ReleasedLeases, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("release kwok node leases: list nodes: %w", err)
	}
	leases, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("release kwok node leases: list leases: %w", err)
	}
	rel := toRelease(nodes.Items, leases.Items)
	names := rel.Names()
	errs := make([]error, len(names))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(leaseReleaseParallelism, len(names)) {
		wg.Go(func() {
			for i := range next {
				errs[i] = releaseLease(ctx, cs, names[i], rel[names[i]])
			}
		})
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	var failed []string
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", names[i], err))
		}
	}
	if len(failed) > 0 {
		return rel, fmt.Errorf("release kwok node leases: %d of %d failed: %s", len(failed), len(names), strings.Join(failed[:min(len(failed), 5)], "; "))
	}
	return rel, nil
}

// releaseLease deletes one Lease if holder still holds it; a Lease that is gone (its node was
// deleted) or taken by someone else meanwhile is left as it is.
func releaseLease(ctx context.Context, cs kubernetes.Interface, name, holder string) error {
	leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder {
			return nil
		}
		// Only the version looked at: a Lease changed since is looked at again (a conflict).
		err = leases.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// notRetaken lists the released Leases not yet held by a new holder: missing (kwok has not created
// it yet), without a holder, or still with the old one. A Lease whose node is gone counts as
// retaken: there is nothing left for kwok to take.
func notRetaken(rel ReleasedLeases, nodes []corev1.Node, leases []coordinationv1.Lease) []string {
	alive := map[string]bool{}
	for i := range nodes {
		alive[nodes[i].Name] = true
	}
	byName := map[string]*coordinationv1.Lease{}
	for i := range leases {
		byName[leases[i].Name] = &leases[i]
	}
	var out []string
	for _, name := range rel.Names() {
		if !alive[name] {
			continue
		}
		l, ok := byName[name]
		if !ok {
			out = append(out, name)
			continue
		}
		if h := l.Spec.HolderIdentity; h == nil || *h == "" || *h == rel[name] {
			out = append(out, name)
		}
	}
	return out
}

// WaitNodeLeasesRetaken waits until every Lease in rel is held again by someone other than the holder
// it was released from: the restarted kwok controller has taken its nodes back.
func WaitNodeLeasesRetaken(ctx context.Context, cs kubernetes.Interface, rel ReleasedLeases, timeout time.Duration) error {
	if len(rel) == 0 {
		return nil
	}
	return poll.Until(ctx, fmt.Sprintf("kwok to take back the leases of its %d nodes", len(rel)), 200*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, "", err
		}
		leases, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		left := notRetaken(rel, nodes.Items, leases.Items)
		if len(left) == 0 {
			return true, "", nil
		}
		return false, fmt.Sprintf("%d not taken yet: %s", len(left), strings.Join(left[:min(len(left), 5)], ", ")), nil
	})
}
