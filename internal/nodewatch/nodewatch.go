// Package nodewatch waits on the nodes of a cluster: it lists and then watches the nodes that
// match a label selector (or the nodes' Leases), judges each one, and returns as soon as the
// judgements satisfy a condition, so a wait for "every GPU node advertises its GPUs" or "500 nodes are Ready" costs one
// list and a watch, not a poll. It is a leaf package (client-go only), so the cluster providers
// (clusters/kwok) and the device plugin's deployment (fakegpu/deploy) share it without importing
// each other.
package nodewatch

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Until lists the nodes matching sel, then watches them, keeping judge's verdict on each matching
// node by name (a node deleted, or relabelled out of sel, is forgotten), until done holds for the
// verdicts. It returns the verdicts it last held, also on error, so a caller's timeout message can
// say what each node lacked. The wait ends with ctx: the caller gives it its deadline, and tells a
// timeout (ctx.Err() != nil) from another failure (a selector the server refuses, say).
//
// judge and done run one after the other on the calling goroutine, and the map is read only after
// Until returned, so none of them needs a lock.
func Until[S any](ctx context.Context, cs kubernetes.Interface, sel labels.Selector, judge func(*corev1.Node) S, done func(map[string]S) bool) (map[string]S, error) {
	selector := sel.String()
	nodes := cs.CoreV1().Nodes()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return nodes.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return nodes.Watch(ctx, o)
		},
	}
	// Filter here too: a watch (the fake clientset's, for one) may not apply the label selector.
	matches := func(n *corev1.Node) bool { return sel.Matches(labels.Set(n.Labels)) }
	return until(ctx, cs, lw, &corev1.Node{}, matches, judge, done)
}

// Leases is Until for the node Leases in kube-node-lease (a node's Lease has the node's name), all
// of them: what says that something (a kubelet, kwok) runs a node, and what the node lifecycle
// controller judges nodes by.
func Leases[S any](ctx context.Context, cs kubernetes.Interface, judge func(*coordinationv1.Lease) S, done func(map[string]S) bool) (map[string]S, error) {
	leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return leases.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return leases.Watch(ctx, o)
		},
	}
	return until(ctx, cs, lw, &coordinationv1.Lease{}, func(*coordinationv1.Lease) bool { return true }, judge, done)
}

// object is what until watches: a Node or a Lease.
type object interface {
	runtime.Object
	GetName() string
}

// until is Until and Leases over any list-watch: objects for which matches holds are judged and
// kept by name, others and deleted ones forgotten.
func until[T object, S any](ctx context.Context, cs kubernetes.Interface, lw *cache.ListWatch, example T, matches func(T) bool, judge func(T) S, done func(map[string]S) bool) (map[string]S, error) {
	verdicts := map[string]S{}
	observe := func(o T) {
		if matches(o) {
			verdicts[o.GetName()] = judge(o)
		} else {
			delete(verdicts, o.GetName())
		}
	}
	_, err := watchtools.UntilWithSync(ctx,
		// Tell the reflector whether cs supports watch-list (the fake clientset does not), instead of
		// letting it wait for a bookmark that never comes.
		cache.ToListWatcherWithWatchListSemantics(lw, cs),
		example,
		func(store cache.Store) (bool, error) {
			for _, obj := range store.List() {
				if o, ok := obj.(T); ok {
					observe(o)
				}
			}
			return done(verdicts), nil
		},
		func(ev watch.Event) (bool, error) {
			o, ok := ev.Object.(T)
			if !ok {
				// Bookmarks and errors carry no object of ours; the informer behind UntilWithSync
				// handles re-listing itself.
				return false, nil
			}
			if ev.Type == watch.Deleted {
				delete(verdicts, o.GetName())
			} else {
				observe(o)
			}
			return done(verdicts), nil
		},
	)
	return verdicts, err
}
