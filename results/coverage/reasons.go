package coverage

import (
	"bytes"
	"go/ast"
	"go/printer"
	"go/token"
	"regexp"
	"strings"
)

// Kind is why a block of the gang code did not run in a correct run of the suites.
type Kind string

const (
	// Gated blocks run only with a feature gate set otherwise than by default. They are left out of
	// the statements the target counts ("what v1.37 runs with its default gates").
	Gated Kind = "gated"
	// InternalError blocks handle an error of a call (the apiserver, a lister, the scheduler's own
	// cache or framework) that a correct cluster does not return for objects a client can make.
	InternalError Kind = "internal error"
	// Logging blocks only log, at a verbosity above the one the harness runs the scheduler at.
	Logging Kind = "logging only"
	// Unobservable blocks are reachable, but what they decide shows nowhere a client can see; each
	// has its own reason in the rules.
	Unobservable Kind = "not observable"
	// Gap blocks are reachable with the default gates and observable from outside: no suite makes
	// them run yet. They are the work left.
	Gap Kind = "gap"
)

// Rule explains the uncovered blocks it matches.
type Rule struct {
	// Path is the target's path; "" matches every file.
	Path string
	// Func matches the enclosing function's name ("Type.Method"); nil matches every function.
	Func *regexp.Regexp
	// Cond, when set, must be contained in the block's controlling condition (see Uncovered.Cond); a
	// Cond that starts with "if " must start it, so that it names the if's own block and not the code
	// after an if that returned ("after if … returned"), which is the normal path.
	Cond string
	Kind Kind
	Why  string
}

func (r Rule) matches(path string, u Uncovered) bool {
	return (r.Path == "" || r.Path == path) &&
		(r.Func == nil || r.Func.MatchString(u.Func)) &&
		(r.Cond == "" || strings.Contains(u.Cond, r.Cond) && (!strings.HasPrefix(r.Cond, "if ") || strings.HasPrefix(u.Cond, r.Cond)))
}

// What the controlling condition alone says about a block, when no rule names it. Each pattern is
// narrow on purpose: a wrong guess would hide a gap.
var (
	errCond = regexp.MustCompile(`^if .*\b\w*[eE]rr\w* != nil\b`)
	logCond = regexp.MustCompile(`\.V\(\d+\)|\bloggerV\b`)
	// gateCond: an if whose condition is a gate, or starts with one and &&: the block runs only
	// with the gate on. A negated gate or its else runs with the gate off, so it is not matched.
	gateCond = regexp.MustCompile(`^(?:if (?:[^;]*; )?|after if !)(?:\w+\.)*(?:DefaultFeatureGate\.Enabled\(features\.(\w+)\)|(?:is|[Ee]nable)(\w*?)(?:Enabled)?)(?: &&| returned$|$)`)
)

// Explain gives the block's kind and reason: the first rule that matches, else what its controlling
// condition shows (an error check, a log level, a feature gate), else a gap.
func Explain(rules []Rule, path string, u Uncovered) (Kind, string) {
	for _, r := range rules {
		// A gap rule says what a suite would have to do; a block behind an off gate with the same
		// function and condition (an if in the gate's branch and its twin in the other) stays gated.
		if r.matches(path, u) && (r.Kind != Gap || u.Gate == "") {
			return r.Kind, r.Why
		}
	}
	gate := u.Gate
	if gate == "" && gateCond.MatchString(u.Cond) {
		gate = u.Cond
	}
	switch {
	case gate != "":
		m := gateCond.FindStringSubmatch(gate)
		return Gated, "runs only with the " + m[1] + m[2] + " feature gate on (off by default)"
	case logCond.MatchString(u.Cond):
		return Logging, "only logs, at a verbosity above the scheduler's default (-v=0), which the harness keeps"
	case errCond.MatchString(u.Cond):
		return InternalError, "handles an error of a call a correct cluster does not fail"
	}
	return Gap, ""
}

