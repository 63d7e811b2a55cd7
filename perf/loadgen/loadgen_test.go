package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf/scenario"
)

func TestRunCreatesGroupsBeforeTheirPods(t *testing.T) {
	cs := fake.NewClientset()
	tl := timeline.NewTimeline(nil)
	var groups, pods atomic.Int32
	g := &Generator{Client: cs, Namespace: "ns", SchedulerName: "my-scheduler", Workers: 4, Timeline: tl,
		OnGroup: func() { groups.Add(1) }, OnPod: func() { pods.Add(1) }}
	ph := scenario.Phase{Name: "gangs", Groups: 6, PodsPerGroup: 3, GPUsPerPod: 2, Policy: scenario.Gang, MinCount: 2,
		CPU: resource.MustParse("100m"), PriorityClass: "high", Priority: 1000, DisruptionAll: true}
	st, err := g.Run(context.Background(), ph)
	if err != nil {
		t.Fatal(err)
	}
	if st.PodGroups != 6 || st.Pods != 18 || groups.Load() != 6 || pods.Load() != 18 || st.PodRate() <= 0 {
		t.Errorf("stats %+v, callbacks %d/%d", st, groups.Load(), pods.Load())
	}
	created := map[string]int{}
	for i, e := range tl.Events() {
		switch e.Kind {
		case timeline.PodGroupCreated:
			created[e.Group] = i
			if e.MinCount != 2 || e.Policy != "gang" || e.DisruptionMode != "all" || e.Phase != "gangs" {
				t.Errorf("group event %+v", e)
			}
		case timeline.PodCreated:
			if at, ok := created[e.Group]; !ok || at > i {
				t.Errorf("pod %s recorded before its PodGroup %s", e.Pod, e.Group)
			}
		}
	}
	pg, err := cs.SchedulingV1beta1().PodGroups("ns").Get(context.Background(), GroupName("gangs", 5), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pg.Spec.SchedulingPolicy.Gang == nil || pg.Spec.SchedulingPolicy.Gang.MinCount != 2 || pg.Spec.PriorityClassName != "high" ||
		pg.Spec.DisruptionMode == nil || pg.Spec.DisruptionMode.All == nil || pg.Labels[timeline.PhaseLabel] != "gangs" {
		t.Errorf("PodGroup %+v", pg)
	}
	p, err := cs.CoreV1().Pods("ns").Get(context.Background(), PodName(GroupName("gangs", 5), 2), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req := p.Spec.Containers[0].Resources.Requests
	if p.Spec.SchedulingGroup == nil || *p.Spec.SchedulingGroup.PodGroupName != "gangs-00005" || p.Spec.SchedulerName != "my-scheduler" ||
		p.Spec.PriorityClassName != "high" || req.Cpu().String() != "100m" || req.Name("nvidia.com/gpu", resource.DecimalSI).Value() != 2 ||
		p.Labels[timeline.PhaseLabel] != "gangs" {
		t.Errorf("pod %+v", p.Spec)
	}
}

func TestRunLargeGroupAndBasic(t *testing.T) {
	cs := fake.NewClientset()
	g := &Generator{Client: cs, Namespace: "ns", Timeline: timeline.NewTimeline(nil)}
	st, err := g.Run(context.Background(), scenario.Phase{Name: "big", Groups: 2, PodsPerGroup: 50, GPUsPerPod: 1, Policy: scenario.Basic})
	if err != nil || st.Pods != 100 {
		t.Fatalf("%+v %v", st, err)
	}
	pg, _ := cs.SchedulingV1beta1().PodGroups("ns").Get(context.Background(), "big-00000", metav1.GetOptions{})
	if pg.Spec.SchedulingPolicy.Basic == nil || pg.Spec.SchedulingPolicy.Gang != nil {
		t.Errorf("basic policy: %+v", pg.Spec.SchedulingPolicy)
	}
}

func TestRunPaced(t *testing.T) {
	g := &Generator{Client: fake.NewClientset(), Namespace: "ns", Timeline: timeline.NewTimeline(nil)}
	start := time.Now()
	// 6 groups at 50/s: the last is due 100 ms after the first.
	if _, err := g.Run(context.Background(), scenario.Phase{Name: "p", Groups: 6, PodsPerGroup: 1, GPUsPerPod: 1, Policy: scenario.Gang, MinCount: 1, GroupsPerSecond: 50}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("6 groups at 50/s took %s, want at least 100ms", d)
	}
}

func TestRunRetriesAndFails(t *testing.T) {
	cs := fake.NewClientset()
	var calls atomic.Int32
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if calls.Add(1) == 1 {
			return true, nil, apierrors.NewTooManyRequests("slow down", 0)
		}
		return false, nil, nil
	})
	g := &Generator{Client: cs, Namespace: "ns", Timeline: timeline.NewTimeline(nil)}
	if st, err := g.Run(context.Background(), scenario.Phase{Name: "p", Groups: 1, PodsPerGroup: 2, GPUsPerPod: 1, Policy: scenario.Gang, MinCount: 2}); err != nil || st.Pods != 2 {
		t.Errorf("a 429 is retried: %+v %v", st, err)
	}

	cs = fake.NewClientset()
	cs.PrependReactor("create", "podgroups", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("podgroups"), "x", errors.New("no"))
	})
	g = &Generator{Client: cs, Namespace: "ns", Timeline: timeline.NewTimeline(nil)}
	_, err := g.Run(context.Background(), scenario.Phase{Name: "p", Groups: 3, PodsPerGroup: 1, GPUsPerPod: 1, Policy: scenario.Gang, MinCount: 1})
	if err == nil || !strings.HasPrefix(err.Error(), "create PodGroup ns/p-0000") {
		t.Errorf("a refused create stops the run and names the object: %v", err)
	}
	if n, _ := cs.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{}); len(n.Items) != 0 {
		t.Error("no pod may be created for a PodGroup that was not")
	}
}

