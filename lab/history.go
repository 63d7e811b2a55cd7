package lab

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// seenCondition is one value of a PodGroup's condition as a watch delivered it, with when it arrived.
type seenCondition struct {
	Status, Reason, Message string
	At                      time.Time
}

func (c seenCondition) String() string {
	return fmt.Sprintf("%s/%s %q", c.Status, c.Reason, c.Message)
}

// staleFlipWindow bounds how soon after its first True a False counts as the stale-cache race
// below: the scheduler's informer delivers its own write within milliseconds on loopback.
const staleFlipWindow = 2 * time.Second

// conditionHistory watches one PodGroup's condition, from before its manifest is applied, so that a
// value the scheduler wrote and overwrote between two polls is still seen. The stock v1.37.2
// scheduler can write True/Scheduled for experiment 4's gang and, milliseconds later, retrying the
// member that did not fit, overwrite it with False/Unschedulable for good: its "already True?" check
// reads its informer's copy of the PodGroup, which has not yet seen its own True (gangbench's
// KNOWN-01, see suites/framework/known.go). A poll then sees only the False.
type conditionHistory struct {
	mu     sync.Mutex
	seen   []seenCondition
	err    error
	cancel context.CancelFunc
	done   chan struct{}
}

// watchCondition starts recording the condition of PodGroups named name in any namespace (the
// manifest creates the namespace, so it cannot be watched before). stop ends it.
func (r *runner) watchCondition(ctx context.Context, name string) (*conditionHistory, error) {
	w, err := r.gang.PodGroups("").Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return nil, fmt.Errorf("watch PodGroup %s: %w", name, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	h := &conditionHistory{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		defer w.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					h.fail(fmt.Errorf("the watch of PodGroup %s ended early", name))
					return
				}
				switch o := ev.Object.(type) {
				case *schedv1beta1.PodGroup:
					h.record(condition(o))
				case *metav1.Status:
					h.fail(fmt.Errorf("the watch of PodGroup %s: %s", name, o.Message))
					return
				}
			}
		}
	}()
	return h, nil
}

func (h *conditionHistory) record(c *metav1.Condition) {
	if c == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	s := seenCondition{Status: string(c.Status), Reason: c.Reason, Message: c.Message, At: time.Now()}
	if n := len(h.seen); n > 0 && h.seen[n-1].Status == s.Status && h.seen[n-1].Reason == s.Reason && h.seen[n-1].Message == s.Message {
		return
	}
	h.seen = append(h.seen, s)
}

func (h *conditionHistory) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.err = err
}

// stop ends the watch and returns what it saw; an error says the history may be incomplete.
func (h *conditionHistory) stop() ([]seenCondition, error) {
	h.cancel()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen, h.err
}

// staleFlip finds the race in a history: the first True/Scheduled, then within staleFlipWindow a
// False/Unschedulable from a cycle that found the group unschedulable, and nothing after it.
func staleFlip(seen []seenCondition) (scheduled, flipped seenCondition, ok bool) {
	if len(seen) < 2 {
		return scheduled, flipped, false
	}
	i := len(seen) - 2
	scheduled, flipped = seen[i], seen[i+1]
	for _, c := range seen[:i] {
		if c.Status == string(metav1.ConditionTrue) {
			return scheduled, flipped, false
		}
	}
	ok = scheduled.Status == string(metav1.ConditionTrue) && scheduled.Reason == "Scheduled" &&
		flipped.Status == string(metav1.ConditionFalse) && flipped.Reason == "Unschedulable" &&
		strings.Contains(flipped.Message, "pod group is unschedulable") &&
		flipped.At.Sub(scheduled.At) < staleFlipWindow
	return scheduled, flipped, ok
}
