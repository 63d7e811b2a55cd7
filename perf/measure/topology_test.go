package measure

import (
	"slices"
	"testing"
	"time"

	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/results"
)

const rackKey = "topology.gangbench.dev/rack"

// TestDomainShare: a gang whose members share a rack counts, one spread over two racks (or with a
// member on a node without the key) does not, and a member preempted away no longer counts.
func TestDomainShare(t *testing.T) {
	t0 := time.Now()
	nodes := map[string]map[string]string{
		"n1": {rackKey: "r1"}, "n2": {rackKey: "r1"}, "n3": {rackKey: "r2"}, "bare": {},
	}
	var ev []timeline.Event
	at := func(d int, e timeline.Event) {
		e.Time, e.Phase = t0.Add(time.Duration(d)*time.Millisecond), "gangs"
		ev = append(ev, e)
	}
	for _, g := range []string{"a", "b", "c", "d"} {
		at(0, timeline.Event{Kind: timeline.PodGroupCreated, Group: g, Policy: "gang", MinCount: 2})
	}
	bind := func(d int, g, pod, node string) {
		at(d, timeline.Event{Kind: timeline.PodBound, Group: g, Pod: pod, Node: node})
	}
	bind(1, "a", "a0", "n1")
	bind(2, "a", "a1", "n2") // one rack
	bind(3, "b", "b0", "n1")
	bind(4, "b", "b1", "n3") // two racks
	bind(5, "c", "c0", "n2")
	bind(6, "c", "c1", "bare") // a node without the key
	bind(7, "d", "d0", "n3")
	bind(8, "d", "d1", "n1")
	bind(9, "d", "d2", "n3")
	at(10, timeline.Event{Kind: timeline.PodDeleted, Group: "d", Pod: "d1", Node: "n1"}) // d is back in r2 alone
	groups := Groups(ev, []string{"gangs"})
	s := DomainShare(ev, groups, "gangs", rackKey, nodes)
	if s.Placed != 4 || s.OneDomain != 2 || s.Domains != 3 {
		t.Errorf("placed %d, one domain %d, domains %d; want 4, 2, 3 (r1, r2 and no key)", s.Placed, s.OneDomain, s.Domains)
	}
	var spread []string
	for _, g := range s.Spread {
		spread = append(spread, g.Group)
	}
	if !slices.Equal(spread, []string{"b", "c"}) || !slices.Equal(s.Spread[1].Domains, []string{"", "r1"}) {
		t.Errorf("spread groups %v (%v), want b and c, c over r1 and a node without the key", spread, s.Spread)
	}
	if it := s.Item("gangs"); it.Data[Value] != 0.5 || it.Labels["phase"] != "gangs" {
		t.Errorf("item %v", it)
	}
	if v, ok := (Share{}).Item("gangs").Data[Value]; ok {
		t.Errorf("no placed group must leave Value out, so that an SLO on it errors, got %v", v)
	}
}