// controlling returns the condition that decides whether the code at pos runs: the innermost if
// (with its init statement; "else of …" inside an else), case clause, or loop around it, as source
// text; "after if c returned" below an early return (the last one before it); "" when pos is in a
// function's own body (the block runs when the function does). gate is the condition of an
// enclosing if (or early return) that holds only with a feature gate on, at any depth.
func controlling(fset *token.FileSet, f *ast.File, pos token.Pos) (out, gate string) {
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil || pos < n.Pos() || pos > n.End() {
			return n == nil
		}
		switch s := n.(type) {
		case *ast.FuncLit:
			if inBlock(s.Body, pos) {
				out = ""
			}
		case *ast.FuncDecl:
			if s.Body != nil && inBlock(s.Body, pos) {
				out = ""
			}
		case *ast.BlockStmt:
			// Code after `if c { …; return }` runs only when c did not hold: name the last such c
			// (after `if !gate { return }`, only with the gate on, like an if's body).
			gated := false
			for _, st := range s.List {
				if st.Pos() >= pos {
					break
				}
				if c, ok := earlyReturn(fset, st); ok && !gated {
					out = "after if " + c + " returned"
					gated = gateCond.MatchString(out)
				}
			}
		case *ast.IfStmt:
			cond := "if " + nodeText(fset, s.Cond)
			if s.Init != nil {
				cond = "if " + nodeText(fset, s.Init) + "; " + nodeText(fset, s.Cond)
			}
			switch {
			case inBlock(s.Body, pos):
				out = cond
				if gateCond.MatchString(cond) {
					gate = cond
				}
			case s.Else != nil && pos >= s.Else.Pos() && pos <= s.Else.End():
				if _, isIf := s.Else.(*ast.IfStmt); !isIf {
					out = "else of " + cond
				}
			}
		case *ast.CaseClause:
			if pos > s.Colon { // a clause's block starts after its colon
				if s.List == nil {
					out = "default"
				} else {
					out = "case " + srcList(fset, s.List)
				}
			}
		case *ast.CommClause:
			if pos > s.Colon {
				if s.Comm == nil {
					out = "default"
				} else {
					out = "case " + nodeText(fset, s.Comm)
				}
			}
		case *ast.RangeStmt:
			if inBlock(s.Body, pos) {
				out = "for range " + nodeText(fset, s.X)
			}
		case *ast.ForStmt:
			if inBlock(s.Body, pos) {
				out = "for " + nodeText(fset, s.Cond)
			}
		}
		return true
	})
	if gateCond.MatchString(out) {
		gate = out
	}
	return out, gate
}

// earlyReturn reports whether st is `if c { …; return }` without else, and c.
func earlyReturn(fset *token.FileSet, st ast.Stmt) (string, bool) {
	is, ok := st.(*ast.IfStmt)
	if !ok || is.Else != nil || len(is.Body.List) == 0 {
		return "", false
	}
	if _, ret := is.Body.List[len(is.Body.List)-1].(*ast.ReturnStmt); !ret {
		return "", false
	}
	if is.Init != nil {
		return nodeText(fset, is.Init) + "; " + nodeText(fset, is.Cond), true
	}
	return nodeText(fset, is.Cond), true
}

func inBlock(b *ast.BlockStmt, pos token.Pos) bool {
	return b != nil && pos >= b.Lbrace && pos <= b.Rbrace
}

// nodeText prints a node on one line, shortened: enough for a reader to recognise the condition.
func nodeText(fset *token.FileSet, n ast.Node) string {
	if n == nil {
		return ""
	}
	var b bytes.Buffer
	if err := printer.Fprint(&b, fset, n); err != nil {
		return "?"
	}
	s := strings.Join(strings.Fields(b.String()), " ")
	if r := []rune(s); len(r) > 100 {
		s = string(r[:99]) + "…"
	}
	return s
}

func srcList(fset *token.FileSet, es []ast.Expr) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = nodeText(fset, e)
	}
	return strings.Join(parts, ", ")
}

