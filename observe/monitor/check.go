package monitor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Transition is one observed change of a PodGroup's condition (or the object's first sighting or
// deletion). From and To are nil when the condition is absent.
type Transition struct {
	Time            time.Time         `json:"time"`
	Namespace       string            `json:"namespace"`
	Name            string            `json:"name"`
	UID             types.UID         `json:"uid"`
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Generation      int64             `json:"generation,omitempty"`
	From            *metav1.Condition `json:"from,omitempty"`
	To              *metav1.Condition `json:"to,omitempty"`
	Event           string            `json:"event"`
}

func (t Transition) deepCopy() Transition {
	t.From = t.From.DeepCopy()
	t.To = t.To.DeepCopy()
	return t
}

// Violation kinds, so callers can tell the monotonicity rule apart from the bookkeeping rules.
const (
	// KindRegression: the condition was True and then became False, Unknown or absent.
	KindRegression = "Regression"
	// KindObservedGeneration: observedGeneration decreased.
	KindObservedGeneration = "ObservedGenerationRegression"
	// KindTransitionTime: lastTransitionTime changed although status did not.
	KindTransitionTime = "LastTransitionTimeChanged"
)

// Violation is a scheduler bug found in a timeline: Before is the observation the rule was judged
// against and After the one that broke it.
type Violation struct {
	Namespace, Name string
	UID             types.UID
	Kind            string
	Before, After   Transition
	Reason          string
}

// timeFormat is wall-clock with milliseconds: runs last minutes, and two writes in one second
// must still be told apart in a report.
const timeFormat = "15:04:05.000"

// Violations are errors so callers can hand them to t.Error or errors.Join as they are.
var _ error = Violation{}

func (v Violation) Error() string {
	ctype := DefaultConditionType
	switch {
	case v.Before.To != nil:
		ctype = v.Before.To.Type
	case v.After.To != nil:
		ctype = v.After.To.Type
	}
	if v.Kind == KindRegression {
		return fmt.Sprintf("podgroup %s/%s: %s went %s -> %s", v.Namespace, v.Name, ctype, state(v.Before), state(v.After))
	}
	return fmt.Sprintf("podgroup %s/%s: %s %s: %s -> %s", v.Namespace, v.Name, ctype, v.Reason, state(v.Before), state(v.After))
}

func (v Violation) String() string { return v.Error() }

// state renders the condition a transition ended in, e.g. `False (Unschedulable "0/4 nodes", 16:02:05.456)`.
func state(t Transition) string {
	at := t.Time.Format(timeFormat)
	c := t.To
	if c == nil {
		if t.Event == EventDeleted {
			return fmt.Sprintf("absent (deleted, %s)", at)
		}
		return fmt.Sprintf("absent (%s)", at)
	}
	detail := c.Reason
	if c.Message != "" {
		detail += fmt.Sprintf(" %q", c.Message)
	}
	if detail != "" {
		detail += ", "
	}
	return fmt.Sprintf("%s (%s%s)", c.Status, detail, at)
}

// Check finds violations in a timeline. Each UID is judged on its own, in the order given, so a
// PodGroup deleted and recreated under the same name starts fresh. Rules:
//   - True must stay True while the object lives: a later False, Unknown or absent condition is a
//     Regression. A deletion is not, unless the deleted object's final state itself shows the
//     condition no longer True, which proves it went back while the object still existed.
//   - observedGeneration must not decrease.
//   - lastTransitionTime must not change while status stays the same. (The converse, a flip that
//     keeps lastTransitionTime, is not flagged: the API stores it with one-second precision, so
//     False then True within a second legitimately shows the same time.)
func Check(ts []Transition) []Violation {
	type track struct {
		prev    *Transition // last observation of the UID
		lastSet *Transition // last observation in which the condition was present
	}
	tracks := map[types.UID]*track{}
	var out []Violation
	for i := range ts {
		t := &ts[i]
		tr := tracks[t.UID]
		if tr == nil {
			tr = &track{}
			tracks[t.UID] = tr
		}
		violate := func(kind string, before *Transition, reason string) {
			out = append(out, Violation{
				Namespace: t.Namespace, Name: t.Name, UID: t.UID, Kind: kind,
				Before: before.deepCopy(), After: t.deepCopy(), Reason: reason,
			})
		}
		cur := t.To
		if p := tr.prev; p != nil && p.To != nil && p.To.Status == metav1.ConditionTrue {
			deletedWithoutState := t.Event == EventDeleted && cur == nil
			if !deletedWithoutState && (cur == nil || cur.Status != metav1.ConditionTrue) {
				violate(KindRegression, p, "returned from True to "+statusName(cur))
			}
		}
		if ls := tr.lastSet; ls != nil && cur != nil {
			if cur.ObservedGeneration < ls.To.ObservedGeneration {
				violate(KindObservedGeneration, ls, fmt.Sprintf("observedGeneration went backwards from %d to %d",
					ls.To.ObservedGeneration, cur.ObservedGeneration))
			}
			if p := tr.prev; p != nil && p.To != nil && p.To.Status == cur.Status && !p.To.LastTransitionTime.Equal(&cur.LastTransitionTime) {
				violate(KindTransitionTime, p, fmt.Sprintf("lastTransitionTime changed from %s to %s while status stayed %s",
					rfc3339(p.To.LastTransitionTime), rfc3339(cur.LastTransitionTime), cur.Status))
			}
		}
		tr.prev = t
		if cur != nil {
			tr.lastSet = t
		}
	}
	return out
}