// TestPhaseCPU: each phase's scheduler CPU is read over its own window, and the ratio compares the
// constrained phase's CPU per pod with the unconstrained one's; overlapping phases get no ratio.
func TestPhaseCPU(t *testing.T) {
	t0 := time.Now()
	sec := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	// The scheduler spends 1 CPU-second per wall second from 0 to 10 s, then 0.25 from 10 to 20.
	series := []CPUSample{{sec(0), 0}, {sec(10), 10 * time.Second}, {sec(20), 12500 * time.Millisecond}}
	sc := &scenario.Scenario{Phases: []scenario.Phase{{Name: "rack", TopologyKey: rackKey}, {Name: "free"}}}
	ev := []timeline.Event{
		{Time: sec(0), Kind: timeline.PodCreated, Phase: "rack", Pod: "r0"},
		{Time: sec(5), Kind: timeline.PodBound, Phase: "rack", Pod: "r0"},
		{Time: sec(10), Kind: timeline.PodBound, Phase: "rack", Pod: "r1"},
		{Time: sec(10), Kind: timeline.PodCreated, Phase: "free", Pod: "f0"},
		{Time: sec(20), Kind: timeline.PodBound, Phase: "free", Pod: "f0"},
		{Time: sec(20), Kind: timeline.PodBound, Phase: "free", Pod: "f1"},
	}
	var notes []string
	note := func(f string, a ...any) { notes = append(notes, f) }
	items := phaseCPUItems(series, ev, sc, []string{"rack", "free"}, note)
	per := map[string]float64{}
	var ratio *results.DataItem
	for i, it := range items {
		switch it.Name {
		case ItemSchedulerCPUPerPod:
			per[it.Labels["phase"]] = it.Data[Value]
		case ItemTopologyCPURatio:
			ratio = &items[i]
		}
	}
	// rack: 10 CPU-s over 2 pods = 5000 ms/pod; free: 2.5 CPU-s over 2 pods = 1250 ms/pod.
	if !near(per["rack"], 5000) || !near(per["free"], 1250) || ratio == nil || !near(ratio.Data[Value], 4) {
		t.Errorf("per pod %v, ratio %v; want rack 5000, free 1250, ratio 4", per, ratio)
	}
	// The free phase starting before the rack phase ends: no ratio, and a note says why.
	ev[3].Time = sec(8)
	items = phaseCPUItems(series, ev, sc, []string{"rack", "free"}, note)
	for _, it := range items {
		if it.Name == ItemTopologyCPURatio {
			t.Errorf("overlapping phases got a ratio: %v", it.Data)
		}
	}
	if len(notes) != 1 {
		t.Errorf("notes %v, want one saying why the ratio is missing", notes)
	}
}

// TestJobLatency: Job created → PodGroup seen → last member bound, whichever of the Job's create
// and its PodGroup the timeline holds first.
func TestJobLatency(t *testing.T) {
	t0 := time.Now()
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	ev := []timeline.Event{
		{Time: ms(0), Kind: timeline.JobCreated, Phase: "jobs", Job: "j0"},
		{Time: ms(100), Kind: timeline.PodGroupCreated, Phase: "jobs", Group: "j0-pg", Job: "j0", Policy: "gang", MinCount: 1},
		{Time: ms(300), Kind: timeline.PodBound, Phase: "jobs", Group: "j0-pg", Pod: "p0"},
		// j1's PodGroup is seen before its create call returned.
		{Time: ms(50), Kind: timeline.PodGroupCreated, Phase: "jobs", Group: "j1-pg", Job: "j1", Policy: "gang", MinCount: 1},
		{Time: ms(60), Kind: timeline.JobCreated, Phase: "jobs", Job: "j1"},
		{Time: ms(1060), Kind: timeline.PodBound, Phase: "jobs", Group: "j1-pg", Pod: "p1"},
	}
	job, toGroup, ok := JobLatencyData(Groups(ev, []string{"jobs"}))
	if !ok || !near(job["Max"], 1.0) || !near(job["Min"], 0.3) || !near(toGroup["Max"], 0.1) || !near(toGroup["Min"], -0.01) {
		t.Errorf("job latency %v, to PodGroup %v (ok %v)", job, toGroup, ok)
	}
	if _, _, ok := JobLatencyData(Groups(ev[1:3], []string{"jobs"})); ok {
		t.Error("a group without its Job's create must not count")
	}
}

// TestPlacementsPerCycle: the placement counters over the gang cycles; nothing without them.
func TestPlacementsPerCycle(t *testing.T) {
	items := []results.DataItem{
		{Name: "podGroupScheduleAttempts", Data: map[string]float64{"Total": 4}},
		{Name: "generatedPlacements", Data: map[string]float64{"Total": 40}},
		{Name: "placementEvaluations", Data: map[string]float64{"Total": 36, "feasible": 8}},
	}
	it, ok := placementsPerCycle(items)
	if !ok || it.Data["Generated"] != 10 || it.Data["Evaluated"] != 9 || it.Data["Feasible"] != 2 {
		t.Errorf("%v %v", it, ok)
	}
	if _, ok := placementsPerCycle(items[:1]); ok {
		t.Error("without the placement counters (gate off) there is no figure")
	}
}
