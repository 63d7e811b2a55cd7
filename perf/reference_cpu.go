package perf

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gangbench/gangbench/observe/procstat"
	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/results"
)

// Where the CPU goes per pod, on both sides. On a 2-core machine both tools keep the two cores busy
// during their window, so their binding rates stand in the inverse ratio of the CPU each spends per
// pod bound: how much work gangbench's separate processes (TLS, authentication, watches, kwok, the
// controller-manager, the harness) add to what scheduler_perf's one process (scheduler, apiserver,
// its etcd) does for the same pods.

// RefCPUPerPod is the reference metric for scheduler_perf's CPU per pod bound (ms): the CPU of the
// benchmark process and its etcd between its first and last "Successfully scheduled a pod group"
// log line, over the pods the groups after the first one placed. Data: Average (ms), Cores (average
// busy cores of the process group in that window), WindowSeconds, Pods.
const RefCPUPerPod = "cpuPerPod"

// cpuSampleEvery is how often the reference's process tree is read: /proc counts CPU in 10 ms
// ticks, and a window of a few seconds then still has tens of samples to interpolate between.
const cpuSampleEvery = 100 * time.Millisecond

// treeCPU samples the CPU of a process and its descendants until stopped. A process that exits
// keeps its last reading, so the total never falls.
type treeCPU struct {
	root    procstat.Root
	pid     int
	mu      sync.Mutex
	last    map[int]procstat.Usage
	reused  time.Duration // CPU of processes whose pid another process has taken since
	samples []measure.CPUSample
	stop    chan struct{}
	done    chan struct{}
}

