package suites

import (
	"context"
	"fmt"
	"github.com/gangbench/gangbench/suites/framework"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/scenarios"
)

// Faults of the nodes rather than the control plane (issue 7): fake GPUs that turn unhealthy under
// gangs, and a kubelet restart that the fake GPU device plugin must survive by registering again.
// On kind both go through the device plugin on real kubelets (the lanes borrow kind workers); on
// the local provider GPUs turn unhealthy in the node status, as a kubelet would report them, and
// the kubelet feature skips: kwok simulates the nodes and there is no kubelet to restart.

// fltNodeGPUs reads a node's allocatable and capacity nvidia.com/gpu.
func fltNodeGPUs(ctx context.Context, l *framework.Lane, node string) (alloc, capa int64, err error) {
	n, err := l.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return 0, 0, err
	}
	a, c := n.Status.Allocatable[scenarios.GPUResource], n.Status.Capacity[scenarios.GPUResource]
	return a.Value(), c.Value(), nil
}

// fltWaitNodeGPUs waits until the node reports alloc allocatable and capa capacity GPUs and
// returns when it saw that.
func fltWaitNodeGPUs(ctx context.Context, t *testing.T, l *framework.Lane, node string, alloc, capa int64, why string) time.Time {
	t.Helper()
	framework.Eventually(ctx, t, l.Env.Scaled(90*time.Second), fmt.Sprintf("node %s to report %d allocatable and %d capacity %s (%s)", node, alloc, capa, scenarios.GPUResource, why),
		func(ctx context.Context) (bool, string, error) {
			a, c, err := fltNodeGPUs(ctx, l, node)
			return a == alloc && c == capa, fmt.Sprintf("allocatable %d, capacity %d", a, c), err
		})
	return time.Now()
}

// createPinnedGang creates a gang of n members × gpus whose pods can only go to node.
func (w *fltWatch) createPinnedGang(ctx context.Context, t *testing.T, l *framework.Lane, group string, n int, gpus int64, node string) {
	t.Helper()
	l.CreatePodGroup(ctx, t, scenarios.Group{Name: group, MinCount: int32(n)})
	w.tl.Add(timeline.Event{Time: time.Now(), Kind: timeline.PodGroupCreated, Group: group, MinCount: n, Policy: "gang", DisruptionMode: "single"})
	for _, m := range framework.Members(group, n, gpus) {
		if _, err := l.Client.CoreV1().Pods(l.Name).Create(ctx, l.PinnedPod(m, node), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s/%s: %v", l.Name, m.Name, err)
		}
	}
}

// fltBoundOn checks that the named pods are bound to node and returns them by name.
func fltBoundOn(ctx context.Context, t *testing.T, l *framework.Lane, node string, names []string) map[string]corev1.Pod {
	t.Helper()
	pods, err := l.Pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Pod{}
	for n, at := range framework.NodesOf(pods, names) {
		if at != node {
			t.Errorf("pod %s is bound to %q, want %s", n, at, node)
		}
	}
	for _, p := range pods {
		if slices.Contains(names, p.Name) {
			out[p.Name] = p
		}
	}
	return out
}

// fltSameBinding checks, for a short window, that pods bound before a fault are still bound to
// the same nodes with the same UIDs: nothing evicted or recreated them.
func fltSameBinding(ctx context.Context, t *testing.T, l *framework.Lane, before map[string]corev1.Pod) {
	t.Helper()
	names := slices.Sorted(maps.Keys(before))
	framework.Consistently(ctx, t, l.Env.Scaled(2*time.Second), fmt.Sprintf("pods %v bound to the same nodes with the same UIDs", names), func(ctx context.Context) (bool, string, error) {
		pods, err := l.Pods(ctx)
		if err != nil {
			return false, "", err
		}
		for _, n := range names {
			i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Name == n })
			was := before[n]
			if i < 0 {
				return false, n + " is gone", nil
			}
			if p := pods[i]; p.UID != was.UID || p.Spec.NodeName != was.Spec.NodeName || p.DeletionTimestamp != nil {
				return false, fmt.Sprintf("%s: uid %s on %q (deleting %v), was uid %s on %s", n, p.UID, p.Spec.NodeName, p.DeletionTimestamp != nil, was.UID, was.Spec.NodeName), nil
			}
		}
		return true, "", nil
	})
}

