package lab

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// reportWidth is the widest side-by-side block; longer lines are printed one block above the other.
const reportWidth = 160

// show prints a kubectl command and what it shows here next to what the lab reports.
func (r *runner) show(cmd string, here, lab []string) {
	r.say("$ %s", cmd)
	for _, l := range sideBySide(here, lab, r.o.Here, reportWidth) {
		r.say("%s", l)
	}
	r.say("")
}

func (r *runner) showGPUs(ctx context.Context, want []string) error {
	n, err := r.workerGPUs(ctx)
	if err != nil {
		return err
	}
	r.showGPUCount(n, want)
	return nil
}

// showGPUCount prints the kubectl command that shows the GPUs in use on the worker and its output
// for n: describe node's nvidia.com/gpu line, or with DRA GPUs the count of devices allocated from
// the worker's pool (the node has no nvidia.com/gpu then).
func (r *runner) showGPUCount(n int64, want []string) {
	if r.dra {
		r.show(draGPUCommand(r.o.Worker), []string{strconv.FormatInt(n, 10)}, want)
		return
	}
	r.show(fmt.Sprintf(`kubectl describe node %s | grep -E "^  nvidia.com/gpu "`, r.o.Worker), gpuLine(n), want)
}

const podColumns = `custom-columns='NAME:.metadata.name,GROUP:.spec.schedulingGroup.podGroupName,PHASE:.status.phase,NODE:.spec.nodeName'`

// runTeams applies a manifest of experiment 1 and returns the namespace's state once the scheduler
// decided on every pod and the bound ones run.
func (r *runner) runTeams(ctx context.Context, file string, basic bool, labPods, labGPUs []string) (snapshot, error) {
	ns, err := r.apply(ctx, file, basic)
	if err != nil {
		return snapshot{}, err
	}
	if err := r.waitDecided(ctx, ns); err != nil {
		return snapshot{}, err
	}
	s, err := r.waitRunning(ctx, ns)
	if err != nil {
		return s, err
	}
	r.show("kubectl -n "+ns+" get pods -o "+podColumns, podsTable(s, true), labPods)
	if err := r.showGPUs(ctx, labGPUs); err != nil {
		return s, err
	}
	return s, nil
}

// experiment1Control is the basic run; it also waits for both groups' conditions, which
// experiment 2 reads, before the namespace is deleted as the lab deletes it.
func (r *runner) experiment1Control(ctx context.Context) (snapshot, error) {
	r.say("== Experiment 1, control: basic PodGroups, pods one at a time, interleaved")
	s, err := r.runTeams(ctx, BasicControl, true, labControlPods, labControlGPUs)
	if err != nil {
		return s, err
	}
	if s, err = r.waitTeamConditions(ctx, nsBasic); err != nil {
		return s, err
	}
	r.say("$ kubectl delete ns %s --wait=true", nsBasic)
	if err := r.deleteNamespaces(ctx, nsBasic); err != nil {
		return s, err
	}
	r.say(`namespace "%s" deleted`, nsBasic)
	return s, r.showGPUs(ctx, labCleanGPUs)
}

// experiment1Gang is the gang run; it waits until the incomplete team's PodGroup says why, which
// experiments 2 and 3 read.
func (r *runner) experiment1Gang(ctx context.Context) (snapshot, error) {
	r.say("== Experiment 1, gang: the same teams as gangs of minCount 3")
	s, err := r.runTeams(ctx, NativeGang, false, labGangPods, labGangGPUs)
	if err != nil {
		return s, err
	}
	// Both conditions are awaited (bounded): a scheduler that never writes them gets its verdict
	// in experiment 2 from the last state seen, not an error here.
	s, _ = r.waitTeamConditions(ctx, nsGang)
	return s, nil
}

// waitTeamConditions waits until both teams' PodGroups in ns have their condition and returns the
// last state seen.
func (r *runner) waitTeamConditions(ctx context.Context, ns string) (snapshot, error) {
	var s snapshot
	err := r.poll(ctx, "both PodGroups of "+ns+" to have their "+conditionType+" condition", func(ctx context.Context) (bool, string, error) {
		var err error
		if s, err = r.observe(ctx, ns); err != nil {
			return false, "", err
		}
		return condition(s.group("team-a")) != nil && condition(s.group("team-b")) != nil, goValue(s.Groups), nil
	})
	return s, err
}

// winner is the team of a gang run with more pods bound, and the other.
func winner(s snapshot) (string, string) {
	if s.bound("team-b") > s.bound("team-a") {
		return "team-b", "team-a"
	}
	return "team-a", "team-b"
}