func startTreeCPU(root procstat.Root, pid int) *treeCPU {
	t := &treeCPU{root: root, pid: pid, last: map[int]procstat.Usage{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(t.done)
		tick := time.NewTicker(cpuSampleEvery)
		defer tick.Stop()
		for {
			t.sample()
			select {
			case <-t.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return t
}

func (t *treeCPU) sample() {
	pids, err := t.root.Descendants(t.pid)
	if err != nil {
		return // the benchmark ended; its last readings stand
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, pid := range append(pids, t.pid) {
		u, err := t.root.Read(pid)
		if err != nil {
			continue
		}
		if prev, ok := t.last[pid]; ok && prev.Start != u.Start {
			t.reused += prev.CPU // another process has the pid now; the old one's CPU still counts
		}
		t.last[pid] = u
	}
	total := t.reused
	for _, u := range t.last {
		total += u.CPU
	}
	t.samples = append(t.samples, measure.CPUSample{At: time.Now(), CPU: total})
}

// Stop ends the sampling and returns the samples, oldest first, the last one taken now.
func (t *treeCPU) Stop() []measure.CPUSample {
	close(t.stop)
	<-t.done
	t.sample()
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.samples)
}

// groupLog collects the scheduler's "Successfully scheduled a pod group" lines from scheduler_perf's
// output (klog text at its default -v=2): when, and how many pods each placed.
type groupLog struct {
	year    int
	partial []byte
	groups  []scheduledGroup
}

type scheduledGroup struct {
	at   time.Time
	pods int
}

// scheduledGroupLine matches klog's header ("I1203 06:10:00.123456  4242 file.go:896] ") and the
// message; the test output may indent the line.
var scheduledGroupLine = regexp.MustCompile(`I(\d{4} \d{2}:\d{2}:\d{2}\.\d{6})\s+\d+ [^\]]*\] "Successfully scheduled a pod group".*\bscheduledPods=(\d+)`)

func (g *groupLog) Write(p []byte) (int, error) {
	g.partial = append(g.partial, p...)
	for {
		i := bytes.IndexByte(g.partial, '\n')
		if i < 0 {
			break
		}
		g.line(g.partial[:i])
		g.partial = g.partial[i+1:]
	}
	return len(p), nil
}

func (g *groupLog) line(l []byte) {
	m := scheduledGroupLine.FindSubmatch(l)
	if m == nil {
		return
	}
	// klog writes neither the year nor the zone: the run's year, the machine's zone.
	at, err := time.ParseInLocation("2006 0102 15:04:05.000000", strconv.Itoa(g.year)+" "+string(m[1]), time.Local)
	if err != nil {
		return
	}
	n, _ := strconv.Atoi(string(m[2]))
	g.groups = append(g.groups, scheduledGroup{at: at, pods: n})
}

// referenceCPU is scheduler_perf's CPU per pod from its samples and its scheduled groups, as the
// data item of RefCPUPerPod; false when the log has fewer than two groups or the samples do not
// cover their window.
func referenceCPU(samples []measure.CPUSample, groups []scheduledGroup) (results.DataItem, bool) {
	if len(groups) < 2 {
		return results.DataItem{}, false
	}
	groups = slices.Clone(groups)
	slices.SortStableFunc(groups, func(a, b scheduledGroup) int { return a.at.Compare(b.at) })
	first, last := groups[0], groups[len(groups)-1]
	pods := 0
	for _, g := range groups[1:] {
		pods += g.pods
	}
	c0, ok0 := measure.CPUAt(samples, first.at)
	c1, ok1 := measure.CPUAt(samples, last.at)
	window := last.at.Sub(first.at)
	if !ok0 || !ok1 || pods == 0 || window <= 0 {
		return results.DataItem{}, false
	}
	cpu := c1 - c0
	return results.DataItem{Unit: "ms", Labels: map[string]string{"Metric": RefCPUPerPod}, Data: map[string]float64{
		"Average":       1000 * cpu.Seconds() / float64(pods),
		"Cores":         cpu.Seconds() / window.Seconds(),
		"WindowSeconds": window.Seconds(),
		"Pods":          float64(pods),
	}}, true
}

// measureReferenceCPU starts sampling the benchmark's process tree; the returned function stops it
// and adds RefCPUPerPod to res when the log allowed a window.
func measureReferenceCPU(ctx context.Context, pid int, log *groupLog) func(res *ReferenceResult) {
	t := startTreeCPU(procstat.Proc, pid)
	return func(res *ReferenceResult) {
		samples := t.Stop()
		if res == nil || ctx.Err() != nil {
			return
		}
		if it, ok := referenceCPU(samples, log.groups); ok {
			res.Items[RefCPUPerPod] = it
		}
	}
}

// runCPUPerPod is gangbench's CPU per pod bound in a scenario's measured windows, the median over
// its repetitions: all components together and each one (ms), and the busy cores of the machine.
// With inRefWindow, only the part of each window scheduler_perf's own figure covers (from the
// first group placed to the last, over the pods of the groups after the first; the resources
// items' CPUSecondsSchedulerPerfWindow), with the cores the components kept busy in it.
func runCPUPerPod(run *results.Run, scenario string, inRefWindow bool) (all float64, per map[string]float64, cores float64, n int) {
	type rep struct {
		cpu     map[string]float64
		pods    float64
		cores   float64
		seconds float64
	}
	reps := map[string]*rep{}
	get := func(r string) *rep {
		if reps[r] == nil {
			reps[r] = &rep{cpu: map[string]float64{}}
		}
		return reps[r]
	}
	cpuKey := "CPUSeconds"
	if inRefWindow {
		cpuKey = "CPUSecondsSchedulerPerfWindow"
	}
	for _, d := range run.DataItems {
		if d.Labels["scenario"] != scenario || d.Labels["phase"] != "" {
			continue
		}
		r := d.Labels["repetition"]
		switch d.Name {
		case measure.ItemResources:
			if v, ok := d.Data[cpuKey]; ok {
				get(r).cpu[d.Labels["component"]] += v
			}
		case measure.ItemMachineCPU:
			if inRefWindow {
				get(r).pods, get(r).seconds = d.Data["SchedulerPerfWindowPods"], d.Data["SchedulerPerfWindowSeconds"]
			} else {
				get(r).cores = d.Data[measure.Value]
			}
		case measure.ItemBindingRate:
			if !inRefWindow {
				get(r).pods = d.Data["Count"]
			}
		}
	}
	var alls, coress []float64
	comps := map[string][]float64{}
	for _, r := range reps {
		if r.pods <= 0 || len(r.cpu) == 0 {
			continue
		}
		sum := 0.0
		for c, v := range r.cpu {
			sum += v
			comps[c] = append(comps[c], 1000*v/r.pods)
		}
		if inRefWindow && r.seconds > 0 {
			r.cores = sum / r.seconds
		}
		alls = append(alls, 1000*sum/r.pods)
		coress = append(coress, r.cores)
	}
	if len(alls) == 0 {
		return 0, nil, 0, 0
	}
	per = map[string]float64{}
	for c, vs := range comps {
		per[c] = median(vs)
	}
	return median(alls), per, median(coress), len(alls)
}

// cpuPerPodLine compares the two sides' CPU per pod, or says why it cannot.
func cpuPerPodLine(what string, all float64, per map[string]float64, cores float64, n int, ref results.DataItem) string {
	comps := slices.SortedFunc(maps.Keys(per), func(a, b string) int { return cmp.Or(resourceRank(a)-resourceRank(b), strings.Compare(a, b)) })
	var parts []string
	for _, c := range comps {
		parts = append(parts, fmt.Sprintf("%s %.1f", c, per[c]))
	}
	return fmt.Sprintf("%s: gangbench %.1f ms (median of %d: %s; %.2f cores busy), scheduler_perf %.1f ms (scheduler, apiserver and etcd in its window; %.2f cores busy): %.2f×",
		what, all, n, strings.Join(parts, ", "), cores, ref.Data["Average"], ref.Data["Cores"], all/ref.Data["Average"])
}
