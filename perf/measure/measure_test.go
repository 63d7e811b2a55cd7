package measure

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/observe/metrics"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/results"
)

func readMetrics(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "metrics", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func snapshot(t *testing.T, name string) *metrics.Snapshot {
	t.Helper()
	s, err := metrics.Parse(readMetrics(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func item(t *testing.T, items []results.DataItem, name string) results.DataItem {
	t.Helper()
	for _, it := range items {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("no data item %s in %v", name, items)
	return results.DataItem{}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestSchedulerItems checks histogram subtraction and counter deltas against numbers worked out by
// hand from testdata/metrics/scheduler-{before,after}.txt.
func TestSchedulerItems(t *testing.T) {
	items, err := SchedulerItems(snapshot(t, "scheduler-before.txt"), snapshot(t, "scheduler-after.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// after − before, both results summed, cumulative: le 0.001: 0, 0.002: 2, 0.004: 4+1=5,
	// 0.008: 8+1=9, +Inf: 9; count 9; sum 0.04 + 0.003 = 0.043.
	d := item(t, items, "podGroupAttemptDuration")
	want := map[string]float64{
		"Count":   9,
		"Average": 0.043 / 9,
		"Perc50":  0.002 + 0.002*(4.5-2)/3, // rank 4.5 falls in (0.002, 0.004], 3 observations there
		"Perc90":  0.004 + 0.004*(8.1-5)/4, // rank 8.1 in (0.004, 0.008], 4 observations
		"Perc99":  0.004 + 0.004*(8.91-5)/4,
	}
	for k, v := range want {
		if !near(d.Data[k], v) {
			t.Errorf("podGroupAttemptDuration %s = %.9g, want %.9g", k, d.Data[k], v)
		}
	}
	if d.Unit != "s" {
		t.Errorf("unit %q", d.Unit)
	}
	a := item(t, items, "podGroupScheduleAttempts")
	if a.Data["scheduled"] != 8 || a.Data["unschedulable"] != 1 || a.Data["Total"] != 9 {
		t.Errorf("podGroupScheduleAttempts = %v", a.Data)
	}
	p := item(t, items, "podScheduleAttempts")
	if p.Data["scheduled"] != 24 || p.Data["unschedulable"] != 3 {
		t.Errorf("podScheduleAttempts = %v", p.Data)
	}
	for _, it := range items {
		if strings.HasPrefix(it.Name, "workloadPreemption") {
			t.Errorf("a metric absent from the scrape must be left out, got %s", it.Name)
		}
	}
	// A component restarted between scrapes: the difference would be fiction.
	if _, err := SchedulerItems(snapshot(t, "scheduler-after.txt"), snapshot(t, "scheduler-before.txt")); err == nil {
		t.Error("counters going backwards must be an error")
	}
}

// fixtureServer serves the files in order, then the last one again.
func fixtureServer(t *testing.T, bodies ...[]byte) clusters.Endpoint {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		i := min(int(n.Add(1))-1, len(bodies)-1)
		w.Write(bodies[i])
	}))
	t.Cleanup(srv.Close)
	return clusters.Endpoint{URL: srv.URL + "/metrics"}
}

// TestBindingRate runs the measurement against a fake apiserver /metrics (300 binding POSTs 201
// between the scrapes; a 409 and pod creates that must not count) and a timeline with 300 binds.
func TestBindingRate(t *testing.T) {
	tl := timeline.NewTimeline(nil)
	env := &Env{
		Cluster:  &clusters.Cluster{APIServerMetrics: fixtureServer(t, readMetrics(t, "apiserver-before.txt"), readMetrics(t, "apiserver-after.txt"))},
		Timeline: tl, Measured: []string{"gangs"},
	}
	m := newBindingRate(env)
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	start := m.(*bindingRate).start
	// A bind of a prefill phase and one before the window do not count.
	tl.Add(timeline.Event{Time: start.Add(-time.Second), Kind: timeline.PodBound, Phase: "gangs", Pod: "early"})
	tl.Add(timeline.Event{Time: start.Add(time.Millisecond), Kind: timeline.PodBound, Phase: "prefill", Pod: "p"})
	for i := range 300 {
		tl.Add(timeline.Event{Time: start.Add(time.Duration(i+1) * 10 * time.Millisecond), Kind: timeline.PodBound, Phase: "gangs", Pod: "pod-" + string(rune('a'+i%26)) + string(rune('a'+i/26))})
	}
	items, err := m.Gather(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := item(t, items, ItemBindingRate)
	if w.Data["Count"] != 300 || !near(w.Data["Average"], 100) || !near(w.Data["DurationSeconds"], 3) {
		t.Errorf("watch: %v (want 300 binds over 3 s: 100 pods/s)", w.Data)
	}
	// Samples: [0,1) has 99 binds (10 ms … 990 ms), [1,2) 100, [2,3) 100; the bind at 3.000 s is in
	// the partial interval and dropped. Three samples are too few for percentiles.
	if _, ok := w.Data["Perc50"]; ok || w.Data["Max"] != 100 || w.Data["Samples"] != 3 {
		t.Errorf("samples: %v", w.Data)
	}
	// The apiserver's count is divided by the watch's window, so the two averages agree.
	s := item(t, items, ItemAPIServerBindingRate)
	if s.Data["Count"] != 300 || !near(s.Data["Average"], w.Data["Average"]) || s.Data["DurationSeconds"] != w.Data["DurationSeconds"] {
		t.Errorf("apiserver: %v", s.Data)
	}
	if mm := item(t, items, ItemBindCountMismatch); mm.Data[Value] != 0 {
		t.Errorf("mismatch: %v", mm.Data)
	}
}

func TestWatchRate(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var binds []time.Time
	// 10 binds in the first second, 30 in the second, 20 in the third, one at 3.5 s.
	for i := range 10 {
		binds = append(binds, t0.Add(time.Duration(50+i*90)*time.Millisecond))
	}
	for i := range 30 {
		binds = append(binds, t0.Add(time.Second+time.Duration(i*30)*time.Millisecond))
	}
	for i := range 20 {
		binds = append(binds, t0.Add(2*time.Second+time.Duration(i*45)*time.Millisecond))
	}
	binds = append(binds, t0.Add(3500*time.Millisecond))
	d, withheld := WatchRate(t0, binds)
	if d["Count"] != 61 || !near(d["Average"], 61/3.5) || d["Max"] != 30 || d["Samples"] != 3 {
		t.Errorf("WatchRate = %v", d)
	}
	// scheduler_perf's window: the 60 binds after the first one, over 50 ms → 3.5 s.
	if !near(d["SinceFirstBind"], 60/3.45) {
		t.Errorf("SinceFirstBind = %v, want %v", d["SinceFirstBind"], 60/3.45)
	}
	if d, _ := WatchRate(t0, binds[:1]); d["SinceFirstBind"] != 0 {
		t.Errorf("one bind has no window after it: %v", d)
	}
	// Three one-second samples: a p50 would be one of them, so no percentile is reported.
	for _, k := range []string{"Perc50", "Perc90", "Perc99"} {
		if _, ok := d[k]; ok {
			t.Errorf("%s reported from 3 samples: %v", k, d)
		}
	}
	if !strings.Contains(withheld, "3 one-second samples") || !strings.Contains(withheld, "Perc50 (needs 10)") {
		t.Errorf("withheld = %q", withheld)
	}
	if d, _ := WatchRate(t0, nil); d["Count"] != 0 || d["Average"] != 0 {
		t.Errorf("no binds: %v", d)
	}
	// Twenty seconds of binds (i+1 in second i): p50 and p90 have samples enough, p99 does not.
	var long []time.Time
	for i := range 20 {
		for j := range i + 1 {
			long = append(long, t0.Add(time.Duration(i)*time.Second+time.Duration(j)*time.Millisecond))
		}
	}
	d, withheld = WatchRate(t0, long)
	// The last second's binds (19.000–19.019 s) are a partial interval, so 19 samples of 1…19.
	if d["Perc50"] != 10 || d["Perc90"] != 18 || d["Max"] != 19 {
		t.Errorf("20 samples: %v", d)
	}
	if _, ok := d["Perc99"]; ok || !strings.Contains(withheld, "Perc99 (needs 100)") || strings.Contains(withheld, "Perc50") {
		t.Errorf("20 samples: %v, withheld %q", d, withheld)
	}
}

func TestFirstCreation(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ev := []timeline.Event{
		{Time: t0.Add(-time.Second), Kind: timeline.PodCreated, Phase: "measure"}, // an earlier repetition
		{Time: t0.Add(time.Second), Kind: timeline.PodCreated, Phase: "prefill"},
		{Time: t0.Add(3 * time.Second), Kind: timeline.PodCreated, Phase: "measure"},
		{Time: t0.Add(2 * time.Second), Kind: timeline.PodGroupCreated, Phase: "measure"},
	}
	if got := FirstCreation(ev, []string{"measure"}, t0); !got.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("FirstCreation = %v, want the measured phase's first create at t0+2s", got.Sub(t0))
	}
	if got := FirstCreation(ev, []string{"none"}, t0); !got.Equal(t0) {
		t.Errorf("no creation: %v, want notBefore", got.Sub(t0))
	}
}

func TestGroupsAndLatency(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	ev := []timeline.Event{
		{Time: s(0), Kind: timeline.PodGroupCreated, Phase: "p", Group: "a", Policy: "gang", MinCount: 3},
		{Time: s(1), Kind: timeline.PodGroupCreated, Phase: "p", Group: "b", Policy: "gang", MinCount: 2},
		{Time: s(2), Kind: timeline.PodGroupCreated, Phase: "p", Group: "c", Policy: "gang", MinCount: 2},
		{Time: s(0), Kind: timeline.PodGroupCreated, Phase: "prefill", Group: "x", Policy: "gang", MinCount: 1},
		{Time: s(1.0), Kind: timeline.PodBound, Phase: "p", Group: "a", Pod: "a-0"},
		{Time: s(2.0), Kind: timeline.PodBound, Phase: "p", Group: "a", Pod: "a-2"},
		{Time: s(1.5), Kind: timeline.PodBound, Phase: "p", Group: "a", Pod: "a-1"},
		{Time: s(5.0), Kind: timeline.PodBound, Phase: "p", Group: "b", Pod: "b-0"},
		{Time: s(5.0), Kind: timeline.PodBound, Phase: "p", Group: "b", Pod: "b-0"},
		{Time: s(5.5), Kind: timeline.PodBound, Phase: "p", Group: "b", Pod: "b-1"},
		{Time: s(3.0), Kind: timeline.PodBound, Phase: "p", Group: "c", Pod: "c-0"}, // never reaches quorum
		{Time: s(9.0), Kind: timeline.PodBound, Phase: "prefill", Group: "x", Pod: "x-0"},
	}
	gs := Groups(ev, []string{"p"})
	if len(gs) != 3 || gs[0].Group != "a" || gs[0].Latency() != 2*time.Second || gs[0].Spread() != time.Second || gs[1].Bound != 2 || gs[2].Complete() {
		t.Fatalf("groups: %+v", gs)
	}
	lat, spread, incomplete := LatencyData(gs)
	// latencies: a 2 s, b 4.5 s; spreads: a 1 s, b 0.5 s; c incomplete.
	if incomplete != 1 || lat["Count"] != 2 || lat["Max"] != 4.5 || lat["Perc50"] != 2 || lat["Average"] != 3.25 || lat["Incomplete"] != 1 {
		t.Errorf("latency %v incomplete %d", lat, incomplete)
	}
	if spread["Max"] != 1 || spread["Min"] != 0.5 {
		t.Errorf("spread %v", spread)
	}
}

func TestTimelineJSONL(t *testing.T) {
	tl := timeline.NewTimeline(nil)
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	tl.Add(timeline.Event{Time: t0, Kind: timeline.PodGroupCreated, Phase: "p", Group: "g", MinCount: 2, Policy: "gang", DisruptionMode: "all"})
	tl.Add(timeline.Event{Time: t0.Add(time.Second), Kind: timeline.PodBound, Phase: "p", Group: "g", Pod: "g-0", Node: "n"})
	tl.Add(timeline.Event{Time: t0.Add(2 * time.Second), Kind: timeline.PodBound, Phase: "p", Group: "g", Pod: "g-0", Node: "n"})
	if tl.BoundIn("p") != 1 || tl.BoundIn("other") != 0 {
		t.Errorf("a second sighting of a bind is not a second bind: %d", tl.BoundIn("p"))
	}
	var b bytes.Buffer
	if err := timeline.WriteJSONL(&b, tl.Events()); err != nil {
		t.Fatal(err)
	}
	back, err := timeline.ReadJSONL(&b)
	if err != nil || !slices.EqualFunc(back, tl.Events(), func(a, b timeline.Event) bool { return a == b }) {
		t.Errorf("round trip: %v %v", back, err)
	}
	for _, bad := range []string{`{"t":"2026-11-29T12:00:00Z","kind":"podExploded"}`, `{"t":"2026-11-29T12:00:00Z","kind":"podBound","colour":"red"}`} {
		if _, err := timeline.ReadJSONL(strings.NewReader(bad + "\n")); err == nil || !strings.HasPrefix(err.Error(), "line 1:") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func gpus(n int64) corev1.ResourceList {
	return corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}
}

func nodeAlloc(g int64) corev1.ResourceList {
	rl := gpus(g)
	rl[corev1.ResourcePods] = resource.MustParse("110")
	return rl
}

// A PodGroup created ahead of the window (arrival: schedulerPerf) arrives with its first pod; the
// window opens at the first pod, not at the PodGroups made before the quiet wait.
func TestGroupsAhead(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	s := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	ev := []timeline.Event{
		{Time: s(0), Kind: timeline.PodGroupCreated, Phase: "p", Group: "a", Policy: "gang", MinCount: 2, Ahead: true},
		{Time: s(0.1), Kind: timeline.PodGroupCreated, Phase: "p", Group: "b", Policy: "gang", MinCount: 1},
		{Time: s(30), Kind: timeline.PodCreated, Phase: "p", Group: "a", Pod: "a-0"},
		{Time: s(30.2), Kind: timeline.PodCreated, Phase: "p", Group: "a", Pod: "a-1"},
		{Time: s(30.4), Kind: timeline.PodCreated, Phase: "p", Group: "b", Pod: "b-0"},
		{Time: s(31), Kind: timeline.PodBound, Phase: "p", Group: "a", Pod: "a-0"},
		{Time: s(31.5), Kind: timeline.PodBound, Phase: "p", Group: "a", Pod: "a-1"},
		{Time: s(32), Kind: timeline.PodBound, Phase: "p", Group: "b", Pod: "b-0"},
	}
	gs := Groups(ev, []string{"p"})
	if len(gs) != 2 || gs[0].Latency() != 1500*time.Millisecond || gs[1].Latency() != 31900*time.Millisecond {
		t.Errorf("ahead group a counts from its first pod (1.5 s), group b from its PodGroup (31.9 s): %+v", gs)
	}
	if got := FirstCreation(ev, []string{"p"}, s(20)); !got.Equal(s(30)) {
		t.Errorf("window opens at %v, want the first pod at 30 s", got.Sub(t0))
	}
}

func TestUnboundFitting(t *testing.T) {
	nodes := []FitNode{{"n1", nodeAlloc(8)}, {"n2", nodeAlloc(8)}}
	bound := []FitPod{{Name: "x-0", Group: "x", Node: "n1", Requests: gpus(8)}, {Name: "y-0", Group: "y", Node: "n2", Requests: gpus(4)}}
	for _, tc := range []struct {
		name    string
		pending []FitPod
		groups  []FitGroup
		fitting int
	}{
		{"nothing pending", nil, nil, 0},
		{"a 4-GPU pod fits next to y", []FitPod{{Name: "b-0", Group: "b", Requests: gpus(4)}}, []FitGroup{{Name: "b"}}, 1},
		{"an 8-GPU pod does not fit anywhere", []FitPod{{Name: "b-0", Group: "b", Requests: gpus(8)}}, []FitGroup{{Name: "b"}}, 0},
		{"a gang of 2 × 4 GPUs cannot reach quorum 2 in 4 free GPUs",
			[]FitPod{{Name: "g-0", Group: "g", Requests: gpus(4)}, {Name: "g-1", Group: "g", Requests: gpus(4)}},
			[]FitGroup{{Name: "g", Gang: true, MinCount: 2}}, 0},
		{"a gang of 2 × 2 GPUs fits, and so does its extra member",
			[]FitPod{{Name: "g-0", Group: "g", Requests: gpus(2)}, {Name: "g-1", Group: "g", Requests: gpus(1)}, {Name: "g-2", Group: "g", Requests: gpus(1)}},
			[]FitGroup{{Name: "g", Gang: true, MinCount: 2}}, 3},
		{"two groups that each fit alone count once",
			[]FitPod{{Name: "a-0", Group: "a", Requests: gpus(4)}, {Name: "b-0", Group: "b", Requests: gpus(4)}},
			[]FitGroup{{Name: "a"}, {Name: "b"}}, 1},
		{"a failed gang attempt gives its capacity back to later groups",
			[]FitPod{{Name: "g-0", Group: "g", Requests: gpus(3)}, {Name: "g-1", Group: "g", Requests: gpus(3)}, {Name: "b-0", Group: "b", Requests: gpus(4)}},
			[]FitGroup{{Name: "g", Gang: true, MinCount: 2}, {Name: "b"}}, 1},
		{"pods of undescribed groups and loose pods are judged one by one",
			[]FitPod{{Name: "u-0", Group: "u", Requests: gpus(2)}, {Name: "loose", Requests: gpus(2)}, {Name: "big", Requests: gpus(9)}}, nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := UnboundFitting(nodes, append(slices.Clone(bound), tc.pending...), tc.groups)
			if rep.Fitting != tc.fitting || rep.Pending != len(tc.pending) {
				t.Errorf("fitting %d of %d pending, want %d of %d (%s)", rep.Fitting, rep.Pending, tc.fitting, len(tc.pending), rep)
			}
		})
	}
	// A node's pod slots count like any resource.
	full := []FitNode{{"n", corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("1")}}}
	if rep := UnboundFitting(full, []FitPod{{Name: "a", Node: "n"}, {Name: "b", Requests: gpus(1)}}, nil); rep.Fitting != 0 {
		t.Errorf("pods capacity ignored: %s", rep)
	}
}

// TestInvariantsGather runs the invariants measurement on a fake clientset: a gang pending although
// a node has room must be reported.
func TestInvariantsGather(t *testing.T) {
	ready := corev1.NodeStatus{Allocatable: nodeAlloc(8), Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	pod := func(name, group, node string, g int64) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: corev1.PodSpec{NodeName: node, SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: &group},
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: gpus(g)}}}},
		}
	}
	cs := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: ready},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Status: ready},
		pod("a-0", "a", "n1", 8), pod("b-0", "b", "", 4), pod("b-1", "b", "", 4),
	)
	t0 := time.Now()
	tl := timeline.NewTimeline(nil)
	tl.Add(timeline.Event{Time: t0, Kind: timeline.PodGroupCreated, Phase: "p", Group: "a", Policy: "gang", MinCount: 1})
	tl.Add(timeline.Event{Time: t0, Kind: timeline.PodGroupCreated, Phase: "p", Group: "b", Policy: "gang", MinCount: 2})
	tl.Add(timeline.Event{Time: t0.Add(time.Second), Kind: timeline.PodBound, Phase: "p", Group: "a", Pod: "a-0", Node: "n1"})
	var notes []string
	env := &Env{Client: cs, Namespace: "ns", Timeline: tl, Measured: []string{"p"},
		Note: func(f string, a ...any) { notes = append(notes, f) }}
	m := newInvariants(env)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	items, err := m.Gather(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if u := item(t, items, ItemUnboundFitting); u.Data[Value] != 2 || u.Data["Pending"] != 2 {
		t.Errorf("unbound fitting: %v (gang b's 2 × 4 GPUs fit on n2)", u.Data)
	}
	if p := item(t, items, ItemPartialGangs); p.Data[Value] != 0 || p.Data["Gangs"] != 2 {
		t.Errorf("partial: %v", p.Data)
	}
	if s := item(t, items, ItemStatusRegressions); s.Data[Value] != 0 {
		t.Errorf("status: %v", s.Data)
	}
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "pods that fit were left unbound") {
		t.Errorf("notes: %q", notes)
	}
}

