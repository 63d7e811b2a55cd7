package suites

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/results"
	"github.com/gangbench/gangbench/scenarios/gangapi"
)

// The assertions state what Kubernetes v1.37 does. Run against another minor version (v1.36, served
// as scheduling.k8s.io/v1alpha2 and converted by scenarios/gangapi), some of them check a behaviour
// that version never had. Those are listed here with the reason, taken from that version's source, so
// that a run reports them as "differs in v1.36" instead of a failure, and a comparison across
// minor versions reports them as "not comparable" instead of a regression or a fix. Every other
// assertion is held to the v1.37 statement on every version: a v1.36 scheduler that breaks it fails.

// VersionDifference is one assertion whose v1.37 statement does not hold by design in an older minor.
type VersionDifference struct {
	ID string
	// Minor is the Kubernetes minor version that differs (36 for v1.36.x).
	Minor int
	// NotExpressible: the scenario needs a v1beta1 feature the version's API lacks (minCount
	// mutation), rather than the scheduler behaving differently.
	NotExpressible bool
	Reason         string
}

// VersionDifferences lists them. Source references are to k8s.io/kubernetes v1.36.3 unless noted;
// gang-semantics-v1.37.md §10 summarises the changes.
func VersionDifferences() []VersionDifference {
	const (
		msgMinCount = "v1.36's gang messages are \"pod group is unschedulable[, <preemption result>]\" and \"…, waiting for minCount pods from a gang to be scheduled\"; \"minCount (N) cannot be satisfied\" comes with v1.37's PlacementFeasible (schedule_one_podgroup.go:43,248,552)"
		msgPrefix   = "v1.36 appends the group preemption result without the \"pod group preemption:\" prefix (podgrouppreemption.go:139-142, schedule_one_podgroup.go:248; §10 L488)"
		immutable   = "gang.minCount is immutable in scheduling.k8s.io/v1alpha2: the whole spec.schedulingPolicy is +k8s:immutable (v1alpha2 types.go:373), so the PATCH gets 422; mutable from v1.37 (§10 L419)"
		noPrio      = "v1.36 has no pod-to-PodGroup priority check at scheduling time (added in v1.37, §10 L478): the group schedules"
		schedName   = "v1.36 checks schedulerName only among queued pods, so a pre-bound member of another scheduler counts toward the quorum, and writes no PodGroup condition for it (schedule_one_podgroup.go:54-91; §10 L685)"
		noMetric    = "metric or label new in v1.37: "
	)
	d := func(id, reason string) VersionDifference { return VersionDifference{ID: id, Minor: 36, Reason: reason} }
	ne := func(id, reason string) VersionDifference {
		return VersionDifference{ID: id, Minor: 36, NotExpressible: true, Reason: reason}
	}
	return []VersionDifference{
		d("EXP-2b", msgMinCount),
		d("EXP-3", msgMinCount),
		d("MIN-06", msgMinCount+"; "+msgPrefix),
		d("MIN-07", msgMinCount),
		d("STA-14", msgMinCount),
		d("PRE-33", noMetric+"scheduler_workload_preemption_attempts_total and scheduler_workload_preemption_victims (v1.36 counts a group's preemption in scheduler_preemption_victims, executor.go:223)"),
		d("BAR-03", noMetric+"v1.36 counts pods of an incomplete group in scheduler_pending_pods{queue=\"gated\"}; queue=\"incomplete\" does not exist (metrics.go:583-600)"),
		d("BAR-10", "v1.36 has no entity queue: a gated member still counts toward the group (eventhandlers.go:215), the others are tried and wait at Permit, so they get FailedScheduling and PodScheduled=False (scheduling_queue.go:684-697; §10 Queue)"),
		d("BAR-11", "follows BAR-10's v1.36 difference: the other members were already tried and backed off"),
		d("BAR-12", "a basic group has no PreEnqueue barrier in v1.36: its ungated members bind at once (gangscheduling.go:139-143)"),
		d("BAR-13", "follows BAR-12's v1.36 difference: the ungated members are already bound"),
		ne("MIN-09", immutable),
		ne("MIN-10", immutable),
		ne("STA-04", immutable),
		ne("STA-05", immutable+"; STA-05 follows STA-04's change"),
		ne("MIN-28", immutable),
		ne("MIN-29", immutable+"; MIN-29 follows MIN-28's change"),
		ne("VAL-25", immutable),
		ne("VAL-10", immutable),
		ne("MIN-18", immutable),
		ne("MIN-20", immutable),
		d("BAR-19", "v1.36 has no entity queue: a gated member does not gate the others, which bind once room appears (see BAR-10; scheduling_queue.go:684-697)"),
		d("BAR-20", "follows BAR-19's v1.36 difference: the other members are already bound"),
		d("STA-17", noMetric+"scheduler_pending_pods{queue=\"incomplete\"}; v1.36 counts those pods as gated (metrics.go:583-600)"),
		d("MIN-13", noPrio),
		d("MIN-19", noPrio),
		d("MIN-14", noPrio),
		d("MIN-15", schedName),
		d("MIN-16", schedName),
		d("PRE-03", "v1.36's workload-aware preemption gives the preempting pods no nominatedNodeName (schedule_one_podgroup.go:571; preemptor NNN is new in v1.37, §10 L516)"),
		d("PRE-04", "after a successful group preemption v1.36 keeps the message \"pod group is unschedulable\"; \"pod group preemption: found a placement…\" is new in v1.37 (schedule_one_podgroup.go:243-245; §10 L526)"),
		d("PRE-06", noMetric+"scheduler_workload_preemption_attempts_total (§10 L479)"),
		d("PRE-07", msgPrefix),
		d("PRE-14", msgPrefix),
		d("PRE-16", msgPrefix),
		d("OBS-06", noMetric+"scheduler_queued_entities (entity queue, §10 L472)"),
		d("OBS-07", noMetric+"scheduler_pending_pods{queue=\"incomplete\"}; v1.36 counts those pods as gated"),
		d("OBS-08", noMetric+"scheduler_workload_preemption_victims; v1.36 observes group victims in scheduler_preemption_victims (executor.go:223)"),
		d("OBS-09", noMetric+"scheduler_preemption_evaluation_duration_seconds"),
		d("OBS-10", "in v1.36 group pods run the per-pod PostFilter too, and DefaultPreemption counts scheduler_preemption_attempts_total even when it declines (default_preemption.go:135-155; skipped in v1.37, §10 L525)"),
		d("OBS-11", noMetric+"the PlacementFeasible extension point (§10 L475); v1.36 checks the gang at Permit"),
		d("OBS-12", noMetric+"the PodGroupPostFilter extension point (§10 L377); v1.36 calls workload-aware preemption directly"),
		d("VAL-09", "v1.36's PodGroupWorkloadExists admission plugin (on by default) rejects a PodGroup whose Workload does not exist with 403; the check was removed in v1.37 (§10 L678)"),
		d("VAL-11", "v1.36 rejects the whole spec.schedulingPolicy change as immutable and returns early, without \"field cannot be cleared once set\""),
		d("VAL-13", "still rejected as immutable, but v1alpha2 names the field spec.podGroupTemplateRef, not spec.workloadRef"),
		d("VAL-17", "v1.36's template list is immutable as a whole: adding one gives \"field is immutable\", not \"item may not be added\""),
		d("VAL-18", "v1.36's template list is immutable as a whole: removing one gives \"field is immutable\", not \"item may not be removed\""),
		d("VAL-19", "v1.36 has no cross-template priority check: the Workload is accepted"),
	}
}

