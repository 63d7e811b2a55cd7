package kwok

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/fakegpu"
)

// DefaultWorkers is the CreateNodes concurrency used when workers <= 0: enough to hide the apiserver
// round trip, few enough not to trip client-side rate limits or starve two cores.
const DefaultWorkers = 16

// NodeNames returns n names prefix-0 … prefix-(n-1), the index zero padded to the width of n-1 so that
// lexical order is numeric order (gpu-node-000 … gpu-node-499 for n = 500). n <= 0 gives nil.
func NodeNames(prefix string, n int) []string {
	if n <= 0 {
		return nil
	}
	width := len(strconv.Itoa(n - 1))
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%0*d", prefix, width, i)
	}
	return names
}

// CreateNodes creates one fakegpu.SimulatedNode per name with at most workers concurrent creates
// (DefaultWorkers if workers <= 0). A node that already exists is left as it is and is not an error,
// so a retried cluster create is idempotent. The inventory is validated first, so a bad one fails
// before any node exists. All failures are returned joined, each naming its node; once ctx ends, the
// names not yet handed to a worker are reported together in one error wrapping ctx's error.
func CreateNodes(ctx context.Context, cs kubernetes.Interface, names []string, inv fakegpu.Inventory, opts fakegpu.NodeOptions, workers int) error {
	if err := inv.Validate(); err != nil {
		return fmt.Errorf("kwok: create nodes: %w", err)
	}
	if workers <= 0 {
		workers = DefaultWorkers
	}
	workers = min(workers, len(names))
	if opts.Registered.IsZero() {
		opts.Registered = metav1.Now()
	}

	// Each index is written by exactly one worker, so errs needs no lock; wg.Wait orders the writes
	// before the read below.
	errs := make([]error, len(names))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				errs[i] = createNode(ctx, cs, names[i], inv, opts)
			}
		})
	}
	// Once ctx ends the remaining names are summarised in one error rather than one line per node.
	var notAttempted error
dispatch:
	for i := range names {
		select {
		case next <- i:
		case <-ctx.Done():
			notAttempted = fmt.Errorf("nodes %s … %s (%d) not created: %w",
				names[i], names[len(names)-1], len(names)-i, ctx.Err())
			break dispatch
		}
	}
	close(next)
	wg.Wait()
	return errors.Join(append(errs, notAttempted)...)
}

func createNode(ctx context.Context, cs kubernetes.Interface, name string, inv fakegpu.Inventory, opts fakegpu.NodeOptions) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("node %s: not created: %w", name, err)
	}
	if opts.GPUAPI.DRA() {
		ann, err := sliceAnnotations(inv, opts.Clique)
		if err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
		opts.Annotations = maps.Clone(opts.Annotations)
		if opts.Annotations == nil {
			opts.Annotations = map[string]string{}
		}
		maps.Copy(opts.Annotations, ann)
	}
	node := fakegpu.SimulatedNode(name, inv, opts)
	created, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	if !opts.GPUAPI.DRA() {
		return nil
	}
	// The slice after the node: it is owned by the node, which needs the node's UID.
	return publishSlice(ctx, cs, created, inv, fakegpu.SliceOptions{Clique: opts.Clique})
}
