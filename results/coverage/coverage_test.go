package coverage

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const src = `package queue

func AddPodGroup(x int) int {
	if x > 0 {
		return 1
	}
	return 0
}

func Other() int {
	return 2
}
`

// TestReport: blocks merged across counter files (a block run in any counts), shared files
// narrowed to their gang functions, uncovered blocks named by function, missing files flagged.
func TestReport(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "pkg", "queue")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "q.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	const f = "k8s.io/kubernetes/pkg/queue/q.go"
	profile := "mode: set\n" +
		f + ":3.29,4.11 1 1\n" + // the if: ran
		f + ":4.11,6.3 1 0\n" + // return 1: never in this file...
		f + ":4.11,6.3 1 1\n" + // ...but in the next counter file
		f + ":7.2,7.10 1 0\n" + // return 0: never
		f + ":10.18,12.2 1 0\n" // Other: not gang code
	blocks, err := ParseProfile(strings.NewReader(profile))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 4 {
		t.Fatalf("%d blocks after merging, want 4: %+v", len(blocks), blocks)
	}
	rs, err := Report(blocks, []Target{
		{Path: "pkg/queue/q.go", Funcs: regexp.MustCompile("PodGroup")},
		{Path: "pkg/queue/gone.go"},
	}, nil, root)
	if err != nil {
		t.Fatal(err)
	}
	q := rs[0]
	if q.Statements != 3 || q.Covered != 2 || len(q.Uncovered) != 1 || q.Uncovered[0].Func != "AddPodGroup" || q.Uncovered[0].StartLine != 7 {
		t.Errorf("report %+v, want 2 of 3 statements, AddPodGroup line 7 uncovered, Other left out", q)
	}
	if !rs[1].Missing {
		t.Errorf("a file not in the source is not flagged: %+v", rs[1])
	}
	md := Markdown("t", rs)
	for _, want := range []string{"2 of 3 (66.7 %)", "| AddPodGroup | 7-7 | 1 | after if x &gt; 0 returned | gap |", "not in this source"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	h, err := HTML("t", rs, blocks, root)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h, "<span class=r>\treturn 0</span>") || !strings.Contains(h, "<span class=c>\t\treturn 1</span>") || strings.Contains(h, "<span class=r>\treturn 2") {
		t.Errorf("html marks the wrong lines:\n%s", h)
	}
}

func TestParseProfileErrors(t *testing.T) {
	_, err := ParseProfile(strings.NewReader("mode: set\nnot a block\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("err %v, want one naming line 2", err)
	}
}

const explainSrc = `package queue

func DeletePodGroup(x int, err error) error {
	if err != nil {
		return err
	}
	switch {
	case x > 2 && x < 5:
		return nil
	}
	if logger.V(5).Enabled() {
		x++
	}
	if feature.DefaultFeatureGate.Enabled(features.TopologyAwareWorkloadScheduling) {
		x++
	} else {
		x--
	}
	return nil
}
`

// TestExplain: each uncovered block gets the condition around it and a kind: from a rule first,
// else from what the condition shows (an error check, a log level, a gate), else a gap; gated
// statements leave the target's denominator.
func TestExplain(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "pkg", "e.go"), []byte(explainSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	const f = "k8s.io/kubernetes/pkg/e.go"
	profile := "mode: set\n" +
		f + ":3.45,4.16 1 1\n" + // the entry: ran
		f + ":4.16,6.3 1 0\n" + // return err
		f + ":8.22,9.13 1 0\n" + // case x > 2 && x < 5
		f + ":11.27,13.3 1 0\n" + // V(5)
		f + ":14.82,16.3 1 0\n" + // gate on
		f + ":16.8,18.3 1 1\n" // gate off: ran
	blocks, err := ParseProfile(strings.NewReader(profile))
	if err != nil {
		t.Fatal(err)
	}
	rules := []Rule{
		{Func: regexp.MustCompile("^DeletePodGroup$"), Cond: "x < 5", Kind: Unobservable, Why: "because"},
		// A gap rule never takes a block behind an off gate: that block stays gated below.
		{Func: regexp.MustCompile("^DeletePodGroup$"), Cond: "TopologyAware", Kind: Gap, Why: "a suite would have to"},
	}
	rs, err := Report(blocks, []Target{{Path: "pkg/e.go"}}, rules, root)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		cond string
		kind Kind
	}{
		{"if err != nil", InternalError},
		{"case x > 2 && x < 5", Unobservable},
		{"if logger.V(5).Enabled()", Logging},
		{"if feature.DefaultFeatureGate.Enabled(features.TopologyAwareWorkloadScheduling)", Gated},
	}
	got := rs[0].Uncovered
	if len(got) != len(want) {
		t.Fatalf("uncovered %+v, want %d blocks", got, len(want))
	}
	for i, w := range want {
		if got[i].Cond != w.cond || got[i].Kind != w.kind {
			t.Errorf("block %d: cond %q kind %q, want %q %q", i, got[i].Cond, got[i].Kind, w.cond, w.kind)
		}
	}
	if r := rs[0]; r.Reachable() != r.Statements-1 {
		t.Errorf("reachable %d of %d statements, want all but the gated one", r.Reachable(), r.Statements)
	}
	if md := Markdown("t", rs); !strings.Contains(md, "| DeletePodGroup | 8-9 | 1 | case x &gt; 2 && x &lt; 5 | not observable | because |") {
		t.Errorf("markdown lacks the explained block:\n%s", md)
	}
}

