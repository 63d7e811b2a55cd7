package timeline

import (
	"slices"
	"testing"
	"time"
)

// groupBinds returns the indexes of a group's PodBound events, in time order.
func groupBinds(ev []Event, group string) []int {
	var idx []int
	for i, e := range ev {
		if e.Kind == PodBound && e.Group == group {
			idx = append(idx, i)
		}
	}
	slices.SortFunc(idx, func(a, b int) int { return ev[a].Time.Compare(ev[b].Time) })
	return idx
}

// TestPartialAfterRecovery is the fault path's proof that the checker can fail: a recorded run
// (complete.jsonl, every gang bound whole) with a "recovery" placed mid-run, then edited so that
// one gang bound after the recovery loses its last member, and one gang bound before it stalls
// across it. Both must be reported; a stall over before the recovery must not.
func TestPartialAfterRecovery(t *testing.T) {
	ev := Sorted(readTimeline(t, "complete.jsonl"))
	var binds []Event
	for _, e := range ev {
		if e.Kind == PodBound {
			binds = append(binds, e)
		}
	}
	if len(binds) != 60 {
		t.Fatalf("complete.jsonl has %d binds, want 60", len(binds))
	}
	recovered := binds[len(binds)/2].Time
	if got := PartialAfter(ev, DefaultPartialGrace, recovered); len(got) != 0 {
		t.Fatalf("an unedited complete run reported %v", got)
	}
	first, ok := FirstBindAfter(ev, recovered)
	if !ok || !first.Time.Equal(recovered) {
		t.Errorf("first bind after %s: %+v %v", recovered, first, ok)
	}
	if _, ok := FirstBindAfter(ev, binds[len(binds)-1].Time.Add(time.Nanosecond)); ok {
		t.Error("a bind was found after the last one")
	}

	// Gangs wholly bound before and wholly after the recovery.
	var before, after string
	for _, e := range ev {
		if e.Kind != PodGroupCreated {
			continue
		}
		idx := groupBinds(ev, e.Group)
		switch {
		case before == "" && ev[idx[len(idx)-1]].Time.Before(recovered):
			before = e.Group
		case after == "" && ev[idx[0]].Time.After(recovered):
			after = e.Group
		}
	}
	if before == "" || after == "" {
		t.Fatalf("need a gang bound before and one after %s: %q %q", recovered, before, after)
	}
	edited := slices.Clone(ev)
	// after: its last member's bind is lost, so it stays 2 of 3 to the end.
	last := groupBinds(edited, after)
	edited = slices.Delete(edited, last[2], last[2]+1)
	// before: its last member is bound 45 s late, a stall that outlasts the recovery.
	late := groupBinds(edited, before)
	edited[late[2]].Time = edited[late[2]].Time.Add(45 * time.Second)

	got := PartialAfter(edited, DefaultPartialGrace, recovered)
	if len(got) != 2 {
		t.Fatalf("partial after recovery: %v, want %s (stalled across it) and %s (partial at the end)", got, before, after)
	}
	names := []string{got[0].Group, got[1].Group}
	if !slices.Contains(names, before) || !slices.Contains(names, after) {
		t.Errorf("reported %v, want %s and %s", names, before, after)
	}
	for _, p := range got {
		if p.Group == after && (!p.AtEnd() || p.Bound != 2 || p.MinCount != 3) {
			t.Errorf("%s: %+v, want 2 of 3 at the end", after, p)
		}
	}
	// Judged from after the late bind, the stall is history: only the gang still partial counts.
	got = PartialAfter(edited, DefaultPartialGrace, recovered.Add(time.Hour))
	if len(got) != 1 || got[0].Group != after {
		t.Errorf("judged an hour later: %v, want only %s", got, after)
	}
}
