package measure

import (
	"context"
	"fmt"

	dto "github.com/prometheus/client_model/go"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/observe/metrics"
	"github.com/gangbench/gangbench/results"
)

// The resource table says how much CPU a component spent in a window, not why. On a saturated
// machine the same apiserver binary spent 1.5× the CPU per pod in one window as in the next, with
// the same requests; its Go runtime's own counters (runtime/metrics, which every Kubernetes
// component serves on /metrics) tell a window that did more work (more bytes allocated, more
// goroutines, more GC cycles) from one that did the same work slower (the same allocation, a longer
// wait for a thread or a lock).

const (
	// GoRuntime is the measurement's name.
	GoRuntime = "goRuntime"
	// ItemGoRuntime is one component's Go runtime over the window; label component. Data:
	// AllocMiBPerPod and GoroutinesPerPod (heap bytes allocated and goroutines created, per
	// measured pod), GCCycles and GCCPUSeconds (collections and the CPU the collector spent),
	// MutexWaitSeconds (goroutines blocked on a sync.Mutex or RWMutex), SchedDelayMs (the mean time a
	// goroutine waited runnable for a thread), and StackStartKiB (the initial goroutine stack at the
	// window's end, which the runtime sizes from the average stack it saw). A field whose metric
	// the component does not serve (an older Go) is left out.
	ItemGoRuntime = "goRuntime"
)

// The runtime/metrics families, as client_golang names them.
const (
	goAllocBytes      = "go_gc_heap_allocs_bytes_total"
	goGCCycles        = "go_gc_cycles_total_gc_cycles_total"
	goGCCPU           = "go_cpu_classes_gc_total_cpu_seconds_total"
	goGoroutines      = "go_sched_goroutines_created_goroutines_total"
	goMutexWait       = "go_sync_mutex_wait_total_seconds_total"
	goSchedLatency    = "go_sched_latencies_seconds"
	goStackStartBytes = "go_gc_stack_starting_size_bytes"
)

func goRuntimeFamilies() []string {
	return []string{goAllocBytes, goGCCycles, goGCCPU, goGoroutines, goMutexWait, goSchedLatency, goStackStartBytes}
}

type goRuntime struct {
	env    *Env
	before map[clusters.Component]*metrics.Snapshot
}

func newGoRuntime(env *Env) Measurement { return &goRuntime{env: env} }

// endpoints are the components whose /metrics the harness reads: the apiserver always, the
// scheduler where its endpoint is reachable.
func (m *goRuntime) endpoints() map[clusters.Component]clusters.Endpoint {
	eps := map[clusters.Component]clusters.Endpoint{clusters.APIServer: m.env.Cluster.APIServerMetrics}
	if m.env.Cluster.SchedulerMetrics.URL != "" {
		eps[clusters.Scheduler] = m.env.Cluster.SchedulerMetrics
	}
	return eps
}

func (m *goRuntime) Start(ctx context.Context) error {
	m.before = map[clusters.Component]*metrics.Snapshot{}
	for c, ep := range m.endpoints() {
		s, err := scrape(ctx, ep, goRuntimeFamilies()...)
		if err != nil {
			return fmt.Errorf("%s: %s metrics before the run: %w", GoRuntime, c, err)
		}
		m.before[c] = s
	}
	return nil
}

func (m *goRuntime) Gather(ctx context.Context) ([]results.DataItem, error) {
	pods := measuredPods(m.env.Timeline.Events(), m.env.Measured)
	if pods == 0 {
		return nil, nil
	}
	var items []results.DataItem
	for _, c := range []clusters.Component{clusters.APIServer, clusters.Scheduler} {
		before := m.before[c]
		if before == nil {
			continue
		}
		if m.env.Restarted[c] {
			m.env.note("%s: %s was restarted by a fault during the window; its runtime counters restarted from zero, so none are reported", GoRuntime, c)
			continue
		}
		after, err := scrape(ctx, m.endpoints()[c], goRuntimeFamilies()...)
		if err != nil {
			return nil, fmt.Errorf("%s: %s metrics after the run: %w", GoRuntime, c, err)
		}
		if it, ok := GoRuntimeItem(c, before, after, pods); ok {
			items = append(items, it)
		}
	}
	return items, nil
}

// GoRuntimeItem computes one component's item from two scrapes of its /metrics around a window in
// which pods were measured; false when the component serves none of the families.
func GoRuntimeItem(c clusters.Component, before, after *metrics.Snapshot, pods int) (results.DataItem, bool) {
	data := map[string]float64{}
	delta := func(name string) (float64, bool) {
		b, okB := scalar(before, name)
		a, okA := scalar(after, name)
		return a - b, okA && okB
	}
	if d, ok := delta(goAllocBytes); ok {
		data["AllocMiBPerPod"] = d / (1 << 20) / float64(pods)
	}
	if d, ok := delta(goGoroutines); ok {
		data["GoroutinesPerPod"] = d / float64(pods)
	}
	if d, ok := delta(goGCCycles); ok {
		data["GCCycles"] = d
	}
	if d, ok := delta(goGCCPU); ok {
		data["GCCPUSeconds"] = d
	}
	if d, ok := delta(goMutexWait); ok {
		data["MutexWaitSeconds"] = d
	}
	sb, nb, okB := histogramTotals(before, goSchedLatency)
	sa, na, okA := histogramTotals(after, goSchedLatency)
	if okB && okA && na > nb {
		data["SchedDelayMs"] = (sa - sb) / float64(na-nb) * 1000
	}
	if v, ok := scalar(after, goStackStartBytes); ok {
		data["StackStartKiB"] = v / 1024
	}
	if len(data) == 0 {
		return results.DataItem{}, false
	}
	return results.DataItem{Name: ItemGoRuntime, Labels: map[string]string{"component": string(c)}, Data: data}, true
}

// scalar is the value of a family's single unlabelled series, counter or gauge.
func scalar(s *metrics.Snapshot, name string) (float64, bool) {
	mf := s.Families[name]
	if mf == nil || len(mf.GetMetric()) != 1 {
		return 0, false
	}
	m := mf.GetMetric()[0]
	switch mf.GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue(), true
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue(), true
	case dto.MetricType_UNTYPED:
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}

// histogramTotals is the sum and count of a family's single histogram series.
func histogramTotals(s *metrics.Snapshot, name string) (float64, uint64, bool) {
	mf := s.Families[name]
	if mf == nil || len(mf.GetMetric()) != 1 || mf.GetType() != dto.MetricType_HISTOGRAM {
		return 0, 0, false
	}
	h := mf.GetMetric()[0].GetHistogram()
	return h.GetSampleSum(), h.GetSampleCount(), true
}
