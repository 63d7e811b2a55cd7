package perf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/results"
)

func TestParseFault(t *testing.T) {
	good := []struct {
		in   string
		want Fault
	}{
		{"scheduler-kill@50%", Fault{Component: clusters.Scheduler, Action: FaultKill, AtFraction: 0.5}},
		{"apiserver-restart@30%", Fault{Component: clusters.APIServer, Action: FaultRestart, AtFraction: 0.3}},
		{"kwok-restart@50%", Fault{Component: clusters.Kwok, Action: FaultRestart, AtFraction: 0.5}},
		{"scheduler-restart@2s", Fault{Component: clusters.Scheduler, Action: FaultRestart, After: 2 * time.Second}},
		{"controller-manager-kill@1m30s", Fault{Component: clusters.ControllerManager, Action: FaultKill, After: 90 * time.Second}},
		{"etcd-restart@100%", Fault{Component: clusters.Etcd, Action: FaultRestart, AtFraction: 1}},
		{"kube-scheduler-kill@12.5%", Fault{Component: clusters.Scheduler, Action: FaultKill, AtFraction: 0.125}},
		{"kwok-controller-kill@0s", Fault{Component: clusters.Kwok, Action: FaultKill}},
		{"kubelet-restart@50%", Fault{Component: clusters.Kubelet, Action: FaultRestart, AtFraction: 0.5}},
		{"kubelet-kill@3s", Fault{Component: clusters.Kubelet, Action: FaultKill, After: 3 * time.Second}},
		{"kubelet/gangbench-worker2-restart@10%", Fault{Component: "kubelet/gangbench-worker2", Action: FaultRestart, AtFraction: 0.1}},
		{"gpu-unhealthy@50%", Fault{Component: FaultGPU, Action: FaultUnhealthy, AtFraction: 0.5, GPUs: 1, Nodes: 1, Hold: DefaultGPUHold}},
		{"gpu-unhealthy:4@2s", Fault{Component: FaultGPU, Action: FaultUnhealthy, After: 2 * time.Second, GPUs: 4, Nodes: 1, Hold: DefaultGPUHold}},
		{"gpu-unhealthy:8x3@30%", Fault{Component: FaultGPU, Action: FaultUnhealthy, AtFraction: 0.3, GPUs: 8, Nodes: 3, Hold: DefaultGPUHold}},
		{"gpu-unhealthy:allx2:1m@100%", Fault{Component: FaultGPU, Action: FaultUnhealthy, AtFraction: 1, GPUs: AllGPUs, Nodes: 2, Hold: time.Minute}},
		{"gpu-unhealthy:2:500ms@5%", Fault{Component: FaultGPU, Action: FaultUnhealthy, AtFraction: 0.05, GPUs: 2, Nodes: 1, Hold: 500 * time.Millisecond}},
	}
	for _, c := range good {
		got, err := ParseFault(c.in)
		c.want.Spec = c.in
		if err != nil || got != c.want {
			t.Errorf("ParseFault(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	bad := []struct{ in, why string }{
		{"scheduler-kill", `no @WHEN`},
		{"scheduler@50%", `no -ACTION`},
		{"-kill@50%", `no -ACTION`},
		{"sched-kill@50%", `unknown component "sched"`},
		{"scheduler-kil@50%", `unknown action "kil" (accepted: kill, restart)`},
		{"scheduler-stop@50%", `unknown action "stop"`},
		{"scheduler-kill@0%", `"0%" is not a percentage in (0, 100]`},
		{"scheduler-kill@150%", `"150%" is not a percentage`},
		{"scheduler-kill@NaN%", `is not a percentage`},
		{"scheduler-kill@x%", `is not a percentage`},
		{"scheduler-kill@50", `"50" is neither N% nor a duration`},
		{"scheduler-kill@-2s", `"-2s" is negative`},
		{"", `no @WHEN`},
		{"kubelet/-restart@50%", `unknown component "kubelet/"`},
		{"kubelet-stop@50%", `unknown action "stop" (accepted: kill, restart)`},
		{"gpu-kill@50%", `unknown action "kill" for gpu (accepted: unhealthy)`},
		{"scheduler-unhealthy@50%", `unknown action "unhealthy" (accepted: kill, restart)`},
		{"scheduler-kill:2@50%", `only gpu-unhealthy takes arguments`},
		{"gpu-unhealthy:0@50%", `GPUS "0" is neither a positive count nor all`},
		{"gpu-unhealthy:twox2@50%", `GPUS "two"`},
		{"gpu-unhealthy:2x0@50%", `NODES "0" is not a positive count`},
		{"gpu-unhealthy:2x@50%", `NODES "" is not a positive count`},
		{"gpu-unhealthy:2x1:0s@50%", `HOLD "0s" is not a positive duration`},
		{"gpu-unhealthy:2x1:10@50%", `HOLD "10"`},
		{"gpu-unhealthy:2@0%", `is not a percentage`},
	}
	for _, c := range bad {
		_, err := ParseFault(c.in)
		if err == nil {
			t.Errorf("ParseFault(%q) accepted", c.in)
			continue
		}
		// Every error names the value and the accepted forms.
		msg := err.Error()
		if !strings.Contains(msg, fmt.Sprintf("fault %q", c.in)) || !strings.Contains(msg, c.why) || !strings.Contains(msg, "COMPONENT-ACTION@WHEN") {
			t.Errorf("ParseFault(%q) error %q: want the value, %q and the accepted forms", c.in, msg, c.why)
		}
	}
	fs, err := ParseFaults([]string{"scheduler-kill@50%", "x", "kwok-restart@1s", "y@1s"})
	if err == nil || len(fs) != 2 || !strings.Contains(err.Error(), `fault "x"`) || !strings.Contains(err.Error(), `fault "y@1s"`) {
		t.Errorf("ParseFaults: %v %v; want both bad specs reported and the good ones kept", fs, err)
	}
}

// fakeControl records what a fault did; down says whether the component is stopped.
type fakeControl struct {
	mu    sync.Mutex
	calls []string
	down  map[clusters.Component]bool
	fail  error
	// onStart, if set, runs after a successful start (what the restarted component then does).
	onStart func(clusters.Component)
}

func (f *fakeControl) record(op string, c clusters.Component) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, op+" "+string(c))
	if f.fail != nil {
		return f.fail
	}
	if f.down == nil {
		f.down = map[clusters.Component]bool{}
	}
	switch op {
	case "stop", "kill":
		f.down[c] = true
	case "start":
		if !f.down[c] {
			return fmt.Errorf("%s is already running", c)
		}
		f.down[c] = false
	}
	return nil
}

