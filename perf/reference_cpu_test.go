package perf

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gangbench/gangbench/observe/procstat"
	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/results"
)

// scheduler_perf's output as the test binary dumps it at the end (indented by the testing package),
// written in pieces that split lines.
const referenceLog = `    scheduler_perf.go:627: full log output:
        I1203 06:10:00.000000   4242 schedule_one_podgroup.go:896] "Successfully scheduled a pod group" podGroup="gang-ns-0/gang-0" scheduledPods=3 unschedulablePods=0
        I1203 06:10:00.500000   4242 other.go:1] "Something else" scheduledPods=99
        I1203 06:10:01.000000   4242 schedule_one_podgroup.go:896] "Successfully scheduled a pod group" podGroup="gang-ns-0/gang-1" scheduledPods=3 unschedulablePods=0
        I1203 06:10:02.000000   4242 schedule_one_podgroup.go:896] "Successfully scheduled a pod group" podGroup="gang-ns-0/gang-2" scheduledPods=3 unschedulablePods=0
`

func at(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02 15:04:05.000", s, time.Local)
	if err != nil {
		panic(err)
	}
	return t
}

func TestReferenceCPU(t *testing.T) {
	g := &groupLog{year: 2026}
	for i := 0; i < len(referenceLog); i += 37 {
		if _, err := g.Write([]byte(referenceLog[i:min(i+37, len(referenceLog))])); err != nil {
			t.Fatal(err)
		}
	}
	if len(g.groups) != 3 || !g.groups[1].at.Equal(at("2026-12-03 06:10:01.000")) || g.groups[2].pods != 3 {
		t.Fatalf("groups %+v", g.groups)
	}
	// 1 s of CPU every 0.5 s of wall time: two cores busy. From the first group (06:10:00) to the
	// last (06:10:02) the tree spent 4 s on the 6 pods of the groups after the first.
	var samples []measure.CPUSample
	for i := 0; i <= 6; i++ {
		samples = append(samples, measure.CPUSample{At: at("2026-12-03 06:09:59.750").Add(time.Duration(i) * 500 * time.Millisecond), CPU: time.Duration(i) * time.Second})
	}
	it, ok := referenceCPU(samples, g.groups)
	if !ok {
		t.Fatal("no figure")
	}
	if !near(it.Data["Average"], 4000.0/6) || !near(it.Data["Cores"], 2) || it.Data["Pods"] != 6 || it.Data["WindowSeconds"] != 2 || it.Labels["Metric"] != RefCPUPerPod {
		t.Errorf("item %+v", it)
	}
	if _, ok := referenceCPU(samples[2:], g.groups); ok {
		t.Error("samples that start after the first group cannot give the window's CPU")
	}
	if _, ok := referenceCPU(samples, g.groups[:1]); ok {
		t.Error("one group is no window")
	}
}

