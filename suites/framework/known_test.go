package framework

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/observe/monitor"
)

var knownT0 = time.Date(2026, 11, 29, 16, 17, 10, 0, time.UTC)

func regression(gap time.Duration, reason, msg string) monitor.Violation {
	return monitor.Violation{
		Namespace: "ns", Name: "pg", UID: "uid-pg", Kind: monitor.KindRegression,
		Before: monitor.Transition{Time: knownT0, To: &metav1.Condition{Type: ConditionType, Status: metav1.ConditionTrue, Reason: "Scheduled"},
			From: &metav1.Condition{Type: ConditionType, Status: metav1.ConditionFalse, Reason: "Unschedulable"}},
		After: monitor.Transition{Time: knownT0.Add(gap), To: &metav1.Condition{Type: ConditionType, Status: metav1.ConditionFalse, Reason: reason, Message: msg}},
	}
}

// members returns group pg's members seen at the given offsets from the True write.
func members(offsets ...time.Duration) []monitor.Member {
	var out []monitor.Member
	for i, o := range offsets {
		out = append(out, monitor.Member{Namespace: "ns", Group: "pg", Name: "m" + string(rune('0'+i)), Seen: knownT0.Add(o)})
	}
	return out
}

func TestClassifyKnownIssue(t *testing.T) {
	const msg = "pod group is unschedulable, pod group preemption: No preemption victims found for incoming preemptor"
	bug := regression(19*time.Millisecond, "Unschedulable", msg)
	// All five members existed before the successful cycle: the race's retry of the one that did not fit.
	before := members(-3*time.Second, -3*time.Second, -2*time.Second, -2*time.Second, -time.Second)
	wasTrue := regression(19*time.Millisecond, "Unschedulable", msg)
	wasTrue.Before.From = &metav1.Condition{Type: ConditionType, Status: metav1.ConditionTrue, Reason: "Scheduled"}
	tests := []struct {
		name    string
		vs      []monitor.Violation
		members []monitor.Member
		version string
		known   bool
	}{
		{"the v1.37.2 race", []monitor.Violation{bug}, before, "v1.37.2", true},
		{"same pattern on a version without the known bug fails", []monitor.Violation{bug}, before, "v1.38.0", false},
		{"v1.37.1 is on the same line", []monitor.Violation{bug}, before, "v1.37.1", true},
		// Forks: what a build from a release tag or branch reports. The line decides, not the suffix.
		{"a dirty build of the tag", []monitor.Violation{bug}, before, "v1.37.2-dirty", true},
		{"a build past the tag on the release branch", []monitor.Violation{bug}, before, "v1.37.3-alpha.0.12+abc123", true},
		{"a fork's own suffix", []monitor.Violation{bug}, before, "v1.37.2-acme.4+0123abcd", true},
		{"a fork of the next minor fails", []monitor.Violation{bug}, before, "v1.38.0-acme.1", false},
		{"a version that is not semantic fails", []monitor.Violation{bug}, before, "unknown", false},
		{"no version fails", []monitor.Violation{bug}, before, "", false},
		{"the same race seen on v1.36.3", []monitor.Violation{bug}, before, "v1.36.3", true},
		{"a fork built as v0.0.0-master fails", []monitor.Violation{bug}, before, "v0.0.0-master", false},
		{"a late regression is not the race", []monitor.Violation{regression(5*time.Second, "Unschedulable", msg)}, before, "v1.37.2", false},
		{"a SchedulerError regression is not the race", []monitor.Violation{regression(10*time.Millisecond, "SchedulerError", "pod group is unschedulable")}, before, "v1.37.2", false},
		// What a scheduler without the keep-True rule does when members are added once the gang is True.
		{"a flip on members added after the True write is not the race", []monitor.Violation{bug}, append(members(5*time.Millisecond), before...), "v1.37.2", false},
		{"a True that had been True before is not a fresh write", []monitor.Violation{wasTrue}, before, "v1.37.2", false},
		{"a group that regresses twice is not the race", []monitor.Violation{bug, bug}, before, "v1.37.2", false},
		{"another group's new member does not matter", []monitor.Violation{bug},
			append(before, monitor.Member{Namespace: "ns", Group: "other", Name: "x", Seen: knownT0.Add(time.Millisecond)}), "v1.37.2", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			unexpected, known := Classify(tt.vs, tt.version, tt.members)
			if tt.known && (len(known) != len(tt.vs) || len(unexpected) != 0) {
				t.Errorf("unexpected=%v known=%v, want all known", unexpected, known)
			}
			if !tt.known && (len(known) != 0 || len(unexpected) != len(tt.vs)) {
				t.Errorf("unexpected=%v known=%v, want none known", unexpected, known)
			}
		})
	}
}

