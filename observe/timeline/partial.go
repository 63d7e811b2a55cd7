package timeline

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// DefaultPartialGrace is how long a gang may sit between 0 and minCount bound members without any
// of them being bound (or removed) before the timeline calls it a partial placement. A correct
// scheduler binds a gang's members one API call after another once Permit lets them go, so the
// watch sees 1 of 3, then 2 of 3, milliseconds apart, and a gang of 1000 takes 5 to 30 s to bind
// on a loaded 2-core machine with each member close behind the previous one. But a loaded machine
// also stalls: on the shared 2-core VM no pod at all was bound for 14.9 s in one run, with two
// 1000-pod gangs at 946 and 981 bound (2026-11-29). The grace is twice that; a gang that is still
// partial at the end is reported whatever the grace.
const DefaultPartialGrace = 30 * time.Second

// Causes of a partial interval.
const (
	CauseBinding  = "binding"  // members were being bound and the quorum was not reached
	CauseDeletion = "deletion" // bound members were deleted (preempted) below the quorum
)

// PartialGang is one stall: a gang with some but fewer than minCount members bound, and no member
// bound or removed, from Since to Until.
type PartialGang struct {
	Group    string
	Phase    string
	Bound    int // bound members during the stall
	MinCount int
	Since    time.Time
	// Until is when the stall ended (a member was bound or removed); zero means the gang was still
	// partial when the timeline ended, which is a partial placement whatever the grace.
	Until time.Time
	Cause string
}

// AtEnd reports whether the gang was still partial at the end of the timeline.
func (p PartialGang) AtEnd() bool { return p.Until.IsZero() }

func (p PartialGang) String() string {
	when := "until the end of the run"
	if !p.AtEnd() {
		when = fmt.Sprintf("for %s without a member bound or removed", p.Until.Sub(p.Since).Round(time.Millisecond))
	}
	return fmt.Sprintf("gang %s (phase %s): %d of minCount %d bound from %s %s (%s)",
		p.Group, p.Phase, p.Bound, p.MinCount, p.Since.Format("15:04:05.000"), when, p.Cause)
}

// PartialReport is what CheckPartial found.
type PartialReport struct {
	// Partial are partial placements: the invariant says there must be none.
	Partial []PartialGang
	// ByPreemption are gangs left partial because some members were preempted under
	// disruptionMode single, which the API allows (gang-semantics §5.2); reported, not violations.
	ByPreemption []PartialGang
	// LongestStall is the longest time a partially bound gang went without a member bound or
	// removed, among stalls shorter than the grace: how close the run came to a violation.
	LongestStall time.Duration
	// LongestPartial is the longest time any gang spent partially bound, stalls or not (a large
	// gang being bound member by member).
	LongestPartial time.Duration
	// Gangs is the number of gang PodGroups the timeline describes.
	Gangs int
}

// CheckPartial replays a timeline and finds gangs with 0 < bound < minCount: at the end of the
// timeline, or for at least grace without any member bound or removed during it. It is a pure
// function so that a recorded events.jsonl can be re-checked, and so that its ability to fail is
// itself tested. Only groups with a PodGroupCreated event of policy gang are judged; pods of other
// groups are ignored.
func CheckPartial(events []Event, grace time.Duration) PartialReport {
	type gang struct {
		phase, disruption string
		minCount          int
		bound             map[string]bool
		since             time.Time // start of the partial interval
		last              time.Time // last change of the bound count within it
		cause             string
	}
	gangs := map[string]*gang{}
	var order []string
	var rep PartialReport
	stall := func(name string, g *gang, n int, until time.Time) {
		if !until.IsZero() && until.Sub(g.last) < grace {
			rep.LongestStall = max(rep.LongestStall, until.Sub(g.last))
			return
		}
		p := PartialGang{Group: name, Phase: g.phase, Bound: n, MinCount: g.minCount, Since: g.last, Until: until, Cause: g.cause}
		if g.cause == CauseDeletion && g.disruption != "all" {
			rep.ByPreemption = append(rep.ByPreemption, p)
			return
		}
		rep.Partial = append(rep.Partial, p)
	}
	for _, e := range Sorted(events) {
		if e.Kind == PodGroupCreated {
			if e.Policy == "gang" && gangs[e.Group] == nil {
				gangs[e.Group] = &gang{phase: e.Phase, disruption: e.DisruptionMode, minCount: e.MinCount, bound: map[string]bool{}}
				order = append(order, e.Group)
			}
			continue
		}
		g := gangs[e.Group]
		if g == nil {
			continue
		}
		before := len(g.bound)
		switch e.Kind {
		case PodBound:
			if g.bound[e.Pod] {
				continue
			}
			g.bound[e.Pod] = true
		case PodDeleted:
			if !g.bound[e.Pod] {
				continue // a pending member went away: no placement changed
			}
			delete(g.bound, e.Pod)
		default:
			continue
		}
		n := len(g.bound)
		wasPartial := before > 0 && before < g.minCount
		if wasPartial {
			// The count changed: judge the stall that just ended.
			stall(e.Group, g, before, e.Time)
		}
		switch partial := n > 0 && n < g.minCount; {
		case partial && !wasPartial:
			g.since, g.last, g.cause = e.Time, e.Time, CauseBinding
			if e.Kind == PodDeleted {
				g.cause = CauseDeletion
			}
		case partial:
			g.last = e.Time
			if e.Kind == PodDeleted {
				g.cause = CauseDeletion
			}
		case wasPartial:
			rep.LongestPartial = max(rep.LongestPartial, e.Time.Sub(g.since))
		}
	}
	for _, name := range order {
		if g := gangs[name]; len(g.bound) > 0 && len(g.bound) < g.minCount {
			stall(name, g, len(g.bound), time.Time{})
		}
	}
	rep.Gangs = len(order)
	sortPartial := func(ps []PartialGang) {
		slices.SortStableFunc(ps, func(a, b PartialGang) int {
			if c := a.Since.Compare(b.Since); c != 0 {
				return c
			}
			return strings.Compare(a.Group, b.Group)
		})
	}
	sortPartial(rep.Partial)
	sortPartial(rep.ByPreemption)
	return rep
}
