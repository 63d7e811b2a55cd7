package measure

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/observe/metrics"
	"github.com/gangbench/gangbench/observe/timeline"
)

// goRuntimeText is a component's runtime families as client_golang serves them, with the counters
// at the given values (the scheduling latency histogram reduced to one bucket).
func goRuntimeText(allocBytes, gcCycles, gcCPU, goroutines, mutexWait, latSum float64, latCount int, stackStart float64) []byte {
	return fmt.Appendf(nil, `# HELP go_gc_heap_allocs_bytes_total Cumulative sum of memory allocated to the heap by the application.
# TYPE go_gc_heap_allocs_bytes_total counter
go_gc_heap_allocs_bytes_total %g
# HELP go_gc_cycles_total_gc_cycles_total Count of all completed GC cycles.
# TYPE go_gc_cycles_total_gc_cycles_total counter
go_gc_cycles_total_gc_cycles_total %g
# HELP go_cpu_classes_gc_total_cpu_seconds_total Estimated total CPU time spent performing GC tasks.
# TYPE go_cpu_classes_gc_total_cpu_seconds_total counter
go_cpu_classes_gc_total_cpu_seconds_total %g
# HELP go_sched_goroutines_created_goroutines_total Count of goroutines created since program start.
# TYPE go_sched_goroutines_created_goroutines_total counter
go_sched_goroutines_created_goroutines_total %g
# HELP go_sync_mutex_wait_total_seconds_total Approximate cumulative time goroutines have spent blocked on a sync.Mutex.
# TYPE go_sync_mutex_wait_total_seconds_total counter
go_sync_mutex_wait_total_seconds_total %g
# HELP go_sched_latencies_seconds Distribution of the time goroutines have spent in the scheduler in a runnable state before actually running.
# TYPE go_sched_latencies_seconds histogram
go_sched_latencies_seconds_bucket{le="+Inf"} %d
go_sched_latencies_seconds_sum %g
go_sched_latencies_seconds_count %d
# HELP go_gc_stack_starting_size_bytes The stack size of new goroutines.
# TYPE go_gc_stack_starting_size_bytes gauge
go_gc_stack_starting_size_bytes %g
# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 2470
`, allocBytes, gcCycles, gcCPU, goroutines, mutexWait, latCount, latSum, latCount, stackStart)
}

func parsed(t *testing.T, b []byte) *metrics.Snapshot {
	t.Helper()
	s, err := metrics.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGoRuntimeItem(t *testing.T) {
	before := parsed(t, goRuntimeText(100<<20, 10, 1.5, 1000, 0.25, 2, 4000, 4096))
	// 300 MiB allocated, 12 cycles, 2 GC CPU seconds, 6000 goroutines, 0.75 s of mutex wait and
	// 1000 more scheduling delays summing to 0.5 s: 0.5 ms each.
	after := parsed(t, goRuntimeText(400<<20, 22, 3.5, 7000, 1.0, 2.5, 5000, 8192))
	it, ok := GoRuntimeItem(clusters.APIServer, before, after, 3000)
	if !ok {
		t.Fatal("no item from two full scrapes")
	}
	want := map[string]float64{"AllocMiBPerPod": 0.1, "GoroutinesPerPod": 2, "GCCycles": 12, "GCCPUSeconds": 2,
		"MutexWaitSeconds": 0.75, "SchedDelayMs": 0.5, "StackStartKiB": 8}
	for k, v := range want {
		if !near(it.Data[k], v) {
			t.Errorf("%s = %v, want %v (all: %v)", k, it.Data[k], v, it.Data)
		}
	}
	if len(it.Data) != len(want) || it.Labels["component"] != string(clusters.APIServer) {
		t.Errorf("item %v", it)
	}

	// A component built with an older Go serves some families only: the others are left out, not
	// reported as zero.
	old := []byte("# TYPE go_gc_cycles_total_gc_cycles_total counter\ngo_gc_cycles_total_gc_cycles_total 5\n")
	older := []byte("# TYPE go_gc_cycles_total_gc_cycles_total counter\ngo_gc_cycles_total_gc_cycles_total 9\n")
	it, ok = GoRuntimeItem(clusters.Scheduler, parsed(t, old), parsed(t, older), 10)
	if !ok || len(it.Data) != 1 || it.Data["GCCycles"] != 4 {
		t.Errorf("older Go: %v, %v", it, ok)
	}
	if _, ok := GoRuntimeItem(clusters.Scheduler, parsed(t, nil), parsed(t, nil), 10); ok {
		t.Error("an item from scrapes without runtime families")
	}
}

// TestGoRuntimeMeasurement scrapes a fake apiserver and scheduler around a window of 1000 created
// pods, and leaves out a component a fault restarted.
func TestGoRuntimeMeasurement(t *testing.T) {
	for _, restarted := range []bool{false, true} {
		t.Run(fmt.Sprintf("schedulerRestarted=%v", restarted), func(t *testing.T) {
			tl := timeline.NewTimeline(nil)
			var notes []string
			env := &Env{
				Cluster: &clusters.Cluster{
					APIServerMetrics: fixtureServer(t, goRuntimeText(0, 0, 0, 0, 0, 0, 0, 2048), goRuntimeText(1000<<20, 40, 4, 5000, 0, 0, 0, 2048)),
					SchedulerMetrics: fixtureServer(t, goRuntimeText(0, 0, 0, 0, 0, 0, 0, 2048), goRuntimeText(500<<20, 20, 2, 3000, 0, 0, 0, 2048)),
				},
				Timeline: tl, Measured: []string{"gangs"},
				Note:      func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) },
				Restarted: map[clusters.Component]bool{clusters.Scheduler: restarted},
			}
			m := newGoRuntime(env)
			ctx := context.Background()
			if err := m.Start(ctx); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			for i := range 1000 {
				tl.Add(timeline.Event{Time: now, Kind: timeline.PodCreated, Phase: "gangs", Pod: fmt.Sprint("p", i)})
			}
			// A prefill pod is not measured.
			tl.Add(timeline.Event{Time: now, Kind: timeline.PodCreated, Phase: "prefill", Pod: "f"})
			items, err := m.Gather(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			for _, it := range items {
				got[it.Labels["component"]] = it.Data["AllocMiBPerPod"]
			}
			want := map[string]float64{string(clusters.APIServer): 1, string(clusters.Scheduler): 0.5}
			if restarted {
				delete(want, string(clusters.Scheduler))
				if len(notes) != 1 || !strings.Contains(notes[0], "kube-scheduler was restarted") {
					t.Errorf("notes %q", notes)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("items for %v, want %v", got, want)
			}
			for c, v := range want {
				if !near(got[c], v) {
					t.Errorf("%s: %v MiB per pod, want %v", c, got[c], v)
				}
			}
		})
	}
}