// The sampler follows a real process (this test's) and never reports less CPU than before.
func TestTreeCPU(t *testing.T) {
	self, err := procstat.Proc.Read(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	tc := startTreeCPU(procstat.Proc, os.Getpid())
	// Spend CPU until /proc shows at least two ticks more than before (a bounded loop, not a sleep).
	deadline := time.Now().Add(10 * time.Second)
	for x := 0; time.Now().Before(deadline); x++ {
		if u, err := procstat.Proc.Read(os.Getpid()); err == nil && u.CPU >= self.CPU+20*time.Millisecond {
			break
		}
	}
	s := tc.Stop()
	if len(s) < 2 {
		t.Fatalf("samples %v", s)
	}
	for i := 1; i < len(s); i++ {
		if s[i].CPU < s[i-1].CPU || s[i].At.Before(s[i-1].At) {
			t.Fatalf("samples go back: %v", s)
		}
	}
	if s[len(s)-1].CPU < self.CPU+20*time.Millisecond {
		t.Errorf("last sample %v, want at least %v", s[len(s)-1].CPU, self.CPU+20*time.Millisecond)
	}
}

func TestRunCPUPerPod(t *testing.T) {
	lab := func(rep, comp string) map[string]string {
		l := map[string]string{"scenario": "s", "repetition": rep}
		if comp != "" {
			l["component"] = comp
		}
		return l
	}
	res := func(rep, comp string, cpu float64) results.DataItem {
		return results.DataItem{Name: measure.ItemResources, Labels: lab(rep, comp), Data: map[string]float64{"CPUSeconds": cpu}}
	}
	run := &results.Run{DataItems: []results.DataItem{
		// Repetition 1: 3000 pods for 30 CPU s (10 ms each); repetition 2: 3000 pods for 45 s (15 ms).
		res("1", "kube-scheduler", 12), res("1", "kube-apiserver", 18),
		{Name: measure.ItemBindingRate, Labels: lab("1", ""), Data: map[string]float64{"Count": 3000}},
		{Name: measure.ItemMachineCPU, Labels: lab("1", ""), Data: map[string]float64{measure.Value: 1.9}},
		res("2", "kube-scheduler", 15), res("2", "kube-apiserver", 30),
		{Name: measure.ItemBindingRate, Labels: lab("2", ""), Data: map[string]float64{"Count": 3000}},
		{Name: measure.ItemMachineCPU, Labels: lab("2", ""), Data: map[string]float64{measure.Value: 2.0}},
		// Another scenario's window does not count.
		{Name: measure.ItemResources, Labels: map[string]string{"scenario": "other", "repetition": "1", "component": "scheduler"}, Data: map[string]float64{"CPUSeconds": 999}},
	}}
	all, per, cores, n := runCPUPerPod(run, "s", false)
	if n != 2 || !near(all, 12.5) || !near(per["kube-scheduler"], 4.5) || !near(per["kube-apiserver"], 8) || !near(cores, 1.95) {
		t.Errorf("all %v per %v cores %v n %d", all, per, cores, n)
	}
	r := &ReferenceResult{Benchmark: "b", Items: map[string]results.DataItem{
		RefCPUPerPod: {Unit: "ms", Data: map[string]float64{"Average": 10, "Cores": 1.8}},
	}}
	item, lines := ReferenceRatios(run, "s", r, 0)
	if !near(item.Data["CPUPerPod"], 1.25) {
		t.Errorf("ratio %v", item.Data)
	}
	if want := "CPU per pod bound: gangbench 12.5 ms (median of 2: kube-scheduler 4.5, kube-apiserver 8.0; 1.95 cores busy), scheduler_perf 10.0 ms"; len(lines) != 1 || !strings.Contains(lines[0], want) || !strings.HasSuffix(lines[0], "1.25×") {
		t.Errorf("lines %q, want %q…1.25×", lines, want)
	}
	run.DataItems = append(run.DataItems, item)
	if sec := ReferenceSection(run); len(sec) != 1 || !strings.Contains(sec[0], "CPU per pod bound 1.25× (12.5 ms against 10.0)") {
		t.Errorf("section %q", sec)
	}
	if _, _, _, n := runCPUPerPod(run, "s", true); n != 0 {
		t.Errorf("windows without scheduler_perf's part gave %d figures in it", n)
	}
}

// TestRunCPUPerPodInRefWindow: like with like, the CPU from the first group placed to the last over
// the pods of the groups after the first, and the cores that part kept busy.
func TestRunCPUPerPodInRefWindow(t *testing.T) {
	lab := func(comp string) map[string]string {
		l := map[string]string{"scenario": "s", "repetition": "1"}
		if comp != "" {
			l["component"] = comp
		}
		return l
	}
	run := &results.Run{DataItems: []results.DataItem{
		// The whole window: 3000 pods for 40 CPU s; scheduler_perf's part: 2000 pods for 16 CPU s in 10 s.
		{Name: measure.ItemResources, Labels: lab("kube-scheduler"), Data: map[string]float64{"CPUSeconds": 10, "CPUSecondsSchedulerPerfWindow": 6}},
		{Name: measure.ItemResources, Labels: lab("kube-apiserver"), Data: map[string]float64{"CPUSeconds": 30, "CPUSecondsSchedulerPerfWindow": 10}},
		{Name: measure.ItemBindingRate, Labels: lab(""), Data: map[string]float64{"Count": 3000}},
		{Name: measure.ItemMachineCPU, Labels: lab(""), Data: map[string]float64{measure.Value: 1.9, "SchedulerPerfWindowPods": 2000, "SchedulerPerfWindowSeconds": 10}},
	}}
	all, per, cores, n := runCPUPerPod(run, "s", true)
	if n != 1 || !near(all, 8) || !near(per["kube-scheduler"], 3) || !near(per["kube-apiserver"], 5) || !near(cores, 1.6) {
		t.Errorf("in scheduler_perf's window: all %v per %v cores %v n %d; want 8 ms (3 + 5) on 1.6 cores", all, per, cores, n)
	}
	r := &ReferenceResult{Benchmark: "b", Items: map[string]results.DataItem{RefCPUPerPod: {Unit: "ms", Data: map[string]float64{"Average": 10, "Cores": 1.8}}}}
	item, lines := ReferenceRatios(run, "s", r, 0)
	if !near(item.Data["CPUPerPodInWindow"], 0.8) || !near(item.Data["CPUPerPod"], 40.0/3/10) {
		t.Errorf("ratios %v, want 0.8 in the window and 1.33 over the whole", item.Data)
	}
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "CPU per pod in scheduler_perf's window (first to last group placed): gangbench 8.0 ms") {
		t.Errorf("lines %q", lines)
	}
	run.DataItems = append(run.DataItems, item)
	if sec := ReferenceSection(run); len(sec) != 1 || !strings.Contains(sec[0], "CPU per pod bound 1.33× (13.3 ms against 10.0), 0.80× in scheduler_perf's window (8.0 ms)") {
		t.Errorf("section %q", sec)
	}
}