// rewrite is a True group rewritten gap after its first True write, with a lastTransitionTime
// shift seconds later than the first one.
func rewrite(gap time.Duration, shift int) monitor.Violation {
	first := metav1.NewTime(knownT0.Add(-200 * time.Millisecond).Truncate(time.Second))
	again := metav1.NewTime(first.Add(time.Duration(shift) * time.Second))
	return monitor.Violation{
		Namespace: "ns", Name: "pg", UID: "uid-pg", Kind: monitor.KindTransitionTime,
		Before: monitor.Transition{Time: knownT0, To: &metav1.Condition{Type: ConditionType, Status: metav1.ConditionTrue, Reason: "Scheduled", LastTransitionTime: first}},
		After:  monitor.Transition{Time: knownT0.Add(gap), To: &metav1.Condition{Type: ConditionType, Status: metav1.ConditionTrue, Reason: "Scheduled", LastTransitionTime: again}},
	}
}

// TestClassifyStaleRewrite: KNOWN-02, the lastTransitionTime a successful cycle stamps again on a
// stale cached PodGroup (stop 19's CI: team-a rewritten 58 ms after its first True, 40 s -> 41 s).
func TestClassifyStaleRewrite(t *testing.T) {
	bug := rewrite(58*time.Millisecond, 1)
	wasTrue := rewrite(58*time.Millisecond, 1)
	wasTrue.Before.From = &metav1.Condition{Type: ConditionType, Status: metav1.ConditionTrue, Reason: "Scheduled"}
	fromFalse := rewrite(58*time.Millisecond, 1)
	fromFalse.Before.From = &metav1.Condition{Type: ConditionType, Status: metav1.ConditionFalse, Reason: "Unschedulable"}
	otherReason := rewrite(58*time.Millisecond, 1)
	otherReason.After.To.Reason = "Placed"
	falseRewrite := rewrite(58*time.Millisecond, 1)
	falseRewrite.Before.To.Status, falseRewrite.After.To.Status = metav1.ConditionFalse, metav1.ConditionFalse
	tests := []struct {
		name    string
		vs      []monitor.Violation
		version string
		known   bool
	}{
		{"the v1.37.2 race", []monitor.Violation{bug}, "v1.37.2", true},
		{"the same code on v1.36.3", []monitor.Violation{bug}, "v1.36.3", true},
		{"a fork of v1.37.2 with its own suffix", []monitor.Violation{bug}, "v1.37.2-acme.4", true},
		{"after a False first", []monitor.Violation{fromFalse}, "v1.37.2", true},
		// A new member appearing in between does not matter here (a basic group gains members one by one).
		{"same pattern on a version without the known bug fails", []monitor.Violation{bug}, "v1.38.0", false},
		{"a rewrite seconds later is not the race", []monitor.Violation{rewrite(3*time.Second, 3)}, "v1.37.2", false},
		{"a time moved backwards is not a fresh stamp", []monitor.Violation{rewrite(58*time.Millisecond, -1)}, "v1.37.2", false},
		{"a time moved far ahead is not a fresh stamp", []monitor.Violation{rewrite(58*time.Millisecond, 5)}, "v1.37.2", false},
		{"a True that had been True before is not a fresh write", []monitor.Violation{wasTrue}, "v1.37.2", false},
		{"a group rewritten twice is not the race", []monitor.Violation{bug, rewrite(900*time.Millisecond, 2)}, "v1.37.2", false},
		{"a rewritten reason is not the race", []monitor.Violation{otherReason}, "v1.37.2", false},
		{"a False rewritten is not the race", []monitor.Violation{falseRewrite}, "v1.37.2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			unexpected, known := Classify(tt.vs, tt.version, members(-time.Second, 20*time.Millisecond))
			if tt.known && (len(known) != len(tt.vs) || len(unexpected) != 0 || !strings.HasPrefix(known[0], "KNOWN-02 (release line ")) {
				t.Errorf("unexpected=%v known=%v, want all known as KNOWN-02", unexpected, known)
			}
			if !tt.known && (len(known) != 0 || len(unexpected) != len(tt.vs)) {
				t.Errorf("unexpected=%v known=%v, want none known", unexpected, known)
			}
		})
	}
}