func statusName(c *metav1.Condition) string {
	if c == nil {
		return "absent"
	}
	return string(c.Status)
}

func rfc3339(t metav1.Time) string {
	if t.IsZero() {
		return "unset"
	}
	return t.UTC().Format(time.RFC3339)
}

// WriteJSON writes a timeline as a JSON array, one transition per line so recorded runs diff and
// grep well.
func WriteJSON(w io.Writer, ts []Transition) error {
	var buf bytes.Buffer
	buf.WriteString("[")
	for i, t := range ts {
		if i > 0 {
			buf.WriteString(",")
		}
		buf.WriteString("\n")
		b, err := json.Marshal(t)
		if err != nil {
			return fmt.Errorf("transition %d: %w", i, err)
		}
		buf.Write(b)
	}
	if len(ts) > 0 {
		buf.WriteString("\n")
	}
	buf.WriteString("]\n")
	_, err := w.Write(buf.Bytes())
	return err
}

// ReadJSON reads a timeline written by WriteJSON (or by hand), or any JSON object that holds one
// under "transitions", such as a run report, so a finished run can be re-checked offline. It
// rejects entries Check could not judge correctly: a missing UID would merge unrelated objects, and
// an unknown event would be mistaken for a modification.
func ReadJSON(r io.Reader) ([]Transition, error) {
	dec := json.NewDecoder(r)
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("read timeline: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("read timeline: data after the JSON value")
	}
	var ts []Transition
	if trimmed := bytes.TrimSpace(raw); len(trimmed) > 0 && trimmed[0] == '{' {
		var report struct {
			Transitions *[]Transition `json:"transitions"`
		}
		if err := json.Unmarshal(raw, &report); err != nil {
			return nil, fmt.Errorf("read timeline: %w", err)
		}
		if report.Transitions == nil {
			return nil, errors.New(`read timeline: JSON object has no "transitions"`)
		}
		ts = *report.Transitions
	} else if err := json.Unmarshal(raw, &ts); err != nil {
		return nil, fmt.Errorf("read timeline: %w", err)
	}
	for i, t := range ts {
		if t.UID == "" {
			return nil, fmt.Errorf("read timeline: transition %d (%s/%s): no uid", i, t.Namespace, t.Name)
		}
		switch t.Event {
		case EventAdded, EventModified, EventDeleted:
		default:
			return nil, fmt.Errorf("read timeline: transition %d (%s/%s): unknown event %q (accepted: %s, %s, %s)", i, t.Namespace, t.Name, t.Event, EventAdded, EventModified, EventDeleted)
		}
		// Check compares statuses with True exactly: a "true" or "Maybe" written by hand would be
		// judged a regression from True (or never True), so it is refused rather than misjudged.
		for _, c := range []struct {
			field string
			cond  *metav1.Condition
		}{{"from", t.From}, {"to", t.To}} {
			if c.cond == nil {
				continue
			}
			switch c.cond.Status {
			case metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown:
			default:
				return nil, fmt.Errorf("read timeline: transition %d (%s/%s): %s.status %q is not a condition status (accepted: %s, %s, %s)",
					i, t.Namespace, t.Name, c.field, c.cond.Status, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown)
			}
		}
	}
	return ts, nil
}