// DifferenceFor returns the difference recorded for an assertion on that Kubernetes version.
func DifferenceFor(id, kubernetesVersion string) (VersionDifference, bool) {
	minor := clusters.MinorOf(kubernetesVersion)
	for _, d := range VersionDifferences() {
		if d.ID == id && d.Minor == minor {
			return d, true
		}
	}
	return VersionDifference{}, false
}

// NotComparable lists, for a comparison of two Kubernetes versions, the assertions whose statement
// holds on one and not the other by design, with why. Empty when both are the same minor.
func NotComparable(oldVersion, newVersion string) map[string]string {
	a, b := clusters.MinorOf(oldVersion), clusters.MinorOf(newVersion)
	out := map[string]string{}
	if a == b {
		return out
	}
	for _, d := range VersionDifferences() {
		if d.Minor != a && d.Minor != b {
			continue
		}
		out[d.ID] = fmt.Sprintf("v1.%d differs: %s", d.Minor, d.Reason)
	}
	return out
}

// notExpressibleText is how an ErrNotExpressible reads in a failure message (tests print errors with
// %v, so the sentinel's text is what survives).
func notExpressibleText() string { return gangapi.ErrNotExpressible.Error() }

// ApplyVersionDifferences rewrites the cases of a run against kubernetesVersion: a failure of an
// assertion listed for that version, or one that failed because its scenario cannot be written in
// the served API version, becomes a skip saying so and keeping what was observed. Passes stay passes
// and unlisted failures stay failures.
func ApplyVersionDifferences(cases []results.Case, kubernetesVersion string) []results.Case {
	out := slices.Clone(cases)
	for i := range out {
		out[i] = ApplyVersionDifference(out[i], kubernetesVersion)
	}
	return out
}

// ApplyVersionDifference is ApplyVersionDifferences for one case.
func ApplyVersionDifference(c results.Case, kubernetesVersion string) results.Case {
	if c.Verdict != results.Fail || kubernetesVersion == "" {
		return c
	}
	if d, ok := DifferenceFor(c.ID, kubernetesVersion); ok {
		kind := "differs in " + kubernetesVersion
		if d.NotExpressible {
			kind = "not expressible in " + kubernetesVersion + "'s gang API"
		}
		c.Verdict = results.Skip
		c.Message = fmt.Sprintf("%s (not comparable with v1.37): %s\nobserved: %s", kind, d.Reason, c.Message)
		return c
	}
	if strings.Contains(c.Message, notExpressibleText()) {
		c.Verdict = results.Skip
		c.Message = "not expressible in " + kubernetesVersion + "'s gang API: " + c.Message
	}
	return c
}