// TestRunWaitsForARestartingAPIServer: while a fault restarts the apiserver, creates fail with a
// refused connection, well beyond the 5 attempts a 429 gets; the burst must resume, not fail.
func TestRunWaitsForARestartingAPIServer(t *testing.T) {
	cs := fake.NewClientset()
	var calls atomic.Int32
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if calls.Add(1) <= maxRetries+2 {
			return true, nil, refused
		}
		return false, nil, nil
	})
	g := &Generator{Client: cs, Namespace: "ns", Timeline: timeline.NewTimeline(nil)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if st, err := g.Run(ctx, scenario.Phase{Name: "p", Groups: 1, PodsPerGroup: 2, GPUsPerPod: 1, Policy: scenario.Gang, MinCount: 2}); err != nil || st.Pods != 2 {
		t.Errorf("creates during an apiserver restart: %+v %v", st, err)
	}
	if !unreachable(fmt.Errorf("wrapped: %w", refused)) || unreachable(apierrors.NewTooManyRequests("x", 0)) {
		t.Error("unreachable misclassifies")
	}
}

// TestInOrder: arrival: schedulerPerf creates every PodGroup ahead (marked so), then the pods in
// index order across groups, 30 at a time, so an early gang is whole long before the
// last one starts; a pod never waits for a later index.
func TestInOrder(t *testing.T) {
	// The fake serialises its calls, so the check is on order (which a limit of 30 implies), not
	// on concurrency.
	cs := fake.NewClientset()
	tl := timeline.NewTimeline(nil)
	g := &Generator{Client: cs, Namespace: "ns", Workers: 4, Timeline: tl}
	ph := scenario.Phase{Name: "gangs", Groups: 3, PodsPerGroup: 40, CPU: resource.MustParse("100m"), Policy: scenario.Gang, MinCount: 40, InOrder: true}
	ctx := context.Background()
	if err := g.PodGroupsAhead(ctx, ph); err != nil {
		t.Fatal(err)
	}
	if n := len(tl.Events()); n != 3 {
		t.Fatalf("PodGroupsAhead recorded %d events, want the 3 PodGroups", n)
	}
	st, err := g.Run(ctx, ph)
	if err != nil || st.Pods != 120 || st.PodGroups != 0 {
		t.Fatalf("Run of an in-order phase: %+v %v (want 120 pods and no PodGroups: they came ahead)", st, err)
	}
	pods := 0
	for _, e := range tl.Events() {
		switch e.Kind {
		case timeline.PodGroupCreated:
			if !e.Ahead || pods > 0 {
				t.Errorf("PodGroup %s: ahead %v after %d pods; want every PodGroup ahead of every pod", e.Group, e.Ahead, pods)
			}
		case timeline.PodCreated:
			var group string
			var j int
			if _, err := fmt.Sscanf(strings.Replace(e.Pod, "-", " ", 2), "gangs %s %d", &group, &j); err != nil {
				t.Fatalf("pod name %q: %v", e.Pod, err)
			}
			var gi int
			fmt.Sscanf(group, "%d", &gi)
			// Index k is handed out only once k-29 creates have returned, so the pod recorded at
			// position pods has k ≤ pods+29; group-by-group burst creation breaks this at once.
			if k := gi*40 + j; k > pods+29 {
				t.Errorf("pod %s (index %d) created as number %d: not in index order", e.Pod, k, pods)
			}
			if e.Group != GroupName("gangs", gi) {
				t.Errorf("pod %s recorded in group %s", e.Pod, e.Group)
			}
			pods++
		}
	}
	if l, _ := cs.SchedulingV1beta1().PodGroups("ns").List(ctx, metav1.ListOptions{}); len(l.Items) != 3 {
		t.Errorf("%d PodGroups, want 3 (Run must not create them again)", len(l.Items))
	}
	// A phase that is not in order gets nothing ahead.
	g2 := &Generator{Client: fake.NewClientset(), Namespace: "ns", Timeline: timeline.NewTimeline(nil)}
	ph.InOrder = false
	if err := g2.PodGroupsAhead(ctx, ph); err != nil || len(g2.Timeline.Events()) != 0 {
		t.Errorf("PodGroupsAhead of a burst phase: %v, %d events", err, len(g2.Timeline.Events()))
	}
}
