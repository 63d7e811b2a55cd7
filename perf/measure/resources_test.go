package measure

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/observe/procstat"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/results"
)

// fakeProc writes a /proc of its own: a process's CPU ticks, RSS and run-queue wait, and the machine's.
type fakeProc struct {
	t   *testing.T
	dir string
}

func (f fakeProc) write(rel, body string) {
	f.t.Helper()
	p := filepath.Join(f.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// proc sets pid's CPU (ticks of 10 ms), RSS (MiB), wait (ms) and start time.
func (f fakeProc) proc(pid, ticks, rssMiB, waitMS, start int) {
	f.write(fmt.Sprintf("%d/stat", pid), fmt.Sprintf("%d (x) S 1 1 1 0 -1 0 0 0 0 0 %d 0 0 0 20 0 4 0 %d 1000 100\n", pid, ticks, start))
	f.write(fmt.Sprintf("%d/status", pid), fmt.Sprintf("VmHWM:\t%d kB\nVmRSS:\t%d kB\n", 4*rssMiB<<10, rssMiB<<10))
	f.write(fmt.Sprintf("%d/task/%d/schedstat", pid, pid), fmt.Sprintf("0 %d 1\n", waitMS*1_000_000))
}

func (f fakeProc) machine(busyTicks, idleTicks int) { f.machineStolen(busyTicks, idleTicks, 0) }

// machineStolen: busyTicks of user time and stealTicks stolen by the host besides.
func (f fakeProc) machineStolen(busyTicks, idleTicks, stealTicks int) {
	f.write("stat", fmt.Sprintf("cpu  %d 0 0 %d 0 0 0 %d 0 0\ncpu0 0\ncpu1 0\n", busyTicks, idleTicks, stealTicks))
}

func resourceItem(t *testing.T, items []results.DataItem, component string) results.DataItem {
	t.Helper()
	for _, d := range items {
		if d.Name == ItemResources && d.Labels["component"] == component {
			return d
		}
	}
	t.Fatalf("no %s item for %s in %+v", ItemResources, component, items)
	return results.DataItem{}
}

func TestResources(t *testing.T) {
	f := fakeProc{t: t, dir: t.TempDir()}
	f.proc(100, 1000, 50, 0, 7) // scheduler: 10 s CPU before the window
	f.proc(200, 500, 300, 0, 7) // apiserver
	f.machine(10000, 10000)
	pids := map[clusters.Component][]int{clusters.Scheduler: {100}, clusters.APIServer: {200}}
	var notes []string
	env := &Env{
		Cluster: &clusters.Cluster{Processes: func(context.Context) (map[clusters.Component][]int, error) { return pids, nil }},
		Note:    func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) },
	}
	m := &resources{env: env, root: procstat.Root(f.dir)}
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// During the window the scheduler runs 2 s and waits 1 s for a CPU; its RSS peaks at 80 MiB and
	// falls back to 60. A fault restarts the apiserver: the old process ran 1 s more before it died,
	// the new one (another start time under a new pid) 0.5 s.
	f.proc(100, 1200, 80, 1000, 7)
	f.proc(200, 600, 300, 0, 7)
	if err := m.sample(ctx, true); err != nil {
		t.Fatal(err)
	}
	f.proc(100, 1200, 60, 1000, 7)
	if err := os.RemoveAll(filepath.Join(f.dir, "200")); err != nil {
		t.Fatal(err)
	}
	f.proc(300, 50, 200, 0, 99)
	pids = map[clusters.Component][]int{clusters.Scheduler: {100}, clusters.APIServer: {300}}
	f.machine(19000, 11000) // both cores: 9000 busy ticks of 10 ms = 90 s over the window
	items, err := m.Gather(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := resourceItem(t, items, string(clusters.Scheduler))
	if !near(s.Data["CPUSeconds"], 2) || !near(s.Data["WaitSeconds"], 1) || s.Data["PeakRSSMiB"] != 80 {
		t.Errorf("scheduler: %v, want 2 s CPU, 1 s wait, 80 MiB window peak (not VmHWM's 320)", s.Data)
	}
	a := resourceItem(t, items, string(clusters.APIServer))
	if !near(a.Data["CPUSeconds"], 1.5) || a.Data["Processes"] != 2 {
		t.Errorf("apiserver: %v, want 1 s of the old process plus 0.5 s of the new one", a.Data)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "the machine's CPUs were saturated during the window: 1.80 of 2 cores") {
		t.Errorf("notes %q lack the saturated machine", notes)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "the scheduler was CPU-starved: its threads waited 1.0 s") {
		t.Errorf("a scheduler waiting a third of its runnable time must be reported starved; notes: %q", notes)
	}
	var machine *results.DataItem
	for i := range items {
		if items[i].Name == ItemMachineCPU {
			machine = &items[i]
		}
	}
	// 9000 busy ticks of 10000: 1.8 of 2 cores, which is saturated.
	if machine == nil || machine.Data["CPUs"] != 2 || !near(machine.Data[Value], 1.8) {
		t.Errorf("machine: %+v", machine)
	}
}

// TestResourcesNotStarved: a scheduler that rarely waited is not reported starved.
func TestResourcesNotStarved(t *testing.T) {
	f := fakeProc{t: t, dir: t.TempDir()}
	f.proc(100, 0, 50, 0, 7)
	f.machine(0, 10000)
	var notes []string
	env := &Env{
		Cluster: &clusters.Cluster{Processes: func(context.Context) (map[clusters.Component][]int, error) {
			return map[clusters.Component][]int{clusters.Scheduler: {100}}, nil
		}},
		Note: func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) },
	}
	m := &resources{env: env, root: procstat.Root(f.dir)}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.proc(100, 300, 50, 100, 7) // 3 s running, 0.1 s waiting
	f.machine(300, 10300)        // half the CPU time busy: one of two cores
	if _, err := m.Gather(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(notes) != 0 {
		t.Errorf("notes %q, want none", notes)
	}
}