// verdict1 judges experiment 1 from both runs (seed-experiments.md: basic 2+2 with 8/8 GPUs and no
// team complete; gang one team 3/3, the other 0/3, 6/8 GPUs, never 2+1).
func verdict1(basic, gang snapshot) Verdict {
	v := Verdict{Experiment: 1, Title: "basic versus gang: the deadlock gang scheduling removes", Reproduced: true}
	a, b := basic.bound("team-a"), basic.bound("team-b")
	if a == 2 && b == 2 && basic.WorkerGPUs == 8 {
		v.Findings = append(v.Findings, "basic: 2+2 bound, team-a-2 and team-b-2 Pending, 8/8 GPUs, no team complete (as the lab)")
	} else {
		v.Reproduced = false
		v.Findings = append(v.Findings, fmt.Sprintf("basic: team-a %d bound, team-b %d bound, %d/8 GPUs; the lab has 2, 2 and 8", a, b, basic.WorkerGPUs))
	}
	w, l := winner(gang)
	if gang.bound(w) == 3 && gang.bound(l) == 0 && gang.WorkerGPUs == 6 {
		v.Findings = append(v.Findings, fmt.Sprintf("gang: %s 3/3 bound, %s 0/3, 6/8 GPUs (the lab: team-a won; which team wins is the scheduler's choice)", w, l))
	} else {
		v.Reproduced = false
		v.Findings = append(v.Findings, fmt.Sprintf("gang: %s %d bound, %s %d bound, %d/8 GPUs; the lab has one team 3/3, the other 0/3 and 6 GPUs", w, gang.bound(w), l, gang.bound(l), gang.WorkerGPUs))
	}
	return v
}

// experiment2 prints and judges the PodGroup conditions of both runs.
func (r *runner) experiment2(basic, gang snapshot) Verdict {
	r.say("== Experiment 2: basic PodGroup status does not mean running")
	r.show("kubectl -n "+nsBasic+" get podgroups.scheduling.k8s.io -o custom-columns='NAME:.metadata.name,POLICY:.spec.schedulingPolicy,STATUS:.status'   (read before the namespace was deleted)",
		basicGroupsTable(basic.Groups), labBasicGroups)
	r.show("kubectl -n "+nsGang+" get podgroups.scheduling.k8s.io -o yaml | grep -E \"^    name:|minCount|reason:|status:|message:|type:\"   (one line per group)",
		gangGroupsLines(gang.Groups), labGangGroups)
	return verdict2(basic, gang)
}

func verdict2(basic, gang snapshot) Verdict {
	v := Verdict{Experiment: 2, Title: "basic PodGroup status does not mean running", Reproduced: true}
	fail := func(format string, args ...any) {
		v.Reproduced = false
		v.Findings = append(v.Findings, fmt.Sprintf(format, args...))
	}
	var times []metav1.Time
	for _, team := range []string{"team-a", "team-b"} {
		c := condition(basic.group(team))
		switch {
		case c == nil:
			fail("basic %s has no %s condition", team, conditionType)
		case c.Status != metav1.ConditionTrue || c.Reason != "Scheduled" || c.Message != "":
			fail("basic %s is %s/%s %q; the lab has True/Scheduled with an empty message", team, c.Status, c.Reason, c.Message)
		default:
			times = append(times, c.LastTransitionTime)
		}
	}
	if len(times) == 2 {
		same := "the same second, as in the lab"
		if !times[0].Equal(&times[1]) {
			same = fmt.Sprintf("%s and %s (the lab: the same second; not part of the verdict)", times[0].UTC().Format("15:04:05"), times[1].UTC().Format("15:04:05"))
		}
		v.Findings = append(v.Findings, "basic: both True/Scheduled with an empty message although neither team is complete; transitions at "+same)
	}
	w, l := winner(gang)
	cw, cl := condition(gang.group(w)), condition(gang.group(l))
	switch {
	case cw == nil || cw.Status != metav1.ConditionTrue || cw.Reason != "Scheduled":
		fail("gang %s (complete): condition %s; want True/Scheduled", w, goValue(cw))
	case cl == nil || cl.Status != metav1.ConditionFalse || cl.Reason != "Unschedulable":
		fail("gang %s (incomplete): condition %s; want False/Unschedulable", l, goValue(cl))
	case !strings.HasPrefix(cl.Message, "minCount (3) cannot be satisfied") && !strings.Contains(cl.Message, gangMessagePrefix):
		fail("gang %s: message %q says nothing of the gang (the lab: %q; v1.37: \"minCount (3) cannot be satisfied: …\")", l, cl.Message, gangMessagePrefix)
	default:
		v.Findings = append(v.Findings, fmt.Sprintf("gang: %s True/Scheduled, %s False/Unschedulable with %q (the lab's v1alpha2 said %q)", w, l, cl.Message, gangMessagePrefix))
	}
	return v
}

