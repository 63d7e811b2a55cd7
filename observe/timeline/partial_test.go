package timeline

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readTimeline(t *testing.T, name string) []Event {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "timelines", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ev, err := ReadJSONL(f)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// complete.jsonl is 20 gangs of a real smoke run (events.jsonl as the runner wrote it): every gang
// was bound whole, each within milliseconds.
func TestCheckPartialCompleteRun(t *testing.T) {
	rep := CheckPartial(readTimeline(t, "complete.jsonl"), DefaultPartialGrace)
	if len(rep.Partial) != 0 || len(rep.ByPreemption) != 0 {
		t.Fatalf("a run that bound every gang whole reported %v / %v", rep.Partial, rep.ByPreemption)
	}
	if rep.Gangs != 20 {
		t.Errorf("gangs judged: %d, want 20", rep.Gangs)
	}
	// Members of a gang are bound one API call after another, so the watch does see 1 of 3 and 2
	// of 3 for a moment; that is what the grace is for, and it is reported as the longest stall.
	if rep.LongestStall <= 0 || rep.LongestStall > time.Second || rep.LongestPartial < rep.LongestStall {
		t.Errorf("longest stall %s, longest partial %s, want a few milliseconds", rep.LongestStall, rep.LongestPartial)
	}
}

// partial.jsonl is the same recording, edited: gangs-00003 never got its third member, and the last
// member of gangs-00007 arrived 45 s after the others. The check must report both: this is the
// proof that the partial-placement invariant can fail.
func TestCheckPartialReportsPartialGangs(t *testing.T) {
	ev := readTimeline(t, "partial.jsonl")
	rep := CheckPartial(ev, DefaultPartialGrace)
	if len(rep.Partial) != 2 {
		t.Fatalf("partial gangs: %v, want gangs-00007 (45 s) and gangs-00003 (at the end)", rep.Partial)
	}
	late, stuck := rep.Partial[0], rep.Partial[1]
	if late.Group != "gangs-00007" || late.AtEnd() || late.Bound != 2 || late.MinCount != 3 || late.Cause != CauseBinding {
		t.Errorf("first: %+v", late)
	}
	if d := late.Until.Sub(late.Since); d < 44*time.Second || d > 46*time.Second {
		t.Errorf("gangs-00007 partial for %s, want ≈45s", d)
	}
	if stuck.Group != "gangs-00003" || !stuck.AtEnd() || stuck.Bound != 2 || stuck.MinCount != 3 {
		t.Errorf("second: %+v", stuck)
	}
	if s := stuck.String(); !strings.Contains(s, "gang gangs-00003 (phase gangs): 2 of minCount 3 bound from ") || !strings.HasSuffix(s, "until the end of the run (binding)") {
		t.Errorf("String() = %q", s)
	}
	if s := late.String(); !strings.Contains(s, "without a member bound or removed (binding)") {
		t.Errorf("String() = %q", s)
	}
	// A grace longer than the late gang's wait forgives it, never the gang that stayed partial.
	rep = CheckPartial(ev, time.Minute)
	if len(rep.Partial) != 1 || rep.Partial[0].Group != "gangs-00003" {
		t.Errorf("with a 1 min grace: %v, want only gangs-00003", rep.Partial)
	}
}

// preemption.jsonl is a real gpu-preemption-wave run: low-priority gangs of 2 with disruptionMode
// all, four of which were preempted whole by one high-priority gang of 8.
func TestCheckPartialPreemption(t *testing.T) {
	ev := readTimeline(t, "preemption.jsonl")
	if rep := CheckPartial(ev, DefaultPartialGrace); len(rep.Partial)+len(rep.ByPreemption) != 0 {
		t.Fatalf("whole-gang preemption reported %v / %v", rep.Partial, rep.ByPreemption)
	}
	// Edit: one member of low-00007 survives its preemption.
	edit := func(mode string) []Event {
		var out []Event
		dropped := false
		for _, e := range ev {
			if e.Kind == PodGroupCreated && e.Phase == "low" {
				e.DisruptionMode = mode
			}
			if e.Kind == PodDeleted && e.Group == "low-00007" && !dropped {
				dropped = true
				continue
			}
			out = append(out, e)
		}
		if !dropped {
			t.Fatal("fixture has no deletion of low-00007")
		}
		return out
	}
	// disruptionMode single allows it (gang-semantics §5.2): reported, not a violation.
	rep := CheckPartial(edit("single"), DefaultPartialGrace)
	if len(rep.Partial) != 0 || len(rep.ByPreemption) != 1 || rep.ByPreemption[0].Group != "low-00007" || rep.ByPreemption[0].Cause != CauseDeletion {
		t.Errorf("single: partial %v, by preemption %v", rep.Partial, rep.ByPreemption)
	}
	// disruptionMode all promises the whole gang goes: a survivor is a partial placement.
	rep = CheckPartial(edit("all"), DefaultPartialGrace)
	if len(rep.Partial) != 1 || rep.Partial[0].Group != "low-00007" || rep.Partial[0].Bound != 1 || !rep.Partial[0].AtEnd() {
		t.Errorf("all: partial %v", rep.Partial)
	}
}

func TestCheckPartialHandMade(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	ev := []Event{
		{Time: s(0), Kind: PodGroupCreated, Group: "g", Phase: "p", Policy: "gang", MinCount: 2},
		{Time: s(0), Kind: PodGroupCreated, Group: "b", Phase: "p", Policy: "basic"},
		// basic groups have no quorum: one of many bound is fine
		{Time: s(1), Kind: PodBound, Group: "b", Pod: "b-0"},
		{Time: s(1), Kind: PodBound, Group: "g", Pod: "g-0"},
		{Time: s(1), Kind: PodBound, Group: "g", Pod: "g-0"},     // a relist repeats a bind
		{Time: s(1.5), Kind: PodDeleted, Group: "g", Pod: "g-9"}, // a pending member goes away
		{Time: s(2), Kind: PodBound, Group: "g", Pod: "g-1"},
		// a pod of a group the timeline never saw created is not judged
		{Time: s(3), Kind: PodBound, Group: "unknown", Pod: "u-0"},
	}
	rep := CheckPartial(ev, 500*time.Millisecond)
	if len(rep.Partial) != 1 || rep.Partial[0].Group != "g" || rep.Partial[0].Until != s(2) || rep.Gangs != 1 {
		t.Errorf("g was 1 of 2 for 1 s, over a 500 ms grace: %+v", rep)
	}
	if rep := CheckPartial(ev, time.Second+time.Millisecond); len(rep.Partial) != 0 || rep.LongestStall != time.Second || rep.LongestPartial != time.Second {
		t.Errorf("within the grace: %+v", rep)
	}
}

// A gang of 200 bound member by member over 20 s (as a gang of 1000 is on a loaded machine) is
// partially bound for 20 s but never stalls: no violation. The same gang stalling for 40 s at 150
// of 200 is one.
func TestCheckPartialLargeGangBindingSteadily(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ev := []Event{{Time: t0, Kind: PodGroupCreated, Group: "big", Phase: "p", Policy: "gang", MinCount: 200}}
	for i := range 200 {
		ev = append(ev, Event{Time: t0.Add(time.Duration(i+1) * 100 * time.Millisecond), Kind: PodBound, Group: "big", Pod: fmt.Sprint(i)})
	}
	rep := CheckPartial(ev, DefaultPartialGrace)
	if len(rep.Partial) != 0 || rep.LongestPartial < 19*time.Second || rep.LongestStall != 100*time.Millisecond {
		t.Errorf("steady binding: %+v", rep)
	}
	for i := 150; i < 200; i++ {
		ev[i+1].Time = ev[i+1].Time.Add(40 * time.Second)
	}
	rep = CheckPartial(ev, DefaultPartialGrace)
	if len(rep.Partial) != 1 || rep.Partial[0].Bound != 150 || rep.Partial[0].Until.Sub(rep.Partial[0].Since) != 40100*time.Millisecond {
		t.Errorf("stall at 150 of 200: %+v", rep.Partial)
	}
}