// TestGateCond: only a block that runs with a gate on is gated; a negated gate or its else runs
// with the default.
func TestGateCond(t *testing.T) {
	for cond, want := range map[string]Kind{
		"if utilfeature.DefaultFeatureGate.Enabled(features.CompositePodGroup) && pgi.CompositePodGroup != nil": Gated,
		"if pl.isCompositePodGroupEnabled":              Gated,
		"if fts.EnableCompositePodGroup":                Gated,
		"if !pl.isCompositePodGroupEnabled":             Gap,
		"else of if pl.isCompositePodGroupEnabled":      Gap,
		"if x || pl.isCompositePodGroupEnabled":         Gap,
		"if pg.Spec.ParentCompositePodGroupName == nil": Gap,
		"if err := p.Update(); err != nil":              InternalError,
	} {
		if got, why := Explain(nil, "f.go", Uncovered{Cond: cond}); got != want {
			t.Errorf("%q: %s (%s), want %s", cond, got, why, want)
		}
	}
	if _, why := Explain(nil, "f.go", Uncovered{Cond: "if utilfeature.DefaultFeatureGate.Enabled(features.TopologyAwareWorkloadScheduling)"}); !strings.Contains(why, "TopologyAwareWorkloadScheduling") {
		t.Errorf("the reason does not name the gate: %s", why)
	}
}

// TestControlling: the condition shown is the innermost one, or the last early return before the
// block; a gate counts at any depth, and an early return on a gate that is off dominates the
// early returns after it.
func TestControlling(t *testing.T) {
	const src = "package p\n\nfunc f() {\n\tif fts.EnableX {\n\t\tif a {\n\t\t\tb()\n\t\t}\n\t}\n\tif !pl.isXEnabled {\n\t\treturn\n\t}\n\tif err != nil {\n\t\treturn\n\t}\n\tc()\n}\n"
	root := t.TempDir()
	path := filepath.Join(root, "p.go")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	pf, err := parse(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		line, col  int
		cond, gate string
	}{
		{5, 8, "if a", "if fts.EnableX"},
		{15, 2, "after if !pl.isXEnabled returned", "after if !pl.isXEnabled returned"},
		{12, 2, "after if !pl.isXEnabled returned", "after if !pl.isXEnabled returned"},
	} {
		cond, gate := controlling(pf.fset, pf.file, pf.pos(c.line, c.col))
		if cond != c.cond || gate != c.gate {
			t.Errorf("line %d: cond %q gate %q, want %q %q", c.line, cond, gate, c.cond, c.gate)
		}
	}
}

// TestRules: every rule says what it is and why, and names a file of the gang code if any.
func TestRules(t *testing.T) {
	paths := map[string]bool{"": true}
	for _, g := range GangCode() {
		paths[g.Path] = true
	}
	for i, r := range Rules() {
		if r.Kind == "" || r.Why == "" {
			t.Errorf("rule %d (%s %v %q) lacks a kind or a reason", i, r.Path, r.Func, r.Cond)
		}
		if !paths[r.Path] {
			t.Errorf("rule %d names %s, not a file of GangCode()", i, r.Path)
		}
	}
}

// TestRuleCondPrefix: a Cond starting with "if " names the if's own block, not the normal path
// after an if that returned; any other Cond matches wherever it is contained.
func TestRuleCondPrefix(t *testing.T) {
	anchored := Rule{Cond: "if !exists", Kind: InternalError, Why: "w"}
	contained := Rule{Cond: "!exists", Kind: InternalError, Why: "w"}
	for _, c := range []struct {
		r    Rule
		cond string
		want bool
	}{
		{anchored, "if !exists", true},
		{anchored, "after if !exists returned", false},
		{anchored, "if ok && !exists", false},
		{contained, "if !exists", true},
		{contained, "after if !exists returned", true},
	} {
		if got := c.r.matches("f.go", Uncovered{Cond: c.cond}); got != c.want {
			t.Errorf("Cond %q on %q: matches %v, want %v", c.r.Cond, c.cond, got, c.want)
		}
	}
}