// experiment3 prints the FailedScheduling events of the gang run and judges them: the pending
// team's pods carry both kinds, the resource message in the lab's words and the gang message.
func (r *runner) experiment3(ctx context.Context, gang snapshot) (Verdict, error) {
	r.say("== Experiment 3: the two kinds of FailedScheduling message")
	_, loser := winner(gang)
	var evs []corev1.Event
	// Events are written asynchronously by the scheduler's broadcaster: both kinds are awaited
	// (bounded); their absence is the verdict, not an error.
	_ = r.poll(ctx, "both kinds of FailedScheduling message on "+loser+"'s pods", func(ctx context.Context) (bool, string, error) {
		list, err := r.cs.CoreV1().Events(nsGang).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
		if err != nil {
			return false, "", err
		}
		evs = list.Items
		res, gng := messageKinds(evs, loser, r.resourceReason())
		return res != "" && gng != "", fmt.Sprintf("resource %q gang %q", res, gng), nil
	})
	r.show("kubectl -n "+nsGang+" get events --field-selector reason=FailedScheduling -o custom-columns='POD:.involvedObject.name,MSG:.message' | sort -u", eventsTable(evs), labEvents)
	v := Verdict{Experiment: 3, Title: "the two kinds of FailedScheduling message", Reproduced: true}
	res, gng := messageKinds(evs, loser, r.resourceReason())
	want := r.resourceMessage()
	switch {
	case res == "":
		v.Reproduced = false
		v.Findings = append(v.Findings, fmt.Sprintf("no pod of %s got the resource message; here it reads %q", loser, want))
	case !strings.HasPrefix(res, want):
		v.Reproduced = false
		v.Findings = append(v.Findings, fmt.Sprintf("the resource message is %q; here it starts %q", res, want))
	default:
		rest := strings.TrimSpace(strings.TrimPrefix(res, want))
		note := "and nothing after it (the lab's v1alpha2 scheduler went on with the preemption attempt's result; v1.37 leaves it out of a gang member's own fit error)"
		if rest != "" {
			note = fmt.Sprintf("then %q", rest)
		}
		if r.dra {
			v.Findings = append(v.Findings, fmt.Sprintf("resource message with DRA GPUs: %q %s (the lab's device-plugin GPUs: %q)", want, note, labResourceMessage))
		} else {
			v.Findings = append(v.Findings, fmt.Sprintf("resource message in the lab's words: %q %s", labResourceMessage, note))
		}
	}
	if gng == "" {
		v.Reproduced = false
		v.Findings = append(v.Findings, fmt.Sprintf("no pod of %s got the gang message (%q …): the pods were filtered one by one, not held back as a group", loser, gangMessagePrefix))
	} else {
		v.Findings = append(v.Findings, fmt.Sprintf("gang message: %q (the lab's version: \"…, waiting for minCount pods from a gang to be scheduled, one or more plugins asked to wait and no plugin rejected pod\")", gng))
	}
	return v, nil
}

// resourceReason is what a node without room for a pod's GPUs counts as in a FailedScheduling
// message: the lab's "Insufficient nvidia.com/gpu", or with DRA GPUs the DRA plugin's reason.
func (r *runner) resourceReason() string {
	if r.dra {
		return draResourceReason
	}
	return "Insufficient " + string(gpuResource)
}

// resourceMessage is the resource message the pending team's pods must get on the lab's three
// nodes: the lab's, or its DRA counterpart.
func (r *runner) resourceMessage() string {
	if r.dra {
		return draResourceMessage
	}
	return labResourceMessage
}

// messageKinds returns a resource message (one naming reason, a node's resource shortage) and a
// gang message among the FailedScheduling events of team's pods ("" when there is none).
func messageKinds(evs []corev1.Event, team, reason string) (resource, gang string) {
	for _, e := range evs {
		if e.Reason != "FailedScheduling" || !strings.HasPrefix(e.InvolvedObject.Name, team+"-") {
			continue
		}
		switch {
		case strings.HasPrefix(e.Message, gangMessagePrefix):
			gang = e.Message
		case strings.Contains(e.Message, reason):
			resource = e.Message
		}
	}
	return resource, gang
}

