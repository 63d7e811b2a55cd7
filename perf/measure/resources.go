package measure

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/observe/procstat"
	"github.com/gangbench/gangbench/results"
)

// A benchmark on a shared 2-core machine measures the scheduler only as far as the scheduler got
// the CPU. This measurement says where the window's CPU seconds went (every component gangbench
// runs, and gangbench itself), their peak memory, and whether the scheduler was starved: how long
// its threads were runnable but waiting for a CPU, and how busy the machine's CPUs were.

// More items.
const (
	// ItemResources is one component's CPU time, CPU share, window peak RSS and run-queue wait;
	// label component.
	ItemResources = "resources"
	// ItemMachineCPU is the machine's CPUs during the window: how many cores were busy on average
	// (Value), of them how many the hypervisor took for others (StealCores), and the CPUs.
	ItemMachineCPU = "machineCPU"
	// Harness is the component label of gangbench's own process (load generator, watches, scrapes).
	Harness clusters.Component = "harness"
)

// rssEvery is how often resident memory is sampled for the window's peak (VmHWM is the peak since
// the process started, which for a cluster reused across scenarios is not this window's).
const rssEvery = 500 * time.Millisecond

// resolveEvery is how often the sampler asks the cluster for its processes again.
const resolveEvery = 5 * time.Second

// starvedShare: a scheduler whose threads waited for a CPU this fraction of the time they were
// runnable was limited by its neighbours, not by its own code.
const starvedShare = 0.2

// stolenCores: steal time of this many cores on average is noted; a tenth of a core is well above
// what an idle hypervisor takes and enough to move a binding rate.
const stolenCores = 0.1

type resources struct {
	env    *Env
	root   procstat.Root
	start  time.Time
	m0     procstat.Machine
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	started bool // the baseline sample is taken
	// first is each process's reading at the window's start (or when first seen, for a process
	// a fault started during the window); peak the component's largest summed RSS.
	first map[int]procstat.Usage
	last  map[int]procstat.Usage
	// owner is the component each pid was seen as, kept after the pid is gone: a scheduler killed by
	// a fault still counts with its last reading.
	owner map[int]clusters.Component
	peak  map[clusters.Component]int64
	// pids are the processes last resolved (only the sampler goroutine, or Start and Gather around
	// it, touch them).
	pids     map[clusters.Component][]int
	resolved time.Time
	// series is each component's CPU since the window's start at every sample, so the CPU of a part
	// of the window (scheduler_perf's, from the first group placed to the last) can be read off.
	series map[clusters.Component][]CPUSample
	now    func() time.Time // time.Now; a test's clock
}

func newResources(env *Env) Measurement { return &resources{env: env, root: procstat.Proc} }

func (m *resources) Start(ctx context.Context) error {
	m.first, m.last, m.owner, m.peak = map[int]procstat.Usage{}, map[int]procstat.Usage{}, map[int]clusters.Component{}, map[clusters.Component]int64{}
	m.series = map[clusters.Component][]CPUSample{}
	if m.now == nil {
		m.now = time.Now
	}
	mc, err := m.root.ReadMachine()
	if err != nil {
		return fmt.Errorf("resources: %w", err)
	}
	m.m0 = mc
	if err := m.sample(ctx, true); err != nil {
		return fmt.Errorf("resources: %w", err)
	}
	m.started = true
	m.start = m.now()
	sctx, cancel := context.WithCancel(ctx)
	m.cancel, m.done = cancel, make(chan struct{})
	go func() {
		defer close(m.done)
		tick := time.NewTicker(rssEvery)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-tick.C:
				_ = m.sample(sctx, false) // a failed sample only makes the peak coarser; the last one reports errors
			}
		}
	}()
	return nil
}