// checkNoPartialSince is checkNoPartial for gangs of different sizes, judged from since on: a GPU
// fault stops no component, so the scheduler answers for every moment of it.
func (w *fltWatch) checkNoPartialSince(ctx context.Context, t *testing.T, l *framework.Lane, minCount map[string]int, since time.Time) {
	t.Helper()
	groups := slices.Sorted(maps.Keys(minCount))
	framework.Consistently(ctx, t, l.Env.Scaled(3*time.Second), "no gang partially bound", func(ctx context.Context) (bool, string, error) {
		o, err := l.Observe(ctx)
		if err != nil {
			return false, "", err
		}
		for _, g := range groups {
			if b := o.Bound(g); b > 0 && b < minCount[g] {
				return false, fmt.Sprintf("gang %s has %d of minCount %d bound: %s", g, b, minCount[g], o), nil
			}
		}
		return true, "", nil
	})
	l.Canary(ctx, t)
	for _, p := range timeline.PartialAfter(w.tl.Events(), fltPartialGrace, since) {
		t.Errorf("partial placement from the fault on (pod watch timeline): %s", p)
	}
}

// stopIfFailed stops the watches when the step fails: the framework runs none of the later steps,
// whose last would stop them.
func (w *fltWatch) stopIfFailed(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			w.stop()
		}
	})
}

// fltGPUUnhealthy: two nodes of G GPUs; members take a quarter node (s = G/4). gang-a (2 × s) is
// pinned to the first node before the fault; the fault marks s+1 of that node's GPUs unhealthy, so
// its healthy GPUs left free (s-1) hold no member. Then gang-c (2 × s) fits on the second node and
// must be bound whole, and gang-b (3 × s), of which two members would fit there, must stay wholly
// Pending. Once the GPUs are healthy again gang-b fits (2 quarters free on each node) and must be
// bound whole.
func fltGPUUnhealthy() framework.Feature {
	const ref = "issue 7 (faults under load: fake GPUs unhealthy); gang-semantics §3.4"
	var w *fltWatch
	var s int64
	var n1, n2 string
	var gangA map[string]corev1.Pod
	mins := map[string]int{"gang-a": 2, "gang-b": 3, "gang-c": 2}
	faulted := func(t *testing.T) {
		t.Helper()
		if w == nil || w.faultAt.IsZero() {
			t.Skip("needs the GPUs FLT-14 marks unhealthy, which it did not")
		}
	}
	return framework.Feature{
		Suite: "faults", Name: "fake GPUs marked unhealthy under gangs", Lane: framework.LaneSpec{Nodes: 2, GPUsPerNode: 8, PluginNodes: true},
		Serial: true, NeedsGPUs: true,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "FLT-14", Statement: "when fake GPUs of a node are marked unhealthy (kind: through the device plugin, which the kubelet follows; local: in the node status, as a kubelet would) the node's allocatable nvidia.com/gpu drops by that many and its capacity stays (time to the drop is measured)", Ref: ref},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if l.GPUs < 4 || l.GPUs%4 != 0 {
						t.Skipf("needs nodes with a multiple of 4 GPUs (members take a quarter of a node); the lane's have %d", l.GPUs)
					}
					s, n1, n2 = int64(l.GPUs/4), l.Nodes[0], l.Nodes[1]
					g := int64(l.GPUs)
					w = fltStart(ctx, t, l)
					w.stopIfFailed(t)
					w.createPinnedGang(ctx, t, l, "gang-a", 2, s, n1)
					fltWaitGangs(ctx, t, l, 2, 1, []string{"gang-a"})
					gangA = fltBoundOn(ctx, t, l, n1, fltPodNames(2, "gang-a"))
					w.snapshotBefore(ctx, t, l)
					u := int(s) + 1 // leaves s-1 healthy GPUs free next to gang-a's 2s: no room for a member
					w.faultAt = time.Now()
					if err := l.Env.Cluster.GPUs.SetUnhealthyGPUs(ctx, n1, u); err != nil {
						t.Fatalf("mark %d GPUs of %s unhealthy: %v", u, n1, err)
					}
					lowered := fltWaitNodeGPUs(ctx, t, l, n1, g-int64(u), g, fmt.Sprintf("%d GPUs unhealthy", u))
					t.Logf("%d of %d GPUs of %s unhealthy: allocatable %d after %s", u, g, n1, g-int64(u), lowered.Sub(w.faultAt).Round(time.Millisecond))
					t.Logf("measurement gpuLoweredSeconds=%.3f", lowered.Sub(w.faultAt).Seconds())
					if a, c, err := fltNodeGPUs(ctx, l, n2); err != nil || a != g || c != g {
						t.Errorf("the other node %s reports %d of %d GPUs (%v), want all %d", n2, a, c, err, g)
					}
				}},
			{A: framework.Assertion{ID: "FLT-15", Statement: "while the GPUs are unhealthy, a gang that fits on the remaining GPUs is bound whole, and a gang of which only some members would fit stays wholly Pending: none of its members is bound", Ref: ref},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					faulted(t)
					w.stopIfFailed(t)
					w.createGangs(ctx, t, l, 2, s, "gang-c")
					fltWaitGangs(ctx, t, l, 2, 1, []string{"gang-c"})
					fltBoundOn(ctx, t, l, n2, fltPodNames(2, "gang-c"))
					w.createGangs(ctx, t, l, 3, s, "gang-b")
					names := fltPodNames(3, "gang-b")
					// The scheduler must have looked at gang-b and said no, not just not got to it.
					if o := l.WaitDecided(ctx, t, l.Env.Scaled(60*time.Second), names...); o.Bound("gang-b") != 0 {
						t.Fatalf("gang-b partially placed while GPUs were unhealthy: %s", o)
					}
					framework.Consistently(ctx, t, l.Env.Scaled(5*time.Second), "gang-b wholly Pending, gang-a and gang-c bound", func(ctx context.Context) (bool, string, error) {
						o, err := l.Observe(ctx)
						if err != nil {
							return false, "", err
						}
						return o.Bound("gang-b") == 0 && o.Bound("gang-a") == 2 && o.Bound("gang-c") == 2, o.String(), nil
					})
					l.Canary(ctx, t)
					g := int64(l.GPUs)
					if a, c, err := fltNodeGPUs(ctx, l, n1); err != nil || a != g-s-1 || c != g {
						t.Errorf("%s reports %d of %d GPUs (%v) at the end of the window, want %d: the fault did not hold", n1, a, c, err, g-s-1)
					}
				}},
			{A: framework.Assertion{ID: "FLT-16", Statement: "after the GPUs are healthy again the Pending gang is bound whole (time from the heal to its first bind is measured), and no gang is partially placed below minCount at any time from the fault on", Ref: ref},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					faulted(t)
					w.stopIfFailed(t)
					healAt := time.Now()
					if err := l.Env.Cluster.GPUs.SetUnhealthyGPUs(ctx, n1, 0); err != nil {
						t.Fatalf("mark the GPUs of %s healthy again: %v", n1, err)
					}
					g := int64(l.GPUs)
					w.readyAt = fltWaitNodeGPUs(ctx, t, l, n1, g, g, "GPUs healthy again")
					t.Logf("GPUs of %s healthy again: allocatable back after %s", n1, w.readyAt.Sub(healAt).Round(time.Millisecond))
					// Counted from the heal, not from seeing it: the scheduler may bind before the poll.
					framework.Eventually(ctx, t, l.Env.Scaled(90*time.Second), "a pod bound after the GPUs were healthy again", func(context.Context) (bool, string, error) {
						first, ok := timeline.FirstBindAfter(w.tl.Events(), healAt)
						if !ok {
							return false, fmt.Sprintf("%d pods bound in the lane, none after %s", len(w.binds()), healAt.Format("15:04:05.000")), nil
						}
						w.recovered = first.Time
						return true, "", nil
					})
					t.Logf("first bind after the heal: %s (%s after the fault)", w.recovered.Sub(healAt).Round(time.Millisecond), w.recovered.Sub(w.faultAt).Round(time.Millisecond))
					t.Logf("measurement recoverySeconds=%.3f", w.recovered.Sub(healAt).Seconds())
					fltWaitGangs(ctx, t, l, 3, 1, []string{"gang-b"})
					w.checkNoPartialSince(ctx, t, l, mins, w.faultAt)
				}},
			{A: framework.Assertion{ID: "FLT-17", Statement: "PodGroup status stays monotonic and nothing is lost across the GPU fault: pods bound before it stay bound on their node with the same UIDs, and the pods and PodGroups are those before it plus those created since", Ref: fltRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					defer w.stop()
					w.require(t)
					fltSameBinding(ctx, t, l, gangA)
					w.checkMonotonic(ctx, t, l, slices.Sorted(maps.Keys(mins)))
					w.checkNothingLost(ctx, t, l, slices.Concat(fltPodNames(3, "gang-b"), fltPodNames(2, "gang-c")), []string{"gang-b", "gang-c"})
				}},
		},
	}
}