func (f *fakeControl) Stop(_ context.Context, c clusters.Component) error { return f.record("stop", c) }
func (f *fakeControl) Kill(_ context.Context, c clusters.Component) error { return f.record("kill", c) }
func (f *fakeControl) Start(_ context.Context, c clusters.Component) error {
	if err := f.record("start", c); err != nil {
		return err
	}
	if f.onStart != nil {
		f.onStart(c)
	}
	return nil
}
func (f *fakeControl) Restart(ctx context.Context, c clusters.Component) error {
	if err := f.Stop(ctx, c); err != nil {
		return err
	}
	return f.Start(ctx, c)
}

func (f *fakeControl) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func fakePod(ns, name, group string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: &group}}}
}

// TestFaultRunKillAtHalf drives a faultRun by hand: the kill comes when half the measured pods are
// created, the component is started again, and the items report recovery, counts and a lost pod.
func TestFaultRunKillAtHalf(t *testing.T) {
	const ns = "ns"
	cs := fake.NewClientset(
		&schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "g0", Namespace: ns}},
		fakePod(ns, "g0-0", "g0"), fakePod(ns, "g0-1", "g0"), fakePod(ns, "g0-2", "g0"),
	)
	ctl := &fakeControl{}
	f, err := ParseFault("scheduler-kill@50%")
	if err != nil {
		t.Fatal(err)
	}
	sc := &scenario.Scenario{Phases: []scenario.Phase{{Name: "p"}}}
	fr := newFaultRun(ctl, cs, ns, []Fault{f}, sc, 4, slog.New(slog.DiscardHandler))
	tl := timeline.NewTimeline(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	fr.podCreated() // before start: a prefill pod, not counted
	t0 := time.Now()
	fr.start(ctx, t0, tl, []string{"p"})
	fr.podCreated()
	if got := ctl.log(); len(got) != 0 {
		t.Fatalf("fault fired at 1 of 4 pods: %v", got)
	}
	fr.podCreated() // 2 of 4: the trigger
	if err := fr.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ctl.log(), ", "); got != "kill kube-scheduler, start kube-scheduler" {
		t.Errorf("control calls: %s", got)
	}
	fs := fr.faults[0]
	if fs.createdAt != 2 || !fs.injected || fs.ready.Before(fs.at) {
		t.Errorf("at the fault: %d created, injected %v, at %s, ready %s", fs.createdAt, fs.injected, fs.at, fs.ready)
	}
	if r := fr.restarted(); !r[clusters.Scheduler] || len(r) != 1 {
		t.Errorf("restarted: %v", r)
	}

	// g0-1 disappears (nobody deleted it); g0-2 is created after the fault; a bind comes 1 s after
	// the component was back.
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "g0-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	events := []timeline.Event{
		{Time: t0, Kind: timeline.PodGroupCreated, Group: "g0", Phase: "p", Policy: "gang", MinCount: 2},
		{Time: t0, Kind: timeline.PodCreated, Group: "g0", Pod: "g0-0", Phase: "p"},
		{Time: t0, Kind: timeline.PodCreated, Group: "g0", Pod: "g0-1", Phase: "p"},
		{Time: fs.ready, Kind: timeline.PodCreated, Group: "g0", Pod: "g0-2", Phase: "p"},
		{Time: fs.ready.Add(time.Second), Kind: timeline.PodBound, Group: "g0", Pod: "g0-0", Phase: "p"},
	}
	var notes []string
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	items, err := fr.items(ctx, events, time.Minute, nil, note)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]results.DataItem{}
	for _, it := range items {
		if it.Labels["fault"] != "scheduler-kill@50%" || it.Labels["component"] != "kube-scheduler" || it.Labels["action"] != "kill" {
			t.Errorf("labels of %s: %v", it.Name, it.Labels)
		}
		byName[it.Name] = it
	}
	rec := byName[ItemFaultRecovery].Data
	if want := fs.ready.Add(time.Second).Sub(fs.at).Seconds(); rec["Recovered"] != 1 || rec[measure.Value] != want {
		t.Errorf("recovery %v, want %.3f s", rec, want)
	}
	objs := byName[ItemFaultLostObjects].Data
	if objs[measure.Value] != 1 || objs["PodsLost"] != 1 || objs["PodsBefore"] != 2 || objs["PodsCreated"] != 3 || objs["PodsAfter"] != 2 || objs["GroupsBefore"] != 1 || objs["GroupsLost"] != 0 {
		t.Errorf("objects: %v", objs)
	}
	// g0 has 1 bound member of minCount 2 at the end: a partial placement after the recovery.
	if p := byName[ItemFaultPartialGangs].Data[measure.Value]; p != 1 {
		t.Errorf("partial gangs after recovery: %v", p)
	}
	if joined := strings.Join(notes, "\n"); !strings.Contains(joined, "pod g0-1 existed before the fault") || !strings.Contains(joined, "partial placement after recovery: gang g0") {
		t.Errorf("notes:\n%s", joined)
	}
	line := FaultLines(&results.Run{DataItems: items})
	if len(line) != 1 || !strings.Contains(line[0], "scheduler-kill@50% at 2 measured pods created") || !strings.Contains(line[0], "1 lost") {
		t.Errorf("report line: %q", line)
	}
}