// TestRulesV1372: sample blocks of v1.37.2's gang code get the kind their source shows; in
// particular the normal path after an early return is never taken by the rule for the return's
// own block, and the gaps beside explained blocks stay gaps.
func TestRulesV1372(t *testing.T) {
	const (
		sched  = "pkg/scheduler/schedule_one_podgroup.go"
		gang   = "pkg/scheduler/framework/plugins/gangscheduling/gangscheduling.go"
		queue  = "pkg/scheduler/backend/queue/scheduling_queue.go"
		forest = "pkg/scheduler/backend/queue/workload_forest.go"
		cache  = "pkg/scheduler/backend/cache/cache.go"
		state  = "pkg/scheduler/backend/cache/podgroupstate.go"
	)
	rules := Rules()
	for _, c := range []struct {
		path, fn, cond string
		want           Kind
	}{
		// A deleting member (finalizer) is skipped on cue: not a race.
		{sched, "Scheduler.skipPodGroupPodSchedule", "if sched.skipPodSchedule(ctx, schedFwk, podInfo.Pod)", Gap},
		{sched, "Scheduler.updateUnscheduledPods", "after if pgi.CompositePodGroup != nil returned", Gap},
		{sched, "Scheduler.updateUnscheduledPods", "if pgi.CompositePodGroup != nil", Gated},
		{sched, "Scheduler.validatePodGroup", "if _, ok := sched.Profiles[schedulerName]; !ok", InternalError},
		{sched, "Scheduler.validatePodGroup", "after if _, ok := sched.Profiles[schedulerName]; !ok returned", Gap},
		{sched, "Scheduler.validatePodGroup", "if pPreemptionPolicy != pgPreemptionPolicy", Gap},
		{sched, "Scheduler.submitPodGroupAlgorithmResult", "default", InternalError},
		{sched, "Scheduler.submitPodGroupAlgorithmResult", "if podGroupResult.waitingOnPreemption", Gap},
		// The placement algorithm's error checks are gated like the rest of it.
		{sched, "Scheduler.podGroupSchedulingPlacementAlgorithm", "after if result.status.IsError() returned", Gated},
		{gang, "GangScheduling.isSchedulableAfterPodGroupAdded", "if pod.Spec.SchedulingGroup == nil", InternalError},
		{gang, "GangScheduling.isSchedulableAfterPodGroupAdded", "if pl.areSameHierarchy(logger, pod.Namespace, *pod.Spec.SchedulingGroup.PodGroupName, addedPodGroupKey)", Gap},
		{gang, "GangScheduling.areSameHierarchy", "if !ok1", Gated},
		{queue, "PriorityQueue.isEntityWorthRequeuing", "if bestStrategy == queueImmediately", Unobservable},
		{queue, "PriorityQueue.isEntityWorthRequeuing", "after if bestStrategy == queueImmediately returned", Gap},
		{queue, "PriorityQueue.deletePodGroupMember", "if pInfo == nil", Unobservable},
		{queue, "PriorityQueue.deletePodGroupMember", "after if pInfo == nil returned", Gap},
		{queue, "PriorityQueue.deletePodGroupMember", "for range pInfo.UnschedulablePlugins.Union(pInfo.PendingPlugins)", Gap},
		{queue, "PriorityQueue.DeletePodGroup", "if !hadRoot", Gated},
		{queue, "PriorityQueue.DeletePodGroup", "if !p.activeQ.isLastPoppedEntity(rootInfoLookup)", Gap},
		{queue, "PriorityQueue.DeletePodGroup", "after if !p.activeQ.isLastPoppedEntity(rootInfoLookup) returned", Unobservable},
		{queue, "PriorityQueue.DeletePodGroup", "after if entity == nil returned", Gap},
		{queue, "PriorityQueue.DeletePodGroup", "if !rootInfo.HasQueuedPodInfos()", Gap},
		{queue, "PriorityQueue.DeletePodGroup", "after if !rootInfo.HasQueuedPodInfos() returned", Gated},
		{queue, "PriorityQueue.GetPodGroup", "", Unobservable},
		{forest, "workloadForest.getLeafPodGroups", "if !exists", Unobservable},
		{forest, "workloadForest.getLeafPodGroups", "after if !exists returned", Gap},
		{forest, "workloadForest.getLeafPodGroups", "if pg, isPG := wf.podGroups[childKey]; isPG", Gated},
		{cache, "cacheImpl.forgetPodGroupMember", "if !exists", InternalError},
		{cache, "cacheImpl.forgetPodGroupMember", "after if !exists returned", Gap},
		{cache, "cacheImpl.buildPodGroupStateSnapshotTree", "case fwk.PodGroupKeyType", Gated},
		{state, "podGroupStateData.updatePod", `if oldPod.Spec.NodeName == "" && newPod.Spec.NodeName != ""`, Unobservable},
		{state, "podGroupState.forgetPod", "", Gap},
	} {
		got, why := Explain(rules, c.path, Uncovered{Func: c.fn, Cond: c.cond})
		if got != c.want {
			t.Errorf("%s %s %q: %s (%s), want %s", c.path, c.fn, c.cond, got, why, c.want)
		}
	}
	if _, why := Explain(rules, forest, Uncovered{Func: "workloadForest.getLeafPodGroups", Cond: "if pg, isPG := wf.podGroups[childKey]; isPG"}); !strings.Contains(why, "CompositePodGroup") {
		t.Errorf("a child lookup in the tree walk is explained by the condition's look-alike gate: %s", why)
	}
}