// experiment4 applies the elastic manifest (after the gang run is deleted and the GPUs are back to
// 0) and judges it: every pod that fits is bound once minCount is reachable.
func (r *runner) experiment4(ctx context.Context) (Verdict, error) {
	r.say("== Experiment 4: minCount is a threshold, not a quota")
	r.say("$ kubectl delete ns %s --wait=true", nsGang)
	if err := r.deleteNamespaces(ctx, nsGang); err != nil {
		return Verdict{}, err
	}
	if err := r.showGPUs(ctx, labCleanGPUs); err != nil {
		return Verdict{}, err
	}
	history, err := r.watchCondition(ctx, "team-c")
	if err != nil {
		return Verdict{}, err
	}
	ns, err := r.apply(ctx, Elastic, false)
	if err != nil {
		_, _ = history.stop()
		return Verdict{}, err
	}
	if err := r.waitDecided(ctx, ns); err != nil {
		_, _ = history.stop()
		return Verdict{}, err
	}
	// A member marked unschedulable in one cycle can be bound in the next (the pods arrive one by
	// one): the final count is awaited within the window, and what was seen last is judged.
	var s snapshot
	_ = r.poll(ctx, "4 of team-c bound and running, 1 unschedulable, the group's condition written", func(ctx context.Context) (bool, string, error) {
		var err error
		if s, err = r.observe(ctx, ns); err != nil {
			return false, "", err
		}
		running := 0
		for _, p := range s.Pods {
			if p.bound() && p.Phase == string(corev1.PodRunning) {
				running++
			}
		}
		return running == 4 && s.pending("team-c") == 1 && condition(s.group("team-c")) != nil, s.String(), nil
	})
	r.show("kubectl -n "+ns+" get pods -o custom-columns='NAME:.metadata.name,PHASE:.status.phase,NODE:.spec.nodeName'", podsTable(s, false), labElasticPods)
	r.show("kubectl -n "+ns+" get podgroups.scheduling.k8s.io -o custom-columns='NAME:.metadata.name,MIN:.spec.schedulingPolicy.gang.minCount,STATUS:.status.conditions[0].reason'", elasticGroupsTable(s.Groups), labElasticGroups)
	r.showGPUCount(s.WorkerGPUs, labElasticGPUs)
	seen, herr := history.stop()
	v := verdict4(s, seen)
	if herr != nil && !v.Reproduced {
		v.Findings = append(v.Findings, fmt.Sprintf("the condition's history may be incomplete: %v", herr))
	}
	return v, nil
}

// verdict4 judges experiment 4 from the final snapshot and the condition's history (seen, from a
// watch): a True/Scheduled that the stale-cache race overwrote with False is the lab's outcome plus
// a scheduler bug, reported as such rather than as a lab that did not reproduce.
func verdict4(s snapshot, seen []seenCondition) Verdict {
	v := Verdict{Experiment: 4, Title: "minCount is a threshold, not a quota", Reproduced: true}
	c := condition(s.group("team-c"))
	bound, pending := s.bound("team-c"), s.pending("team-c")
	counts := bound == 4 && pending == 1 && s.WorkerGPUs == 8
	if counts && c != nil && c.Status == metav1.ConditionTrue && c.Reason == "Scheduled" {
		v.Findings = append(v.Findings, "4 of 5 bound, 1 Pending, True/Scheduled, 8/8 GPUs: every pod that fits is bound, not just minCount (as the lab)")
		return v
	}
	if scheduled, flipped, ok := staleFlip(seen); counts && c != nil && ok && string(c.Status) == flipped.Status && c.Message == flipped.Message {
		v.Findings = append(v.Findings,
			"4 of 5 bound, 1 Pending, 8/8 GPUs: every pod that fits is bound, not just minCount (as the lab)",
			fmt.Sprintf("but the PodGroup was %s, then %s later %s for good: a scheduler bug, not the lab's point "+
				"(retrying the fifth member, the scheduler judged \"already True?\" on its cached PodGroup, which had not yet seen its own True; gangbench reports it as KNOWN-01)",
				scheduled, flipped.At.Sub(scheduled.At).Round(time.Millisecond), flipped))
		return v
	}
	v.Reproduced = false
	v.Findings = append(v.Findings, fmt.Sprintf("%d bound, %d Pending, %d/8 GPUs, condition %s; the lab has 4, 1, 8 and True/Scheduled", bound, pending, s.WorkerGPUs, goValue(c)))
	if len(seen) > 0 {
		v.Findings = append(v.Findings, fmt.Sprintf("the condition's history: %v", seen))
	}
	if bound == 3 {
		v.Findings = append(v.Findings, "exactly minCount bound: the scheduler treats minCount as a quota")
	}
	return v
}

// summary prints the verdicts.
func (r *runner) summary(res Result) {
	r.say("== Verdicts")
	for _, v := range res.Verdicts {
		word := "REPRODUCED"
		if !v.Reproduced {
			word = "DIFFERS"
		}
		r.say("experiment %d, %s: %s", v.Experiment, v.Title, word)
		for _, f := range slices.Clone(v.Findings) {
			r.say("  - %s", f)
		}
	}
}