// sample reads every process once: the first reading of a process is its baseline, the latest
// its end, and each component's summed RSS feeds its peak.
func (m *resources) sample(ctx context.Context, resolve bool) error {
	// Finding the processes costs more than reading them (on kind: engine commands and a walk of
	// /proc), so it is done at the window's ends and every resolveEvery in between, which is often
	// enough to see a component a fault restarted or a container a pod started.
	if resolve || m.pids == nil || time.Since(m.resolved) >= resolveEvery {
		pids := map[clusters.Component][]int{}
		if m.env.Cluster != nil && m.env.Cluster.Processes != nil {
			p, err := m.env.Cluster.Processes(ctx)
			if err != nil && len(p) == 0 {
				return err
			}
			maps.Copy(pids, p)
		}
		pids[Harness] = []int{os.Getpid()}
		m.pids, m.resolved = pids, time.Now()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for c, ps := range m.pids {
		var rss int64
		for _, pid := range ps {
			u, err := m.root.Read(pid)
			if err != nil {
				continue // exited (a fault, a finished container); its CPU up to the last reading counts
			}
			m.owner[pid] = c
			if f, ok := m.first[pid]; !ok || f.Start != u.Start {
				// Seen at the window's start: that reading is the baseline. Seen first later (a
				// component a fault restarted, a pod's container): it started inside the window,
				// so all it spent counts.
				base := procstat.Usage{Start: u.Start}
				if !m.started {
					base = u
				}
				m.first[pid] = base
			}
			m.last[pid] = u
			rss += u.RSS
		}
		m.peak[c] = max(m.peak[c], rss)
	}
	now := m.now()
	cum := map[clusters.Component]time.Duration{}
	for pid, u := range m.last {
		cum[m.owner[pid]] += u.CPU - m.first[pid].CPU
	}
	for c, cpu := range cum {
		m.series[c] = append(m.series[c], CPUSample{At: now, CPU: cpu})
	}
	return nil
}

// schedulerPerfWindowCPU is each component's CPU in scheduler_perf's part of the window and that
// part; false when the timeline has no such part or the samples do not cover it.
func (m *resources) schedulerPerfWindowCPU() (map[clusters.Component]time.Duration, GroupWindow, bool) {
	if m.env.Timeline == nil {
		return nil, GroupWindow{}, false
	}
	w, ok := SchedulerPerfWindow(Groups(m.env.Timeline.Events(), m.env.Measured))
	if !ok {
		return nil, w, false
	}
	out := map[clusters.Component]time.Duration{}
	for c, s := range m.series {
		from, ok0 := CPUAt(s, w.From)
		to, ok1 := CPUAt(s, w.To)
		if !ok0 || !ok1 {
			// A component first seen inside the window (a restarted one) has no reading at its
			// start; all it spent up to the end counts, as in the whole window's figure.
			if ok1 && len(s) > 0 && s[0].At.After(w.From) {
				out[c] = to
				continue
			}
			return nil, w, false
		}
		out[c] = to - from
	}
	return out, w, true
}

func (m *resources) Gather(ctx context.Context) ([]results.DataItem, error) {
	m.cancel()
	<-m.done
	if err := m.sample(ctx, true); err != nil {
		return nil, fmt.Errorf("resources: %w", err)
	}
	wall := m.now().Sub(m.start)
	inWindow, pw, hasWindow := m.schedulerPerfWindowCPU()
	mc, err := m.root.ReadMachine()
	if err != nil {
		return nil, fmt.Errorf("resources: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	type acc struct {
		cpu, wait time.Duration
		procs     int
	}
	per := map[clusters.Component]*acc{}
	for pid, last := range m.last {
		c := m.owner[pid]
		a := per[c]
		if a == nil {
			a = &acc{}
			per[c] = a
		}
		f := m.first[pid]
		a.cpu += last.CPU - f.CPU
		a.wait += last.Wait - f.Wait
		a.procs++
	}
	var items []results.DataItem
	for _, c := range slices.Sorted(maps.Keys(per)) {
		a := per[c]
		items = append(items, results.DataItem{Name: ItemResources, Labels: map[string]string{"component": string(c)}, Data: map[string]float64{
			"CPUSeconds":  a.cpu.Seconds(),
			"CPUShare":    a.cpu.Seconds() / max(wall.Seconds(), 1e-9),
			"PeakRSSMiB":  float64(m.peak[c]) / (1 << 20),
			"WaitSeconds": a.wait.Seconds(),
			"Processes":   float64(a.procs),
		}})
		if hasWindow {
			items[len(items)-1].Data["CPUSecondsSchedulerPerfWindow"] = inWindow[c].Seconds()
		}
	}
	// Busy cores from the counters alone (busy share of all CPU time, times the CPUs), so that the
	// figure does not depend on how the harness's own clock lines up with the kernel's ticks.
	busy, steal := 0.0, 0.0
	if dt := mc.Total - m.m0.Total; dt > 0 {
		busy = float64(mc.CPUs) * (mc.Busy - m.m0.Busy).Seconds() / dt.Seconds()
		steal = float64(mc.CPUs) * (mc.Steal - m.m0.Steal).Seconds() / dt.Seconds()
	}
	items = append(items, results.DataItem{Name: ItemMachineCPU, Unit: "cores", Data: map[string]float64{
		Value: busy, "StealCores": steal, "CPUs": float64(mc.CPUs), "WindowSeconds": wall.Seconds(),
	}})
	if hasWindow {
		// The part of the window perf reference charges scheduler_perf's CPU to, so the two tools'
		// CPU per pod can be compared over the same stretch of work.
		items[len(items)-1].Data["SchedulerPerfWindowSeconds"] = pw.To.Sub(pw.From).Seconds()
		items[len(items)-1].Data["SchedulerPerfWindowPods"] = float64(pw.Pods)
	}
	if m.env.Timeline != nil && m.env.Scenario != nil {
		items = append(items, phaseCPUItems(m.series[clusters.Scheduler], m.env.Timeline.Events(), m.env.Scenario, m.env.Measured, m.env.note)...)
	}
	if steal >= stolenCores {
		// Stolen time counts as busy but ran none of the cluster: the same work then takes longer
		// on the wall clock than on a machine of its own.
		m.env.note("the host took %.2f of this machine's %d cores on average during the window (steal time): the figures are slower than the machine alone would give", steal, mc.CPUs)
	}
	if s := per[clusters.Scheduler]; s != nil {
		if run := s.cpu + s.wait; run > 0 && s.wait.Seconds()/run.Seconds() >= starvedShare {
			m.env.note("the scheduler was CPU-starved: its threads waited %.1f s for a CPU while runnable, against %.1f s running (%.0f%% of its runnable time); the figures measure the machine as much as the scheduler", s.wait.Seconds(), s.cpu.Seconds(), 100*s.wait.Seconds()/run.Seconds())
		}
	}
	if mc.CPUs > 0 && busy >= 0.9*float64(mc.CPUs) {
		m.env.note("the machine's CPUs were saturated during the window: %.2f of %d cores busy on average", busy, mc.CPUs)
	}
	return items, nil
}
