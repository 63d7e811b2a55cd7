package suites

import (
	"slices"
	"strings"
	"time"

	"github.com/gangbench/gangbench/observe/monitor"
)

// KnownIssue is a deviation of a released scheduler that gangbench has found and reports, but does not
// count as a failure for the versions listed, so CI against those versions stays meaningful (a new
// failure still fails). Anything not matching exactly is reported as a failure.
type KnownIssue struct {
	ID          string
	Versions    []string
	Description string
	Match       func(v monitor.Violation) bool
}

// KnownIssues lists what gangbench found in released schedulers.
func KnownIssues() []KnownIssue {
	return []KnownIssue{{
		ID:       "KNOWN-01",
		Versions: []string{"v1.37.0", "v1.37.1", "v1.37.2"},
		Description: "PodGroupInitiallyScheduled goes True -> False within milliseconds when members that do not fit " +
			"are retried right after the successful group cycle: the monotonicity check in updatePodGroupCondition " +
			"reads the scheduler's cached PodGroup, which has not yet seen its own True write",
		Match: func(v monitor.Violation) bool {
			if v.Kind != monitor.KindRegression || v.After.To == nil || v.Before.To == nil {
				return false
			}
			return v.After.To.Reason == "Unschedulable" &&
				strings.Contains(v.After.To.Message, "pod group is unschedulable") &&
				v.After.Time.Sub(v.Before.Time) < 2*time.Second
		},
	}}
}

// Classify splits violations into unexpected ones and those matching a known issue of the scheduler
// version under test.
func Classify(vs []monitor.Violation, schedulerVersion string) (unexpected, known []string) {
	for _, v := range vs {
		matched := ""
		for _, k := range KnownIssues() {
			if slices.Contains(k.Versions, schedulerVersion) && k.Match(v) {
				matched = k.ID
				break
			}
		}
		if matched != "" {
			known = append(known, matched+": "+v.String())
		} else {
			unexpected = append(unexpected, v.String())
		}
	}
	return unexpected, known
}