// fltGPUSampler samples a node's allocatable GPUs in the background, so the drop a restarted
// kubelet reports until its device plugin registers again is seen even if it is short.
type fltGPUSampler struct {
	stopCh  chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	min     int64
	samples int
}

func fltSampleGPUs(ctx context.Context, l *framework.Lane, node string) *fltGPUSampler {
	s := &fltGPUSampler{stopCh: make(chan struct{}), min: -1}
	s.wg.Go(func() {
		tick := time.NewTicker(framework.PollInterval)
		defer tick.Stop()
		for {
			if a, _, err := fltNodeGPUs(ctx, l, node); err == nil {
				s.mu.Lock()
				s.samples++
				if s.min < 0 || a < s.min {
					s.min = a
				}
				s.mu.Unlock()
			}
			select {
			case <-s.stopCh:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return s
}

// stop ends the sampling and returns the lowest allocatable seen and the number of samples.
func (s *fltGPUSampler) stop() (int64, int) {
	if s == nil {
		return -1, 0
	}
	select {
	case <-s.stopCh:
	default:
		close(s.stopCh)
	}
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.min, s.samples
}

// fltKubeletRestart: one node with a real kubelet and the device plugin (kind). gang-a (2 × a
// quarter node) runs there; the node's kubelet is restarted (SIGTERM, start). The plugin must
// register with the new kubelet, which reports no GPUs until it does; then a gang created
// afterwards must be bound whole on the node, and gang-a must be untouched.
func fltKubeletRestart() framework.Feature {
	const ref = "issue 7 (faults under load: kubelet restart, device plugin re-registration)"
	var w *fltWatch
	var s int64
	var node string
	var gangA map[string]corev1.Pod
	return framework.Feature{
		Suite: "faults", Name: "kubelet restart with gangs running (device plugin re-registration)", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 8, PluginNodes: true},
		Serial: true, NeedsControl: true, NeedsGPUs: true, NeedsKubelets: true,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "FLT-18", Statement: "after a restart of a node's kubelet (kind) the fake GPU device plugin registers with the new kubelet and the node's allocatable nvidia.com/gpu comes back to its full count (time from the restart to that is measured)", Ref: ref},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if l.GPUs < 4 {
						t.Skipf("needs a node with at least 4 GPUs (two gangs of two quarter-node members); the lane's has %d", l.GPUs)
					}
					s, node = int64(l.GPUs/4), l.Nodes[0]
					g := int64(l.GPUs)
					gpus := l.Env.Cluster.GPUs
					w = fltStart(ctx, t, l)
					var sampler *fltGPUSampler
					w.stopIfFailed(t)
					t.Cleanup(func() { sampler.stop() })
					w.createGangs(ctx, t, l, 2, s, "gang-a")
					fltWaitGangs(ctx, t, l, 2, 1, []string{"gang-a"})
					gangA = fltBoundOn(ctx, t, l, node, fltPodNames(2, "gang-a"))
					w.snapshotBefore(ctx, t, l)
					before, err := gpus.PluginRegistrations(ctx, node)
					if err != nil {
						t.Fatalf("device plugin of %s: %v", node, err)
					}
					sampler = fltSampleGPUs(ctx, l, node)
					w.inject(ctx, t, l, clusters.Component(string(clusters.Kubelet)+"/"+node), false, nil)
					var backAt time.Time
					framework.Eventually(ctx, t, l.Env.Scaled(2*time.Minute), fmt.Sprintf("the device plugin of %s registered again (more than %d registrations) and %d GPUs allocatable", node, before, g),
						func(ctx context.Context) (bool, string, error) {
							reg, err := gpus.PluginRegistrations(ctx, node)
							if err != nil {
								return false, "", err
							}
							a, c, err := fltNodeGPUs(ctx, l, node)
							if err != nil {
								return false, "", err
							}
							backAt = time.Now()
							return reg > before && a == g, fmt.Sprintf("%d registrations, allocatable %d of capacity %d", reg, a, c), nil
						})
					low, samples := sampler.stop()
					t.Logf("device plugin registered again, GPUs back %s after the kubelet (%s after the fault); lowest allocatable seen in %d samples: %d",
						backAt.Sub(w.readyAt).Round(time.Millisecond), backAt.Sub(w.faultAt).Round(time.Millisecond), samples, low)
					t.Logf("measurement reRegistrationSeconds=%.3f", backAt.Sub(w.readyAt).Seconds())
				}},
			{A: framework.Assertion{ID: "FLT-19", Statement: "after the kubelet restart a gang created afterwards is bound whole on the node (time from the restart to its first bind is measured), pods bound before stay bound with the same UIDs, and no gang is partially placed after recovery", Ref: ref},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					w.require(t)
					w.stopIfFailed(t)
					w.createGangs(ctx, t, l, 2, s, "gang-b")
					w.waitRecovered(ctx, t, l, "the kubelet was restarted")
					fltWaitGangs(ctx, t, l, 2, 2, []string{"gang-a", "gang-b"})
					fltBoundOn(ctx, t, l, node, fltPodNames(2, "gang-b"))
					fltSameBinding(ctx, t, l, gangA)
					w.checkNoPartial(ctx, t, l, 2, []string{"gang-a", "gang-b"})
				}},
			{A: framework.Assertion{ID: "FLT-20", Statement: "PodGroup status stays monotonic and nothing is lost across the kubelet restart: the pods and PodGroups after it are those before it plus those created since", Ref: fltRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					defer w.stop()
					w.require(t)
					w.checkMonotonic(ctx, t, l, []string{"gang-a", "gang-b"})
					w.checkNothingLost(ctx, t, l, fltPodNames(2, "gang-b"), []string{"gang-b"})
				}},
		},
	}
}