// Rules explains the blocks of v1.37's gang code that the suites do not run, read from the v1.37.2
// source (line numbers below are of that version). A rule names whole functions only where every
// caller is behind the same gate; the rest are named by function and condition.
func Rules() []Rule {
	const (
		sched    = "pkg/scheduler/schedule_one_podgroup.go"
		gang     = "pkg/scheduler/framework/plugins/gangscheduling/gangscheduling.go"
		helper   = "pkg/scheduler/framework/plugins/helper/podgroup.go"
		pre      = "pkg/scheduler/framework/preemption/podgrouppreemption.go"
		state    = "pkg/scheduler/backend/cache/podgroupstate.go"
		queue    = "pkg/scheduler/backend/queue/scheduling_queue.go"
		forest   = "pkg/scheduler/backend/queue/workload_forest.go"
		members  = "pkg/scheduler/backend/queue/pod_group_member_pods.go"
		activeQ  = "pkg/scheduler/backend/queue/active_queue.go"
		cacheGo  = "pkg/scheduler/backend/cache/cache.go"
		cpgWhy   = "reached only for a CompositePodGroup or a PodGroup with a parent, which need the CompositePodGroup gate (alpha, off): the scheduler watches CompositePodGroups only with it (eventhandlers.go:672) and honours a parent only with it (workload_forest.go:347, gangscheduling.go:237)"
		tasWhy   = "the placement-based algorithm, chosen only with the TopologyAwareWorkloadScheduling gate (alpha, off; schedule_one_podgroup.go:1279)"
		recurWhy = "the recursive algorithm for a tree of groups: runRootSchedulingAlgorithm calls it only for a CompositePodGroup root with the CompositePodGroup gate (schedule_one_podgroup.go:470)"
	)
	re := regexp.MustCompile
	return []Rule{
		// Not gated, though the condition names CompositePodGroup: the plain PodGroup's path after the
		// composite branch returned (before the Cond "CompositePodGroup" rule below, which would take it).
		{Path: sched, Func: re(`^Scheduler\.updateUnscheduledPods$`), Cond: "after if pgi.CompositePodGroup != nil returned", Kind: Gap, Why: "a plain PodGroup's path, run with the default gates whenever skipPodGroupPodSchedule drops a member: e.g. a member deleted while a finalizer holds it is skipped with a \"skip schedule deleting pod\" event and the rest of its gang is checked against minCount (BAR-45 makes it run)"},
		// Composite groups: every function about them, in every file of the gang code.
		{Func: re(`(?i)composite|cpg|WithHierarchies$|InHierarchy$|ForHierarchy$`), Kind: Gated, Why: cpgWhy},
		{Cond: "CompositePodGroup", Kind: Gated, Why: cpgWhy},
		{Cond: "GetChildGroups()", Kind: Gated, Why: "a group's children: " + cpgWhy},
		{Cond: "Children", Kind: Gated, Why: "a group's children: " + cpgWhy},
		{Path: sched, Func: re(`^(successfulLeafResults|Scheduler\.assumeSubtreeWithRevert)$`), Kind: Gated, Why: cpgWhy + "; callers: makeCompositePodGroupAssignments, compositePodGroupSchedulingPlacementAlgorithm and the CompositePodGroup branch of podGroupSchedulingPlacementAlgorithm (:1054)"},
		{Path: sched, Func: re(`^Scheduler\.podGroupSchedulingRecursiveAlgorithm$`), Kind: Gated, Why: recurWhy},
		{Path: gang, Func: re(`^GangScheduling\.isPGReady$`), Kind: Gated, Why: cpgWhy + "; callers: preEnqueueWithHierarchies and isCPGTreeReady (gangscheduling.go:238, :326)"},
		{Path: helper, Func: re(`^GetPodGroupStates$`), Kind: Gated, Why: "walks a group tree for workload-aware preemption only when the CompositePodGroup gate gives it a CompositePodGroup lister (preemption/types.go:293, podgrouppreemption.go:62) and for the topology-aware placement plugins (TopologyAwareWorkloadScheduling gate)"},
		{Cond: "genericWorkloadEnabled", Kind: Gated, Why: "runs only with GenericWorkload off; the gang API and the suites need it on (TestProofGangSchedulingOff runs this state without coverage)"},
		{Cond: "podGroupHasParent", Kind: Gated, Why: cpgWhy},
		{Cond: "GetType() == fwk.PodGroupKeyType returned", Kind: Gated, Why: "past the single-PodGroup case: " + cpgWhy},
		{Path: sched, Func: re(`^(podGroupPreemptionPolicy|podPreemptionPolicy)$`), Kind: Gated, Why: "the group's preemption policy, read only with the PodGroupPreemptionPolicy gate (alpha, off; schedule_one_podgroup.go:224)"},
		// Past a return that the CompositePodGroup gate decides, or where only a group tree can differ.
		{Path: gang, Func: re(`^GangScheduling\.areSameHierarchy$`), Cond: "!ok", Kind: Gated, Why: "past `if !pl.isCompositePodGroupEnabled { return … }` (gangscheduling.go:182-184): the root lookups run only with the CompositePodGroup gate"},
		{Path: gang, Func: re(`^GangScheduling\.areSameHierarchy$`), Cond: "err != nil", Kind: Gated, Why: "past `if !pl.isCompositePodGroupEnabled { return … }` (gangscheduling.go:182-184): the root lookups run only with the CompositePodGroup gate"},
		{Path: gang, Func: re(`^GangScheduling\.isSchedulableAfterPodGroupUpdated$`), Cond: "if newPolicy.Gang == nil", Kind: Gated, Why: "the hint runs only for pods GangScheduling gated, which it does only while their PodGroup has a gang policy (gangscheduling.go:266-277), and gang cannot be cleared (VAL-11); with the CompositePodGroup gate off the updated PodGroup is the pod's own (:182-183), so only a basic PodGroup in the same tree (gate on) gets here"},
		{Path: forest, Func: re(`^workloadForest\.(addPodGroup|deletePodGroup)$`), Cond: "exists", Kind: Gated, Why: "past `if !wf.podGroupHasParent(podGroup) { return }` (workload_forest.go:62, :84); podGroupHasParent is false with the CompositePodGroup gate off (:347)"},
		{Path: forest, Func: re(`^workloadForest\.getLeafPodGroups$`), Cond: "if !exists", Kind: Unobservable, Why: "at :213 the root PodGroup is gone only when it is removed during its own scheduling cycle (AddAttemptedPodGroupIfNeeded, scheduling_queue.go:1184), a race, and DeletePodGroup already moved its pending pods out, so no pods are lost; at :235 only in a CompositePodGroup tree (gate)"},
		{Path: forest, Func: re(`^workloadForest\.getLeafPodGroups$`), Cond: "queue", Kind: Gated, Why: "the CompositePodGroup walk, past the single-PodGroup return (workload_forest.go:210-218): " + cpgWhy},
		{Path: forest, Func: re(`^workloadForest\.getLeafPodGroups$`), Cond: "visited", Kind: Gated, Why: "the CompositePodGroup walk, past the single-PodGroup return (workload_forest.go:210-218): " + cpgWhy},
		{Path: forest, Func: re(`^workloadForest\.getLeafPodGroups$`), Cond: "children", Kind: Gated, Why: "the CompositePodGroup walk, past the single-PodGroup return (workload_forest.go:210-218): " + cpgWhy},
		{Path: forest, Func: re(`^workloadForest\.getLeafPodGroups$`), Cond: "childKey", Kind: Gated, Why: "the CompositePodGroup walk, past the single-PodGroup return (workload_forest.go:210-218): " + cpgWhy},
		{Path: queue, Func: re(`^PriorityQueue\.(AddPodGroup|UpdatePodGroup)$`), Cond: "if !hasRoot", Kind: Gated, Why: "the forest was just given this PodGroup under the queue's lock (scheduling_queue.go:1567, :1605), and with the CompositePodGroup gate off a PodGroup is its own root (workload_forest.go:158-166); no root only for a PodGroup whose parent CompositePodGroup is not observed yet"},
		{Path: queue, Func: re(`^PriorityQueue\.AddPodGroup$`), Cond: "entity == nil returned", Kind: Gated, Why: "a queued entity for the root exists before the PodGroup's Add only when the root is a CompositePodGroup with members queued already; with the gate off the root is the new PodGroup itself, whose entity DeletePodGroup removed (scheduling_queue.go:1634) and whose members waited in incompletePodGroupPods (:905)"},
		{Path: queue, Func: re(`^PriorityQueue\.DeletePodGroup$`), Cond: "if !hadRoot", Kind: Gated, Why: "the forest got the PodGroup at its Add (an informer delivers no delete before the add), and with the CompositePodGroup gate off a PodGroup is its own root (workload_forest.go:158-166); no root only for a PodGroup whose parent CompositePodGroup is not observed"},
		{Path: queue, Func: re(`^PriorityQueue\.DeletePodGroup$`), Cond: "HasQueuedPodInfos() returned", Kind: Gated, Why: "pods are left in the root after RemovePodGroup only when the root is a CompositePodGroup with other children; with the gate off the root is this PodGroup and RemovePodGroup takes all its pods (framework/types.go:1080-1095, :1162-1175)"},
		{Path: queue, Func: re(`^PriorityQueue\.DeletePodGroup$`), Cond: "queue == activeQ", Kind: Gated, Why: "pods are left in the root after RemovePodGroup only when the root is a CompositePodGroup with other children; with the gate off the root is this PodGroup and RemovePodGroup takes all its pods (framework/types.go:1080-1095, :1162-1175)"},
		{Path: cacheGo, Func: re(`^cacheImpl\.AddPodGroup$`), Cond: "parentExists", Kind: Gated, Why: "past `if !cache.compositePodGroupEnabled || podGroup.Spec.ParentCompositePodGroupName == nil { return }` (cache.go:1144): " + cpgWhy},
		{Path: cacheGo, Func: re(`^cacheImpl\.RemovePodGroup$`), Cond: "parent", Kind: Gated, Why: "inside `if cache.compositePodGroupEnabled && podGroup.Spec.ParentCompositePodGroupName != nil` (cache.go:1194): " + cpgWhy},
		{Path: cacheGo, Func: re(`^cacheImpl\.buildPodGroupStateSnapshotTree$`), Kind: Gated, Why: "called only by BuildHierarchySnapshotFromPod (cache.go:1334), whose callers run only with the CompositePodGroup gate: the gang plugin's PreEnqueue with hierarchies and its Permit (gangscheduling.go:210-212, :222, :369-370) and DefaultPreemption's PreEnqueue (default_preemption.go:171-180)"},
		{Path: state, Func: re(`^podGroupStateSnapshot\.(UnscheduledPods|AssumedPods|AllPodsCount)$`), Kind: Gated, Why: "the gang plugin reads these from a snapshot only on its CompositePodGroup paths (BuildHierarchySnapshotFromPod, gangscheduling.go:222, :370; then :238, :404, :410, :456, :475); with the gate off its PreEnqueue and Permit read the live cache state (:258-274, :377, :388)"},
		// Topology-aware placements (before the IsError rule: the placement algorithm's error checks are gated too).
		{Path: sched, Func: re(`^(Scheduler\.podGroupSchedulingPlacementAlgorithm|Scheduler\.findBestPodGroupPlacement|Scheduler\.findBestPlacement|makePodGroupAssignments)$`), Kind: Gated, Why: tasWhy},
		// What only a plugin's or the cache's internal failure reaches.
		{Cond: "IsError()", Kind: InternalError, Why: "a plugin returned an Error status: no object a client makes causes one in a correct scheduler"},
		{Cond: "if !assumeStatus.IsSuccess()", Kind: InternalError, Why: "assuming a pod in the cache fails only when the cache already holds it (an internal inconsistency)"},
		{Path: sched, Func: re(`^Scheduler\.podGroupSchedulingDefaultAlgorithm$`), Cond: "!podResult.status.IsSuccess() && !podResult.status.IsRejected()", Kind: InternalError, Why: "a pod's result that is neither success nor rejection is an Error status"},
		{Path: "pkg/scheduler/framework/preemption/podgrouppreemption.go", Func: re(`selectVictimsOnDomain$`), Cond: "!status.IsSuccess()", Kind: InternalError, Why: "removing or adding a pod on a copy of a node's info fails only on an internal error (a PreFilter extension's)"},
		{Path: sched, Func: re(`^revertFns\.revert$`), Kind: Unobservable, Why: "a nil revert list is a guard; every caller passes one"},
		// Defensive checks of the informers and the cache's own bookkeeping.
		{Path: "pkg/scheduler/eventhandlers.go", Cond: "if !ok", Kind: InternalError, Why: "the typed PodGroup informer delivers only PodGroups: the type check is defensive"},
		{Path: "pkg/scheduler/eventhandlers.go", Func: re(`deletePodGroup$`), Cond: "default", Kind: InternalError, Why: "the typed PodGroup informer delivers only PodGroups: the type check is defensive"},
		{Path: "pkg/scheduler/eventhandlers.go", Cond: "DeletedFinalStateUnknown", Kind: Unobservable, Why: "only when the informer missed a PodGroup's delete and relisted; no client action causes a watch gap on cue"},
		{Path: "pkg/scheduler/backend/cache/cache.go", Func: re(`PodGroupMember$|^cacheImpl\.(UpdatePodGroup|RemovePodGroup)$`), Cond: "if !exists", Kind: InternalError, Why: "the cache creates a group's state with its first member or its PodGroup; an update or removal for a group it does not hold follows an internal inconsistency"},
		{Path: "pkg/scheduler/backend/cache/podgroupstate.go", Func: re(`^podGroupStateData\.(assumePod|forgetPod)$`), Cond: "if !ok", Kind: InternalError, Why: "assuming a member the group's state does not hold: an internal inconsistency"},
		{Path: "pkg/scheduler/backend/cache/podgroupstate.go", Func: re(`^podGroupStateData\.forgetPod$`), Cond: "if pod == nil", Kind: InternalError, Why: "forgetting a member the group's state does not hold: an internal inconsistency"},
		// Checks a consistent queue, cache or plugin set never meets.
		{Path: sched, Func: re(`^Scheduler\.validatePodGroup$`), Cond: "if _, ok := sched.Profiles[schedulerName]", Kind: InternalError, Why: "the queue takes only pods whose schedulerName names a profile (responsibleForPod, eventhandlers.go:138, :192), the field is immutable, and :229 already required every member's name to equal the first one's"},
		{Path: sched, Func: re(`^Scheduler\.submitPodGroupAlgorithmResult$`), Cond: "if len(podGroupResult.podResults) != len(queuedPodInfos)", Kind: InternalError, Why: "podGroupCycle already padded the results to one per queued pod (schedule_one_podgroup.go:437, completePodGroupAlgorithmResult :712-731); the source calls a mismatch something that should never happen"},
		{Path: sched, Func: re(`^Scheduler\.submitPodGroupAlgorithmResult$`), Cond: "if !status.IsSuccess()", Kind: InternalError, Why: "prepareForBindingCycle fails only if assuming or reserving fails for a pod the algorithm assumed and reserved on the same node earlier in this cycle (:673, undone at :469), or the gang's Permit errs, which it does only when its PodGroup or state is missing; \"unlikely\" in the source's words"},
		{Path: sched, Func: re(`^Scheduler\.submitPodGroupAlgorithmResult$`), Cond: "default", Kind: InternalError, Why: "the group's status is neither Success nor a rejection: an Error, which only the internal failures above produce (:578-581, :591-595, :612-615, :624-627, :793-796, :822-828), or a Wait or Skip no in-tree plugin leaves (Wait becomes Unschedulable at :642-644); the per-pod switch (:873) has even seen Errors off at :837"},
		{Path: gang, Func: re(`^GangScheduling\.isSchedulableAfterPodGroup(Updated|Added)$`), Cond: "if pod.Spec.SchedulingGroup == nil", Kind: InternalError, Why: "a queueing hint runs only for pods its plugin rejected (scheduling_queue.go:630), and GangScheduling rejects only pods with a schedulingGroup (its PreEnqueue and Permit pass the others, gangscheduling.go:251-253, :357-359), a field that is immutable: the check is defensive"},
		{Path: pre, Func: re(`selectVictimsOnDomain$`), Cond: "if !ok", Kind: InternalError, Why: "the domain holds every node of the snapshot (preemption/types.go:226, :236-241) and a victim's nodes come from the same snapshot's Get, which knows only those nodes (types.go:471, snapshot.go:558-563): a victim outside the domain is an internal inconsistency"},
		{Path: forest, Func: re(`^workloadForest\.getRootLookupInfoForPodGroup$`), Cond: "if !exists", Kind: InternalError, Why: "every caller passes a PodGroup the forest holds: AddPodGroup and UpdatePodGroup store it just before under the queue's lock (scheduling_queue.go:1567, :1605), DeletePodGroup looks it up before removing it (:1628) and an informer delivers a delete only after the add, and getRootLookupInfoForPod passes the forest's own object (workload_forest.go:144-148)"},
		{Path: forest, Func: re(`^workloadForest\.buildPodGroupInfoForPG$`), Cond: "if visited.Has(key)", Kind: InternalError, Why: "with the gate off the only caller starts from a new empty set (workload_forest.go:327); in a CompositePodGroup tree (:307) a PodGroup sits in one parent's children only and cycles stop at buildPodGroupInfoForCPG (:287)"},
		{Path: forest, Func: re(`^workloadForest\.buildQueuedPodGroupInfo$`), Cond: "if pgi == nil", Kind: InternalError, Why: "its callers hold the queue's lock and pass a root the forest holds: addPodGroupMember found it there (scheduling_queue.go:901, :923), AddAttemptedPodGroupIfNeeded only after getLeafPodGroups found its PodGroup (:1184-1195)"},
		{Path: queue, Func: re(`^PriorityQueue\.newQueuedPodGroupInfoFromRootLookup$`), Cond: "if rootInfo == nil", Kind: InternalError, Why: "\"should never happen\" (the source's words): addPodGroupMember passes the root it found in the forest under the same lock (scheduling_queue.go:901, :923)"},
		{Path: activeQ, Func: re(`^activeQueue\.unlockedMoveEntityToInFlight$`), Cond: "inFlightPods", Kind: InternalError, Why: "a popped pod still in flight means the queue tracks one pod in two places (PR 127016): an internal inconsistency it reports as an error and discards (active_queue.go:351-357)"},
		{Path: activeQ, Func: re(`^activeQueue\.unlockedMoveEntityToInFlight$`), Cond: "podsToDiscard", Kind: InternalError, Why: "a popped pod still in flight means the queue tracks one pod in two places (PR 127016): an internal inconsistency it reports as an error and discards (active_queue.go:351-357)"},
		{Path: activeQ, Func: re(`^activeQueue\.unlockedMoveEntityToInFlight$`), Cond: "case *framework.Queued", Kind: InternalError, Why: "a popped pod still in flight means the queue tracks one pod in two places (PR 127016): an internal inconsistency it reports as an error and discards (active_queue.go:351-357)"},
		{Path: activeQ, Func: re(`^activeQueue\.unlockedMoveEntityToInFlight$`), Cond: "specificEntity", Kind: InternalError, Why: "a popped pod still in flight means the queue tracks one pod in two places (PR 127016): an internal inconsistency it reports as an error and discards (active_queue.go:351-357)"},
		{Path: activeQ, Func: re(`^activeQueue\.unlockedMoveEntityToInFlight$`), Cond: "default", Kind: InternalError, Why: "a popped pod still in flight means the queue tracks one pod in two places (PR 127016): an internal inconsistency it reports as an error and discards (active_queue.go:351-357)"},
		{Path: cacheGo, Func: re(`^podGroup(State)?ListerImpl\.Get$`), Cond: "if !exists", Kind: InternalError, Why: "the live listers are read by PreEnqueue plugins (gangscheduling.go:258, :270; default_preemption.go:172), which the queue runs only for members of a PodGroup its forest holds, and the cache gets a PodGroup before the queue and loses it before it (eventhandlers.go:479-480, :531-532); the gang Permit (gangscheduling.go:388) reads the state of a member it has just assumed: a miss needs an event between two lines"},
		{Path: cacheGo, Func: re(`^podGroupListerImpl\.Get$`), Cond: "if pg == nil", Kind: InternalError, Why: "the live listers are read by PreEnqueue plugins (gangscheduling.go:258; default_preemption.go:172), which the queue runs only for members of a PodGroup its forest holds, and the cache gets a PodGroup before the queue and loses it before it (eventhandlers.go:479-480, :531-532): a miss needs an event between two lines"},
		{Path: pre, Func: re(`^toPodNames$`), Kind: Logging, Why: "called only to log victims at -v=6 (podgrouppreemption.go:289)"},
		{Path: state, Func: re(`^podGroupState\.(AllPods|AssignedPods)$`), Kind: Unobservable, Why: "no caller in v1.37.2 outside tests"},
		{Path: queue, Func: re(`^PriorityQueue\.IncompletePodGroupPodsPods$`), Kind: Unobservable, Why: "no caller in v1.37.2 outside tests"},
		{Path: queue, Func: re(`^PriorityQueue\.AddAttemptedPodGroupIfNeeded$`), Cond: "if p.", Kind: InternalError, Why: "the cycle's group was popped: finding it queued again is an internal inconsistency, returned as an error"},
		{Path: queue, Func: re(`^PriorityQueue\.AddAttemptedPodGroupIfNeeded$`), Cond: "if rootInfo == nil", Kind: InternalError, Why: "\"shouldn't happen\" (the source's words): a removed group's pods were moved out first"},
		// Reachable only in a race, or deciding nothing a client can see, or not at all in kube-scheduler.
		{Path: sched, Func: re(`^Scheduler\.updatePodGroupConditionWithError$`), Cond: "pgi.PodGroup != nil returned", Kind: Unobservable, Why: "with the CompositePodGroup gate off PodGroup is nil only when scheduleOnePodGroup cleared it after reconcilePodGroupWithSnapshot failed (schedule_one_podgroup.go:98-104: the PodGroup removed between the queue's pop and the snapshot, a race), and then a lone PodGroup has no children to loop over"},
		{Path: sched, Func: re(`^Scheduler\.podGroupSchedulingDefaultAlgorithm$`), Cond: "if result.status.IsWait()", Kind: Unobservable, Why: "after the last pod the gang plugin's PlacementFeasible sees none remaining and returns Success or Unschedulable, never Wait (gangscheduling.go:494-505), and the loop breaks only on Unschedulable or an error: only an out-of-tree PlacementFeasible plugin could end it on Wait"},
		{Path: queue, Func: re(`^PriorityQueue\.isEntityWorthRequeuing$`), Cond: "if bestStrategy == queueImmediately", Kind: Unobservable, Why: "queueImmediately comes only from a plugin that rejected the pod with a Pending status (scheduling_queue.go:663-666), and no in-tree plugin returns Pending (framework/types.go:1460 is its only use): dead code in kube-scheduler"},
		{Path: queue, Func: re(`^PriorityQueue\.deletePodGroupMember$`), Cond: "if pInfo == nil", Kind: Unobservable, Why: "a delete or binding event for a member the queue no longer holds (already bound, or dropped as deleting at schedule_one_podgroup.go:344-347) while its PodGroup is gone: nothing to remove, and nothing changes"},
		{Path: members, Func: re(`^podGroupMemberPods\.update$`), Cond: "after if pInfo, ok", Kind: Gap, Why: "an update of a member that is in no queue and not parked (scheduling_queue.go:1447-1455), e.g. a Terminating member its group's cycle skipped and then relabelled while its finalizer holds it: the queue adds it again and the next cycle must skip it again (BAR-47 makes it run)"},
		{Path: queue, Func: re(`^PriorityQueue\.DeletePodGroup$`), Cond: "after if !p.activeQ.isLastPoppedEntity", Kind: Unobservable, Why: "the PodGroup removed during its own scheduling cycle (entity popped, not back yet, scheduling_queue.go:1636): the window between the pop and AddAttemptedPodGroupIfNeeded (schedule_one_podgroup.go:937), a race no client places on cue"},
		{Path: queue, Func: re(`^PriorityQueue\.DeletePodGroup$`), Cond: "pendingPods", Kind: Unobservable, Why: "the PodGroup removed during its own scheduling cycle (entity popped, not back yet, scheduling_queue.go:1636): the window between the pop and AddAttemptedPodGroupIfNeeded (schedule_one_podgroup.go:937), a race no client places on cue"},
		{Path: queue, Func: re(`^PriorityQueue\.(PendingPodGroupPods|GetPodGroup)$`), Kind: Unobservable, Why: "no caller in v1.37.2 outside tests (GetPodGroup: \"only used for testing\", the source says)"},
		{Path: forest, Func: re(`^workloadForest\.getPodGroup$`), Kind: Unobservable, Why: "no caller in v1.37.2 outside tests"},
		{Path: members, Func: re(`^podGroupMemberPods\.has$`), Kind: Unobservable, Why: "no caller in v1.37.2 outside tests"},
		{Path: members, Func: re(`^podGroupMemberPods\.(len|list)$`), Kind: Unobservable, Why: "called only from PriorityQueue.PendingPods (scheduling_queue.go:2102-2105), which only the cache debugger calls when the scheduler gets SIGUSR2, to write the queue into its log (debugger.go:63, dumper.go:57, comparer.go:57), and from PendingPodGroupPods and IncompletePodGroupPodsPods, which have no caller outside tests"},
		{Path: state, Func: re(`^(podGroupState\.PodGroup|podGroupStateSnapshot\.(AllPods|AssignedPods))$`), Kind: Unobservable, Why: "no caller in v1.37.2 outside tests"},
		{Path: state, Func: re(`^podGroupState\.ScheduledPods$`), Kind: Unobservable, Why: "every ScheduledPods call reads a snapshot's state, never the live cache's: schedule_one_podgroup.go:313-317, preemption/types.go:294-300 (the mutable snapshot), topology_placement.go:149-153"},
		{Path: state, Func: re(`^podGroupStateData\.(assumePod|forgetPod)$`), Cond: `Spec.NodeName != ""`, Kind: Unobservable, Why: "the stored member is already bound while the scheduler assumes or forgets it: only if another component binds it between the queue's pop and this cycle's assume or revert (a bound member leaves the queue otherwise, eventhandlers.go:181-190), a race no client places on cue"},
		{Path: state, Func: re(`^podGroupStateData\.updatePod$`), Kind: Unobservable, Why: "dead code: updatePod is reached only through UpdatePodGroupMember from updatePodInSchedulingQueue (eventhandlers.go:330), which runs only when neither the old nor the new pod has a nodeName (:159, :181, :192); a member bound by another component goes to cache.AddPod instead (:184), which counts it as assigned (podgroupstate.go:77-82)"},
		// Reachable and observable, not yet run: what a suite would have to do.
		{Path: queue, Func: re(`^PriorityQueue\.DeletePodGroup$`), Kind: Gap, Why: "a PodGroup removed (finalizer gone) while its members are queued, unschedulable or in backoff: they must move to the incomplete queue and wait for it again (BAR-43 and BAR-44 make it run)"},
		{Path: pre, Func: re(`^(PodGroupEvaluator\.isOngoingPreemption|buildCurrentNominatingInfos)$`), Kind: Gap, Why: "a group retried while its earlier preemption is still under way (victims slow to go): it must not preempt more (PRE-33 makes it run)"},
		{Path: pre, Func: re(`^PodGroupEvaluator\.Preempt$`), Cond: "isOngoingPreemption", Kind: Gap, Why: "a group retried while its earlier preemption is still under way (victims slow to go): it must not preempt more (PRE-33 makes it run)"},
		{Path: cacheGo, Func: re(`^cacheImpl\.forgetPodGroupMember$`), Kind: Gap, Why: "a member assumed and then forgotten because its binding cycle failed (a PreBind or bind error: an admission policy refusing pods/binding, a volume its provisioner cannot provision): the group's count of assumed members must drop and the member be retried (BAR-49…51 make it run: the apiserver refuses one member's binding)"},
		{Path: state, Func: re(`^podGroupState\.forgetPod$`), Kind: Gap, Why: "a member assumed and then forgotten because its binding cycle failed (a PreBind or bind error: an admission policy refusing pods/binding, a volume its provisioner cannot provision): the group's count of assumed members must drop and the member be retried (BAR-49…51 make it run: the apiserver refuses one member's binding)"},
		{Path: sched, Func: re(`^Scheduler\.validatePodGroup$`), Cond: "if pPreemptionPolicy != pgPreemptionPolicy", Kind: Gap, Why: "members of one PodGroup whose PriorityClasses have the same value but different preemption policies: the cycle must fail them all with \"should have the same preemption policy\" (SchedulerError; MIN-30 makes it run)"},
		{Path: sched, Func: re(`^Scheduler\.submitPodGroupAlgorithmResult$`), Cond: "if podGroupResult.waitingOnPreemption", Kind: Gap, Why: "a gang of which one member fits and another needs a preemption: the member that fits is reported with the group's message and the preemption's nomination, not a fit error (PRE-35 makes it run)"},
		{Path: sched, Func: re(`^Scheduler\.(scheduleOnePodGroup|skipPodGroupPodSchedule)$`), Cond: "if len(", Kind: Gap, Why: "every queued member of a popped group skipped as being deleted (all Terminating under finalizers): the attempt must end without a cycle, or members that arrive later are parked for good (BAR-47 and BAR-48 make it run)"},
		{Path: gang, Func: re(`^GangScheduling\.isSchedulableAfterPodGroupAdded$`), Cond: "areSameHierarchy", Kind: Gap, Why: "the hint for a pod the gang plugin gated, when its own PodGroup is added: members created first and their PodGroup after, with the pods rejected by GangScheduling (not merely waiting in incompletePodGroupPods); its outcome shows only in scheduler_queueing_hint_execution_duration_seconds{hint=\"Queue\"}"},
		// Helpers nothing calls.
		{Path: helper, Func: re(`^MatchingSchedulingGroup$`), Kind: Unobservable, Why: "no caller in v1.37.2 outside tests: dead code"},
	}
}
