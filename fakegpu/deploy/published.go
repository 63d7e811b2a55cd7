package deploy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/fakegpu"
)

// publishedPoll is how often WaitPublished looks again. Slices appear once per node, seconds after
// the plugin starts: a poll is as quick as a watch here, and simpler to bound.
const publishedPoll = 500 * time.Millisecond

// WaitPublished waits until every node matching the label selector ("" for all) has its fake GPUs
// in ResourceSlices of driver fakegpu.DRADriver (inv.Count devices in the node's pool, all its
// slices of the pool's current generation), and at least one node matches: what the DRA plugin
// publishes, and what the scheduler allocates from. On timeout (or ctx end) the error names the
// nodes short and what they publish.
func WaitPublished(ctx context.Context, cs kubernetes.Interface, selector string, inv fakegpu.Inventory, timeout time.Duration) error {
	inv = inv.WithDefaults()
	want := inv.Count
	var reports map[string]string
	err := wait.PollUntilContextTimeout(ctx, publishedPoll, timeout, true, func(ctx context.Context) (bool, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, fmt.Errorf("list nodes: %w", err)
		}
		list, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector(resourcev1.ResourceSliceSelectorDriver, fakegpu.DRADriver).String(),
		})
		if err != nil {
			return false, fmt.Errorf("list ResourceSlices: %w", err)
		}
		counts := publishedDevices(list.Items)
		reports = map[string]string{}
		for _, n := range nodes.Items {
			switch got, ok := counts[n.Name]; {
			case !ok:
				reports[n.Name] = "no slice"
			case got != want:
				reports[n.Name] = fmt.Sprintf("%d devices", got)
			default:
				reports[n.Name] = ""
			}
		}
		for _, r := range reports {
			if r != "" {
				return false, nil
			}
		}
		return len(reports) > 0, nil
	})
	if err == nil {
		return nil
	}
	if ctx.Err() == nil && !wait.Interrupted(err) {
		return fmt.Errorf("deploy: wait for the ResourceSlices of %s: %w", fakegpu.DRADriver, err)
	}
	what := "all nodes"
	if selector != "" {
		what = "nodes matching " + selector
	}
	var bad []string
	for _, name := range slices.Sorted(maps.Keys(reports)) {
		if reports[name] != "" {
			bad = append(bad, name+" has "+reports[name])
		}
	}
	detail := ": no node matched"
	if len(reports) > 0 {
		detail = fmt.Sprintf(" (%d of %d nodes short): %s", len(bad), len(reports), strings.Join(bad[:min(len(bad), maxListedNodes)], ", "))
		if extra := len(bad) - maxListedNodes; extra > 0 {
			detail += fmt.Sprintf(" and %d more", extra)
		}
	}
	return fmt.Errorf("deploy: %s did not all publish %d devices of %s within %s%s: %w", what, want, fakegpu.DRADriver, timeout, detail, err)
}

// publishedDevices counts the devices each node publishes: the slices of its pool (node-local,
// pool named after the node as the DRA plugin names it) of the highest generation only, since
// older ones are on their way out.
func publishedDevices(items []resourcev1.ResourceSlice) map[string]int {
	// The field selector is applied again: not every client (the fake one) applies it.
	items = slices.DeleteFunc(slices.Clone(items), func(s resourcev1.ResourceSlice) bool { return s.Spec.Driver != fakegpu.DRADriver })
	gen := map[string]int64{}
	for _, s := range items {
		if s.Spec.NodeName != nil {
			gen[*s.Spec.NodeName] = max(gen[*s.Spec.NodeName], s.Spec.Pool.Generation)
		}
	}
	out := map[string]int{}
	for _, s := range items {
		if s.Spec.NodeName == nil || s.Spec.Pool.Name != *s.Spec.NodeName || s.Spec.Pool.Generation != gen[*s.Spec.NodeName] {
			continue
		}
		out[*s.Spec.NodeName] += len(s.Spec.Devices)
	}
	return out
}