// TestResourcesSteal: time the host took from this machine during the window is reported, and noted
// once it is a tenth of a core or more; the busy cores include it.
func TestResourcesSteal(t *testing.T) {
	for _, tc := range []struct {
		steal     int // ticks stolen during a window of 20000 ticks on 2 CPUs
		wantCores float64
		noted     bool
	}{
		{steal: 0, wantCores: 0},
		{steal: 500, wantCores: 0.05},
		{steal: 2000, wantCores: 0.2, noted: true},
	} {
		f := fakeProc{t: t, dir: t.TempDir()}
		f.machineStolen(0, 10000, 0)
		var notes []string
		env := &Env{
			Cluster: &clusters.Cluster{Processes: func(context.Context) (map[clusters.Component][]int, error) { return nil, nil }},
			Note:    func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) },
		}
		m := &resources{env: env, root: procstat.Root(f.dir)}
		if err := m.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		f.machineStolen(5000, 25000-tc.steal, tc.steal)
		items, err := m.Gather(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var machine results.DataItem
		for _, d := range items {
			if d.Name == ItemMachineCPU {
				machine = d
			}
		}
		if !near(machine.Data["StealCores"], tc.wantCores) || !near(machine.Data[Value], 0.5+tc.wantCores) {
			t.Errorf("steal %d ticks: machine %v, want %.2f cores stolen, %.2f busy", tc.steal, machine.Data, tc.wantCores, 0.5+tc.wantCores)
		}
		noted := strings.Contains(strings.Join(notes, "\n"), fmt.Sprintf("the host took %.2f of this machine's 2 cores", tc.wantCores))
		if noted != tc.noted {
			t.Errorf("steal %d ticks: noted %v, want %v (notes %q)", tc.steal, noted, tc.noted, notes)
		}
	}
}

// TestResourcesSchedulerPerfWindow: besides the whole window, each component's CPU from the first
// group's first bind to the last group's, read off the samples between them, and that stretch's
// length and pods (those of the groups after the first).
func TestResourcesSchedulerPerfWindow(t *testing.T) {
	f := fakeProc{t: t, dir: t.TempDir()}
	f.proc(100, 1000, 50, 0, 7)
	f.machine(10000, 10000)
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	var clock atomic.Int64 // ms after t0
	tl := timeline.NewTimeline(nil)
	env := &Env{
		Cluster: &clusters.Cluster{Processes: func(context.Context) (map[clusters.Component][]int, error) {
			return map[clusters.Component][]int{clusters.Scheduler: {100}}, nil
		}},
		Timeline: tl, Measured: []string{"p"},
		Note: func(string, ...any) {},
	}
	m := &resources{env: env, root: procstat.Root(f.dir), now: func() time.Time { return t0.Add(time.Duration(clock.Load()) * time.Millisecond) }}
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The scheduler spends 1 s in the first second, 2 s in the second, 1 s in the third.
	for _, step := range []struct{ ms, ticks int }{{1000, 1100}, {2000, 1300}} {
		clock.Store(int64(step.ms))
		f.proc(100, step.ticks, 50, 0, 7)
		if err := m.sample(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, e := range []timeline.Event{
		{Time: at(-100), Kind: timeline.PodGroupCreated, Phase: "p", Group: "a", Policy: "gang", MinCount: 2},
		{Time: at(-50), Kind: timeline.PodGroupCreated, Phase: "p", Group: "b", Policy: "gang", MinCount: 3},
		{Time: at(500), Kind: timeline.PodBound, Phase: "p", Group: "a", Pod: "a-0"},
		{Time: at(600), Kind: timeline.PodBound, Phase: "p", Group: "a", Pod: "a-1"},
		{Time: at(1500), Kind: timeline.PodBound, Phase: "p", Group: "b", Pod: "b-0"},
		{Time: at(1600), Kind: timeline.PodBound, Phase: "p", Group: "b", Pod: "b-1"},
		{Time: at(2500), Kind: timeline.PodBound, Phase: "p", Group: "b", Pod: "b-2"},
	} {
		tl.Add(e)
	}
	clock.Store(3000)
	f.proc(100, 1400, 50, 0, 7)
	items, err := m.Gather(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// CPU at 0.5 s: 0.5 s; at 1.5 s: 2 s. The window is 1 s long and holds b's 3 pods.
	s := resourceItem(t, items, string(clusters.Scheduler))
	if !near(s.Data["CPUSeconds"], 4) || !near(s.Data["CPUSecondsSchedulerPerfWindow"], 1.5) {
		t.Errorf("scheduler: %v, want 4 s in the window and 1.5 s from a's first bind to b's", s.Data)
	}
	for _, d := range items {
		if d.Name == ItemMachineCPU && (!near(d.Data["SchedulerPerfWindowSeconds"], 1) || d.Data["SchedulerPerfWindowPods"] != 3) {
			t.Errorf("machine: %v, want a 1 s stretch over 3 pods", d.Data)
		}
	}
}
