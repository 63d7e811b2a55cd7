package framework

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A wait for a PodGroup condition or an event has no state of its own that says "this will never
// come": the scheduler that writes no conditions (gang scheduling off) or the wrong reason simply
// never writes the awaited one. What makes the outcome certain is the lane around it: once the
// scheduler has decided every pod it owns, nothing is terminating or nominated, and nothing (pods,
// the condition, the events) has changed for settleFor, no scheduling cycle is left to write what
// the wait wants, because v1.37 writes a group's condition and its pods' events in the same cycle
// that decides the pods (gang-semantics §3.4, §4). Stopping there keeps a red run about as long as a
// green one instead of running every such wait to its timeout.

// settleFor is how long a decided lane must stay unchanged before a condition or event wait gives
// up. It must outlast the scheduler's longest retry backoff (podMaxBackoffSeconds, 10 s by default):
// a pod that failed a few attempts and was woken by the last change (a victim gone) may wait that
// long in the backoff queue before its next cycle. It is still well below the 30–45 s those waits allow.
const settleFor = 12 * time.Second

// finalCheckEvery spaces the extra reads (pods, events) a condition wait makes to judge finality,
// so that many parallel waits do not multiply the API traffic of their 100 ms polls.
const finalCheckEvery = 500 * time.Millisecond

// laneState is one reading of what could still change a lane.
type laneState struct {
	// print changes whenever a pod's decision, node, nomination or deletion, or the lane's events, change.
	print string
	// open names what the scheduler has still to do ("" when every pod it owns is decided and
	// nothing is terminating or nominated).
	open string
	// summary is print for a person.
	summary string
}

// readLaneState classifies the lane's pods and events for finality. Pods of another scheduler are
// nobody's to decide here, so they do not hold a lane open.
func readLaneState(pods []corev1.Pod, events []corev1.Event, scheduler string) laneState {
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	var print, summary strings.Builder
	var open []string
	counts := map[PodState]int{}
	for i := range pods {
		p := &pods[i]
		s := StateOf(p)
		reason := PodScheduledReason(p)
		fmt.Fprintf(&print, "%s=%s/%s@%s~%s;", p.Name, s, reason, p.Spec.NodeName, p.Status.NominatedNodeName)
		counts[s]++
		switch {
		case p.DeletionTimestamp != nil:
			open = append(open, p.Name+" is terminating")
		case p.Status.NominatedNodeName != "":
			open = append(open, p.Name+" is nominated to "+p.Status.NominatedNodeName)
		case p.Spec.SchedulerName != scheduler && p.Spec.SchedulerName != "":
		case s == Untouched:
			open = append(open, p.Name+" is not decided yet")
		case s == Unschedulable && reason == corev1.PodReasonSchedulingGated:
			open = append(open, p.Name+" is gated")
		}
	}
	if len(pods) == 0 {
		open = append(open, "no pods yet")
	}
	n := int32(0)
	for _, e := range events {
		n += max(e.Count, 1)
		if e.Series != nil {
			n += e.Series.Count
		}
	}
	fmt.Fprintf(&print, "events=%d/%d", len(events), n)
	fmt.Fprintf(&summary, "%d pods: %d bound, %d unschedulable, %d undecided; %d events", len(pods), counts[Bound], counts[Unschedulable], counts[Untouched], len(events))
	if len(open) > 3 {
		open = append(open[:3], fmt.Sprintf("and %d more", len(open)-3))
	}
	return laneState{print: print.String(), open: strings.Join(open, ", "), summary: summary.String()}
}

// settle tracks, across the polls of one wait, how long a decided lane has stayed the same.
type settle struct {
	print   string
	since   time.Time
	checked time.Time
	last    laneState
}

// due reports whether the lane should be read again (finality is judged at most every finalCheckEvery).
func (s *settle) due(now time.Time) bool { return now.Sub(s.checked) >= finalCheckEvery }

// observe records one reading (extra is the waited-for object's own state, e.g. its condition) and
// reports whether the lane has been decided and unchanged for window.
func (s *settle) observe(now time.Time, st laneState, extra string, window time.Duration) bool {
	s.checked = now
	s.last = st
	print := st.print + "|" + extra
	if st.open != "" || print != s.print {
		s.print = print
		s.since = now
		return false
	}
	return now.Sub(s.since) >= window
}

// laneSettled reads the lane and feeds s; it reports true once the outcome can no longer change.
func (l *Lane) laneSettled(ctx context.Context, s *settle, extra string) (bool, error) {
	now := time.Now()
	if !s.due(now) {
		return false, nil
	}
	pods, err := l.Pods(ctx)
	if err != nil {
		return false, err
	}
	evs, err := l.Events(ctx, "")
	if err != nil {
		return false, err
	}
	return s.observe(now, readLaneState(pods, evs, l.Env.SchedulerName), extra, l.Env.Scaled(settleFor)), nil
}

// settledWhy says why a settled wait stopped, for its failure message.
func (s *settle) settledWhy(window time.Duration) string {
	return fmt.Sprintf("the scheduler has decided every pod of the lane (%s) and nothing has changed for %s, so no cycle is left to write it", s.last.summary, window)
}

// PollSettled is Poll that also gives up, with an error that says why, once the lane has settled
// (see settle) while cond still does not hold: for the waits whose outcome only the scheduler's
// next cycle could change (a victim deleted, a condition message, a metric that rises with a cycle).
// cond's state is part of what must stay unchanged.
func (l *Lane) PollSettled(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, string, error)) error {
	var quiet settle
	settled := false
	var last string
	err := Poll(ctx, timeout, what, func(ctx context.Context) (bool, string, error) {
		ok, state, err := cond(ctx)
		if err != nil || ok {
			return ok, state, err
		}
		last = state
		done, err := l.laneSettled(ctx, &quiet, state)
		if err != nil {
			return false, state, err
		}
		if done {
			settled = true
			return true, state, nil
		}
		return false, state + "; lane: " + quiet.last.summary, nil
	})
	if err != nil {
		return err
	}
	if settled {
		return fmt.Errorf("gave up waiting for %s: last seen: %s; %s", what, last, quiet.settledWhy(l.Env.Scaled(settleFor)))
	}
	return nil
}

// EventuallySettled is PollSettled failing the test.
func (l *Lane) EventuallySettled(ctx context.Context, t testing.TB, timeout time.Duration, what string, cond func(context.Context) (bool, string, error)) {
	t.Helper()
	if err := l.PollSettled(ctx, timeout, what, cond); err != nil {
		t.Fatal(err)
	}
}
