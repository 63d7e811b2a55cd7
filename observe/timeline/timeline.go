// Package timeline records what a pod watch saw, in one clock: PodGroup and pod creates (from the load
// generator or a suite), binds and deletions (from the watch), and checks such a timeline for gangs
// partially placed below minCount and for the first bind after a fault. perf measures with it and
// the faults suite judges with it, so both apply the same rules; it lives under observe/ so that
// neither imports the other.
package timeline

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// Event kinds in a timeline (and in events.jsonl).
const (
	// PodGroupCreated: the load generator's create call for a PodGroup returned. It carries the
	// group's quorum and policy so a timeline can be checked on its own, from the file.
	PodGroupCreated = "podGroupCreated"
	// PodCreated: the load generator's create call for a pod returned, or, for a pod a controller
	// made (ControllerLabel), the watch first saw it.
	PodCreated = "podCreated"
	// JobCreated: the load generator's create call for a Job returned; Job names it. The job
	// controller then makes the group, whose PodGroupCreated carries the same Job.
	JobCreated = "jobCreated"
	// PodBound: the watch first saw the pod with spec.nodeName set.
	PodBound = "podBound"
	// PodDeleted: the watch first saw the pod terminating or gone (a preemption victim, here).
	PodDeleted = "podDeleted"
)

// Event is one line of events.jsonl. Times are when this process observed the event: for creates,
// when the API call returned; for binds and deletions, when the watch delivered them. Both sides
// of every latency are therefore seen through the same clock.
type Event struct {
	// Scenario and Rep say which run of which scenario the event belongs to; the runner stamps
	// them when it writes events.jsonl, which holds every scenario of a run.
	Scenario string    `json:"scenario,omitempty"`
	Rep      int       `json:"rep,omitempty"`
	Time     time.Time `json:"t"`
	Kind     string    `json:"kind"`
	Phase    string    `json:"phase,omitempty"`
	Group    string    `json:"group,omitempty"`
	Pod      string    `json:"pod,omitempty"`
	Node     string    `json:"node,omitempty"`
	// Job is the Job a group was made for (JobCreated, and the PodGroupCreated of its group).
	Job string `json:"job,omitempty"`
	// MinCount, Policy and DisruptionMode describe the group on PodGroupCreated.
	MinCount       int    `json:"minCount,omitempty"`
	Policy         string `json:"policy,omitempty"`
	DisruptionMode string `json:"disruptionMode,omitempty"`
	// Ahead marks a PodGroupCreated made before the measured window together with all of its
	// phase's PodGroups (arrival: schedulerPerf); such a group arrives with its first pod.
	Ahead bool `json:"ahead,omitempty"`
}

// Timeline is an append-only, concurrency-safe event log with the few indexes the runner needs
// while a repetition is in flight (how many pods of which phases are bound).
type Timeline struct {
	mu      sync.Mutex
	events  []Event
	bound   map[string]string // pod → phase, for pods seen bound
	byPhase map[string]int    // phase → bound pods
	notify  chan struct{}
	onBound func(phase string)
}

// NewTimeline returns an empty timeline. onBound, when set, is called (outside the lock) for each
// first bind, for progress display.
func NewTimeline(onBound func(phase string)) *Timeline {
	return &Timeline{bound: map[string]string{}, byPhase: map[string]int{}, notify: make(chan struct{}, 1), onBound: onBound}
}

// Add appends an event. A second PodBound for the same pod (a relist) is dropped: the first
// observation is the bind time.
func (tl *Timeline) Add(e Event) {
	tl.mu.Lock()
	if e.Kind == PodBound {
		if _, seen := tl.bound[e.Pod]; seen {
			tl.mu.Unlock()
			return
		}
		tl.bound[e.Pod] = e.Phase
		tl.byPhase[e.Phase]++
	}
	tl.events = append(tl.events, e)
	cb := tl.onBound
	tl.mu.Unlock()
	if e.Kind == PodBound {
		select {
		case tl.notify <- struct{}{}:
		default:
		}
		if cb != nil {
			cb(e.Phase)
		}
	}
}

// Changed is signalled (coalesced) after binds, so a waiter can re-check counts without polling.
func (tl *Timeline) Changed() <-chan struct{} { return tl.notify }

// BoundIn is the number of pods seen bound in the given phases.
func (tl *Timeline) BoundIn(phases ...string) int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	n := 0
	for _, p := range phases {
		n += tl.byPhase[p]
	}
	return n
}

// Events returns a copy of the events in the order they were added.
func (tl *Timeline) Events() []Event {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return slices.Clone(tl.events)
}

// Sorted returns events ordered by time; events of equal time keep the order they were added in.
func Sorted(events []Event) []Event {
	out := slices.Clone(events)
	slices.SortStableFunc(out, func(a, b Event) int { return a.Time.Compare(b.Time) })
	return out
}

// WriteJSONL writes one JSON object per line, the raw record of a run (vegeta's results file):
// reports and checks can be recomputed from it without a cluster.
func WriteJSONL(w io.Writer, events []Event) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, e := range events {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadJSONL reads events written by WriteJSONL, rejecting unknown fields and kinds.
func ReadJSONL(r io.Reader) ([]Event, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	var out []Event
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var e Event
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		switch e.Kind {
		case PodGroupCreated, PodCreated, PodBound, PodDeleted, JobCreated:
		default:
			return nil, fmt.Errorf("line %d: unknown event kind %q", line, e.Kind)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
