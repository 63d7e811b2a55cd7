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
	// Cond, when set, must be contained in the block's controlling condition (see Uncovered.Cond).
	Cond string
	Kind Kind
	Why  string
}

func (r Rule) matches(path string, u Uncovered) bool {
	return (r.Path == "" || r.Path == path) &&
		(r.Func == nil || r.Func.MatchString(u.Func)) &&
		(r.Cond == "" || strings.Contains(u.Cond, r.Cond))
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
		if r.matches(path, u) {
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
		cpgWhy   = "reached only for a CompositePodGroup or a PodGroup with a parent, which need the CompositePodGroup gate (alpha, off): the scheduler watches CompositePodGroups only with it (eventhandlers.go:672) and honours a parent only with it (workload_forest.go:347, gangscheduling.go:237)"
		tasWhy   = "the placement-based algorithm, chosen only with the TopologyAwareWorkloadScheduling gate (alpha, off; schedule_one_podgroup.go:1279)"
		recurWhy = "the recursive algorithm for a tree of groups: runRootSchedulingAlgorithm calls it only for a CompositePodGroup root with the CompositePodGroup gate (schedule_one_podgroup.go:470)"
	)
	re := regexp.MustCompile
	return []Rule{
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
		// What only a plugin's or the cache's internal failure reaches.
		{Cond: "IsError()", Kind: InternalError, Why: "a plugin returned an Error status: no object a client makes causes one in a correct scheduler"},
		{Cond: "!assumeStatus.IsSuccess()", Kind: InternalError, Why: "assuming a pod in the cache fails only when the cache already holds it (an internal inconsistency)"},
		{Path: sched, Func: re(`^Scheduler\.podGroupSchedulingDefaultAlgorithm$`), Cond: "!podResult.status.IsSuccess() && !podResult.status.IsRejected()", Kind: InternalError, Why: "a pod's result that is neither success nor rejection is an Error status"},
		{Path: "pkg/scheduler/framework/preemption/podgrouppreemption.go", Func: re(`selectVictimsOnDomain$`), Cond: "!status.IsSuccess()", Kind: InternalError, Why: "removing or adding a pod on a copy of a node's info fails only on an internal error (a PreFilter extension's)"},
		{Path: sched, Func: re(`^revertFns\.revert$`), Kind: Unobservable, Why: "a nil revert list is a guard; every caller passes one"},
		// Defensive checks of the informers and the cache's own bookkeeping.
		{Path: "pkg/scheduler/eventhandlers.go", Cond: "!ok", Kind: InternalError, Why: "the typed PodGroup informer delivers only PodGroups: the type check is defensive"},
		{Path: "pkg/scheduler/eventhandlers.go", Func: re(`deletePodGroup$`), Cond: "default", Kind: InternalError, Why: "the typed PodGroup informer delivers only PodGroups: the type check is defensive"},
		{Path: "pkg/scheduler/eventhandlers.go", Cond: "DeletedFinalStateUnknown", Kind: Unobservable, Why: "only when the informer missed a PodGroup's delete and relisted; no client action causes a watch gap on cue"},
		{Path: "pkg/scheduler/backend/cache/cache.go", Func: re(`PodGroupMember$|^cacheImpl\.(UpdatePodGroup|RemovePodGroup)$`), Cond: "!exists", Kind: InternalError, Why: "the cache creates a group's state with its first member or its PodGroup; an update or removal for a group it does not hold follows an internal inconsistency"},
		{Path: "pkg/scheduler/backend/cache/podgroupstate.go", Func: re(`^podGroupStateData\.(assumePod|forgetPod)$`), Cond: "if !ok", Kind: InternalError, Why: "assuming a member the group's state does not hold: an internal inconsistency"},
		{Path: "pkg/scheduler/backend/cache/podgroupstate.go", Func: re(`^podGroupStateData\.forgetPod$`), Cond: "pod == nil", Kind: InternalError, Why: "forgetting a member the group's state does not hold: an internal inconsistency"},
		{Path: sched, Func: re(`^Scheduler\.skipPodGroupPodSchedule$`), Kind: Unobservable, Why: "skips members deleted or already assumed between the queue's pop and the cycle: a race of milliseconds no client can place on cue"},
		{Path: pre, Func: re(`^toPodNames$`), Kind: Logging, Why: "called only to log victims at -v=6 (podgrouppreemption.go:289)"},
		{Path: state, Func: re(`^podGroupState\.(AllPods|AssignedPods)$`), Kind: Unobservable, Why: "no caller in v1.37.2 outside tests"},
		{Path: queue, Func: re(`^PriorityQueue\.IncompletePodGroupPodsPods$`), Kind: Unobservable, Why: "no caller in v1.37.2 outside tests"},
		{Path: queue, Func: re(`^PriorityQueue\.AddAttemptedPodGroupIfNeeded$`), Cond: "if p.", Kind: InternalError, Why: "the cycle's group was popped: finding it queued again is an internal inconsistency, returned as an error"},
		{Path: queue, Func: re(`^PriorityQueue\.AddAttemptedPodGroupIfNeeded$`), Cond: "rootInfo == nil", Kind: InternalError, Why: "\"shouldn't happen\" (the source's words): a removed group's pods were moved out first"},
		// Reachable and observable, not yet run: what a suite would have to do.
		{Path: queue, Func: re(`^PriorityQueue\.DeletePodGroup$`), Kind: Gap, Why: "a PodGroup removed (finalizer gone) while its members are queued, unschedulable or in backoff: they must move to the incomplete queue and wait for it again (STA-17 removes one under bound members only)"},
		{Path: pre, Func: re(`^(PodGroupEvaluator\.isOngoingPreemption|buildCurrentNominatingInfos)$`), Kind: Gap, Why: "a group retried while its earlier preemption is still under way (victims slow to go, e.g. held by a finalizer): it must not preempt more"},
		{Path: pre, Func: re(`^PodGroupEvaluator\.Preempt$`), Cond: "isOngoingPreemption", Kind: Gap, Why: "a group retried while its earlier preemption is still under way (victims slow to go, e.g. held by a finalizer): it must not preempt more"},
		{Path: state, Func: re(`^podGroupStateData\.updatePod$`), Kind: Gap, Why: "a waiting member bound by another component (pods/binding) after its creation must count as assigned"},
		// Topology-aware placements.
		{Path: sched, Func: re(`^(Scheduler\.podGroupSchedulingPlacementAlgorithm|Scheduler\.findBestPodGroupPlacement|Scheduler\.findBestPlacement|makePodGroupAssignments)$`), Kind: Gated, Why: tasWhy},
		{Path: helper, Func: re(`^MatchingSchedulingGroup$`), Kind: Unobservable, Why: "no caller in v1.37.2 outside tests: dead code"},
	}
}
