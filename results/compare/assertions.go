package compare

import (
	"fmt"
	"slices"

	"github.com/gangbench/gangbench/results"
)

// Changes of an assertion between the sides (AssertionChange.Change).
const (
	ChangeRegressed     = "regressed"      // old passed; new fails, errors or violates an SLO
	ChangeFixed         = "fixed"          // old failed, errored or violated an SLO; new passes
	ChangeUnchanged     = "unchanged"      // same verdict, or failing on both sides in different ways
	ChangeFlaky         = "flaky"          // a side has both a pass and a failing verdict
	ChangeNew           = "new"            // only in the new runs
	ChangeRemoved       = "removed"        // only in the old runs
	ChangeNotComparable = "not comparable" // Options.NotComparable, or skipped on exactly one side
)

// AssertionChange is the diff of one assertion ID.
type AssertionChange struct {
	ID    string `json:"id"`
	Suite string `json:"suite"`
	Name  string `json:"name"`
	// Old and New are each side's verdict over its repetitions: the worst one, by the order
	// fail > error > slo-violation > pass > skip. Worst, not majority, so that one failure in three
	// runs is never voted away; Change says "flaky" when a side also passed. A skip counts only when
	// every repetition skipped. "" when the side never ran the assertion.
	Old results.Verdict `json:"old,omitempty"`
	New results.Verdict `json:"new,omitempty"`
	// OldVerdicts and NewVerdicts are the verdicts of the runs that have the assertion, in run order.
	OldVerdicts []results.Verdict `json:"oldVerdicts,omitempty"`
	NewVerdicts []results.Verdict `json:"newVerdicts,omitempty"`
	Change      string            `json:"change"`
	Reason      string            `json:"reason,omitempty"` // for "not comparable"
}

// Changed reports whether the row belongs in a diff: anything but the same verdict on both sides.
func (a AssertionChange) Changed() bool { return a.Change != ChangeUnchanged || a.Old != a.New }

// severity orders verdicts for the worst-of aggregation. A reproduced assertion failure is the
// strongest evidence against a scheduler, so it outranks a harness error, which outranks a missed SLO.
func severity(v results.Verdict) int {
	switch v {
	case results.Skip:
		return 0
	case results.Pass:
		return 1
	case results.SLOViolation:
		return 2
	case results.Error:
		return 3
	default: // fail, and unknown verdicts (Read rejects them)
		return 4
	}
}

func worst(vs []results.Verdict) results.Verdict {
	if len(vs) == 0 {
		return ""
	}
	return slices.MaxFunc(vs, func(a, b results.Verdict) int { return severity(a) - severity(b) })
}

func flaky(vs []results.Verdict) bool {
	return slices.Contains(vs, results.Pass) && slices.ContainsFunc(vs, func(v results.Verdict) bool {
		return v != results.Skip && v.Failing()
	})
}

func compareAssertions(old, new []*results.Run, notComparable map[string]string) []AssertionChange {
	var order []string
	byID := map[string]*AssertionChange{}
	add := func(runs []*results.Run, isNew bool) {
		for _, r := range runs {
			for _, c := range r.Cases {
				a := byID[c.ID]
				if a == nil {
					a = &AssertionChange{ID: c.ID, Suite: c.Suite, Name: c.Name}
					byID[c.ID] = a
					order = append(order, c.ID)
				}
				if isNew {
					// The new side's wording wins: it is the one a reader acts on.
					a.Suite, a.Name = c.Suite, c.Name
					a.NewVerdicts = append(a.NewVerdicts, c.Verdict)
				} else {
					a.OldVerdicts = append(a.OldVerdicts, c.Verdict)
				}
			}
		}
	}
	add(old, false)
	add(new, true)

	out := make([]AssertionChange, 0, len(order))
	for _, id := range order {
		a := byID[id]
		a.Old, a.New = worst(a.OldVerdicts), worst(a.NewVerdicts)
		a.Change, a.Reason = change(*a, notComparable)
		out = append(out, *a)
	}
	return out
}

func change(a AssertionChange, notComparable map[string]string) (string, string) {
	reason, listed := notComparable[a.ID]
	switch {
	case a.Old == "":
		return ChangeNew, ""
	case a.New == "":
		return ChangeRemoved, ""
	case listed:
		if reason == "" {
			reason = "semantics differ between the compared versions"
		}
		return ChangeNotComparable, reason
	case flaky(a.OldVerdicts) || flaky(a.NewVerdicts):
		return ChangeFlaky, ""
	case a.Old == a.New:
		return ChangeUnchanged, ""
	case a.Old == results.Skip || a.New == results.Skip:
		side := "old"
		if a.New == results.Skip {
			side = "new"
		}
		return ChangeNotComparable, fmt.Sprintf("skipped on the %s side", side)
	case a.Old == results.Pass:
		return ChangeRegressed, ""
	case a.New == results.Pass:
		return ChangeFixed, ""
	default: // failing on both sides, differently
		return ChangeUnchanged, ""
	}
}
