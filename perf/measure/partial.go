package measure

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// DefaultPartialGrace is how long a gang may sit between 0 and minCount bound members before the
// timeline calls it a partial placement. A correct scheduler binds a gang's members one API call
// after another once Permit lets them go, so the watch sees 1 of 3, then 2 of 3, for milliseconds
// (seconds under heavy load); a gang stuck there for longer was placed partially.
const DefaultPartialGrace = 10 * time.Second

// Causes of a partial interval.
const (
	CauseBinding  = "binding"  // members were being bound and the quorum was not reached in time
	CauseDeletion = "deletion" // bound members were deleted (preempted) below the quorum
)

// PartialGang is one interval during which a gang had some but fewer than minCount members bound.
type PartialGang struct {
	Group    string
	Phase    string
	Bound    int // bound members when the interval was judged (its lowest point for deletions)
	MinCount int
	Since    time.Time
	// Until is when the gang left the partial state; zero means it was still partial when the
	// timeline ended, which is a partial placement whatever the grace.
	Until time.Time
	Cause string
}

// AtEnd reports whether the gang was still partial at the end of the timeline.
func (p PartialGang) AtEnd() bool { return p.Until.IsZero() }

func (p PartialGang) String() string {
	when := "until the end of the run"
	if !p.AtEnd() {
		when = fmt.Sprintf("for %s", p.Until.Sub(p.Since).Round(time.Millisecond))
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
	// LongestTransient is the longest partial interval that closed within the grace: how long the
	// slowest gang took to go from its first to its minCount-th bound member.
	LongestTransient time.Duration
	// Gangs is the number of gang PodGroups the timeline describes.
	Gangs int
}

// CheckPartial replays a timeline and finds gangs with 0 < bound < minCount: at the end of the
// timeline, or for at least grace at any time during it. It is a pure function so that a recorded
// events.jsonl can be re-checked, and so that its ability to fail is itself tested. Only groups with
// a PodGroupCreated event of policy gang are judged; pods of other groups are ignored.
func CheckPartial(events []Event, grace time.Duration) PartialReport {
	type gang struct {
		phase, disruption string
		minCount          int
		bound             map[string]bool
		since             time.Time
		low               int
		cause             string
	}
	gangs := map[string]*gang{}
	var order []string
	var rep PartialReport
	record := func(name string, g *gang, until time.Time) {
		p := PartialGang{Group: name, Phase: g.phase, Bound: g.low, MinCount: g.minCount, Since: g.since, Until: until, Cause: g.cause}
		if !until.IsZero() && until.Sub(g.since) < grace {
			rep.LongestTransient = max(rep.LongestTransient, until.Sub(g.since))
			return
		}
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
		partial := n > 0 && n < g.minCount
		switch {
		case partial && g.since.IsZero():
			g.since, g.low, g.cause = e.Time, n, CauseBinding
			if e.Kind == PodDeleted {
				g.cause = CauseDeletion
			}
		case partial:
			if e.Kind == PodDeleted {
				g.cause = CauseDeletion
				g.low = min(g.low, n)
			} else if g.cause == CauseBinding {
				g.low = n // while binding, the latest count is the informative one
			}
		case !g.since.IsZero():
			record(e.Group, g, e.Time)
			g.since = time.Time{}
		}
	}
	for _, name := range order {
		if g := gangs[name]; !g.since.IsZero() {
			g.low = len(g.bound)
			record(name, g, time.Time{})
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