func TestRegistry(t *testing.T) {
	reg := Registry()
	for _, n := range Names() {
		if reg[n] == nil {
			t.Errorf("%s has no factory", n)
		}
	}
	if len(reg) != len(Names()) {
		t.Errorf("registry has %d entries, Names %d", len(reg), len(Names()))
	}
}

func TestFilterFamilies(t *testing.T) {
	text := readMetrics(t, "scheduler-after.txt")
	got := string(FilterFamilies(text, "scheduler_podgroup_scheduling_attempt_duration_seconds"))
	if strings.Contains(got, "scheduler_schedule_attempts_total") || strings.Contains(got, "scheduler_podgroup_schedule_attempts_total") {
		t.Errorf("other families kept:\n%s", got)
	}
	for _, want := range []string{"# TYPE scheduler_podgroup_scheduling_attempt_duration_seconds histogram", `_bucket{profile="default-scheduler",result="scheduled",le="0.004"} 5`, "_sum{", "_count{"} {
		if !strings.Contains(got, want) {
			t.Errorf("filtered text lacks %q", want)
		}
	}
	s, err := metrics.Parse([]byte(got))
	if err != nil || len(s.Families) != 1 {
		t.Errorf("filtered text parses into %v families: %v", s, err)
	}
	if n := len(FilterFamilies(text, "nonexistent")); n != 0 {
		t.Errorf("%d bytes kept for an absent family", n)
	}
}