// TestFaultRunNotInjected: a fault whose trigger never comes, and one whose injection fails, are
// errors naming the fault, not a quiet pass.
func TestFaultRunNotInjected(t *testing.T) {
	cs := fake.NewClientset()
	sc := &scenario.Scenario{Phases: []scenario.Phase{{Name: "p"}}}
	late, _ := ParseFault("kwok-restart@1h")
	fr := newFaultRun(&fakeControl{}, cs, "ns", []Fault{late}, sc, 10, slog.New(slog.DiscardHandler))
	fr.start(context.Background(), time.Now(), timeline.NewTimeline(nil), []string{"p"})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := fr.wait(ctx); err == nil || !strings.Contains(err.Error(), "fault kwok-restart@1h was not injected") {
		t.Errorf("wait: %v", err)
	}
	fr.stop()

	now, _ := ParseFault("apiserver-restart@0s")
	fr = newFaultRun(&fakeControl{fail: errors.New("boom")}, cs, "ns", []Fault{now}, sc, 10, slog.New(slog.DiscardHandler))
	fr.start(context.Background(), time.Now(), timeline.NewTimeline(nil), []string{"p"})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := fr.wait(ctx2); err == nil || !strings.Contains(err.Error(), "fault apiserver-restart@0s: restart kube-apiserver: boom") {
		t.Errorf("wait: %v", err)
	}
}

func TestLost(t *testing.T) {
	set := func(names ...string) map[string]bool {
		m := map[string]bool{}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	before, created, after, deleted := set("a", "b"), set("b", "c", "d"), set("a", "c"), set("d")
	if got := lost(before, created, after, deleted, false); strings.Join(got, ",") != "b,d" {
		t.Errorf("without preemption a deletion is a loss: %v", got)
	}
	if got := lost(before, created, after, deleted, true); strings.Join(got, ",") != "b" {
		t.Errorf("with preemption the watch's deletions are excused: %v", got)
	}
}

func TestWithInvariants(t *testing.T) {
	a := &scenario.Scenario{Name: "a", Measurements: []string{measure.BindingRate}}
	b := &scenario.Scenario{Name: "b", Measurements: []string{measure.Invariants}}
	out := withInvariants([]*scenario.Scenario{a, b})
	if len(out[0].Measurements) != 2 || out[0].Measurements[1] != measure.Invariants || len(a.Measurements) != 1 || out[1] != b {
		t.Errorf("withInvariants: %v %v (caller's scenario must not change)", out[0].Measurements, a.Measurements)
	}
}