func TestMetricDifferences(t *testing.T) {
	if d := MetricDifferences(37, 37); len(d) != 0 {
		t.Errorf("same minor: %v", d)
	}
	d := MetricDifferences(36, 37)
	if !strings.Contains(d["podGroupAttemptDuration"], "PATCH") {
		t.Errorf("v1.36 vs v1.37: %v, want podGroupAttemptDuration explained", d)
	}
	names := map[string]bool{}
	for _, h := range SchedulerHistograms() {
		names[h.Item] = true
	}
	for _, c := range SchedulerCounters() {
		names[c.Item] = true
	}
	for item := range d {
		if !names[item] {
			t.Errorf("difference for %q, which is no scheduler DataItem", item)
		}
	}
}

func TestCPUAt(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	s := []CPUSample{{at(0), 0}, {at(1000), time.Second}, {at(2000), 3 * time.Second}}
	for _, c := range []struct {
		ms   int
		want time.Duration
		ok   bool
	}{
		{0, 0, true},
		{250, 250 * time.Millisecond, true},
		{1500, 2 * time.Second, true},
		{2000, 3 * time.Second, true},
		{-1000, 0, false},
		{2001, 0, false},
	} {
		got, ok := CPUAt(s, at(c.ms))
		if got != c.want || ok != c.ok {
			t.Errorf("CPUAt(+%d ms) = %v, %v; want %v, %v", c.ms, got, ok, c.want, c.ok)
		}
	}
}

// TestSchedulerPerfWindow: from the first group's first bind to the last group's, over the pods of
// every group but the first placed; a group with nothing bound is not in it.
func TestSchedulerPerfWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	s := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	gs := []GroupTimes{
		{Group: "b", FirstBound: s(5), Bound: 1000},
		{Group: "a", FirstBound: s(2), Bound: 1000},
		{Group: "never", Bound: 0},
		{Group: "c", FirstBound: s(9), Bound: 998},
	}
	w, ok := SchedulerPerfWindow(gs)
	if !ok || !w.From.Equal(s(2)) || !w.To.Equal(s(9)) || w.Pods != 1998 {
		t.Errorf("window %+v %v, want 2 s to 9 s over 1998 pods", w, ok)
	}
	if _, ok := SchedulerPerfWindow(gs[:1]); ok {
		t.Error("one group is no window")
	}
}
