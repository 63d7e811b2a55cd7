package monitor

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 7, 1, 16, 2, 1, 123_000_000, time.UTC)

func cond(status metav1.ConditionStatus, reason, msg string, gen int64, ltt time.Time) *metav1.Condition {
	return &metav1.Condition{
		Type: DefaultConditionType, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(ltt.Truncate(time.Second)),
	}
}

func tr(at time.Duration, name string, uid types.UID, event string, to *metav1.Condition) Transition {
	return Transition{Time: t0.Add(at), Namespace: "team", Name: name, UID: uid, Generation: 1, To: to, Event: event}
}

func kinds(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Kind)
	}
	return out
}

func TestCheckRegressionMessage(t *testing.T) {
	ts := []Transition{
		tr(0, "gang-a", "uid-a", EventAdded, cond(metav1.ConditionTrue, "Scheduled", "", 1, t0)),
		tr(4333*time.Millisecond, "gang-a", "uid-a", EventModified, cond(metav1.ConditionFalse, "Unschedulable", "0/4 nodes are available", 1, t0.Add(4*time.Second))),
	}
	vs := Check(ts)
	if len(vs) != 1 {
		t.Fatalf("want 1 violation, got %d: %v", len(vs), vs)
	}
	v := vs[0]
	want := `podgroup team/gang-a: PodGroupInitiallyScheduled went True (Scheduled, 16:02:01.123) -> False (Unschedulable "0/4 nodes are available", 16:02:05.456)`
	if v.Error() != want || v.String() != want {
		t.Errorf("message\n got: %s\nwant: %s", v.Error(), want)
	}
	if v.Kind != KindRegression || v.Reason != "returned from True to False" || v.UID != "uid-a" {
		t.Errorf("violation fields: %+v", v)
	}
	if v.Before.To.Status != metav1.ConditionTrue || v.After.To.Status != metav1.ConditionFalse {
		t.Errorf("before/after: %+v", v)
	}
}

func TestCheckAllowedTimelines(t *testing.T) {
	ts := []Transition{
		tr(0, "a", "uid-a", EventAdded, nil),
		tr(1*time.Second, "a", "uid-a", EventModified, cond(metav1.ConditionFalse, "Unschedulable", "x", 1, t0)),
		// reason and message may change while False; lastTransitionTime must not
		tr(2*time.Second, "a", "uid-a", EventModified, cond(metav1.ConditionFalse, "SchedulerError", "y", 1, t0)),
		tr(3*time.Second, "a", "uid-a", EventModified, cond(metav1.ConditionFalse, "Unschedulable", "z", 2, t0)),
		tr(4*time.Second, "a", "uid-a", EventModified, cond(metav1.ConditionTrue, "Scheduled", "", 2, t0.Add(4*time.Second))),
		tr(5*time.Second, "a", "uid-a", EventModified, cond(metav1.ConditionTrue, "Scheduled", "", 3, t0.Add(4*time.Second))),
		// a deletion whose final state no longer carries the condition is still just a deletion
		tr(6*time.Second, "a", "uid-a", EventDeleted, nil),
	}
	if vs := Check(ts); len(vs) != 0 {
		t.Fatalf("want no violation, got %v", vs)
	}
	if vs := Check(nil); len(vs) != 0 {
		t.Fatalf("empty timeline: %v", vs)
	}
}

func TestCheckRegressionVariants(t *testing.T) {
	trueC := cond(metav1.ConditionTrue, "Scheduled", "", 1, t0)
	cases := []struct {
		name   string
		ts     []Transition
		reason []string
	}{
		{"removed while alive", []Transition{
			tr(0, "a", "u", EventAdded, trueC),
			tr(time.Second, "a", "u", EventModified, nil),
		}, []string{"returned from True to absent"}},
		{"unknown", []Transition{
			tr(0, "a", "u", EventAdded, trueC),
			tr(time.Second, "a", "u", EventModified, cond(metav1.ConditionUnknown, "X", "", 1, t0.Add(time.Second))),
		}, []string{"returned from True to Unknown"}},
		{"deleted in a False state", []Transition{
			tr(0, "a", "u", EventAdded, trueC),
			tr(time.Second, "a", "u", EventDeleted, cond(metav1.ConditionFalse, "Unschedulable", "", 1, t0.Add(time.Second))),
		}, []string{"returned from True to False"}},
		{"each regression counts", []Transition{
			tr(0, "a", "u", EventAdded, trueC),
			tr(1*time.Second, "a", "u", EventModified, cond(metav1.ConditionFalse, "Unschedulable", "", 1, t0.Add(1*time.Second))),
			tr(2*time.Second, "a", "u", EventModified, cond(metav1.ConditionFalse, "SchedulerError", "", 1, t0.Add(1*time.Second))),
			tr(3*time.Second, "a", "u", EventModified, cond(metav1.ConditionTrue, "Scheduled", "", 1, t0.Add(3*time.Second))),
			tr(4*time.Second, "a", "u", EventModified, cond(metav1.ConditionFalse, "Unschedulable", "", 1, t0.Add(4*time.Second))),
		}, []string{"returned from True to False", "returned from True to False"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vs := Check(c.ts)
			var got []string
			for _, v := range vs {
				got = append(got, v.Reason)
			}
			if strings.Join(got, ";") != strings.Join(c.reason, ";") {
				t.Fatalf("got %q, want %q (%v)", got, c.reason, vs)
			}
		})
	}
	if vs := Check(cases[0].ts); len(vs) != 1 || !strings.Contains(vs[0].Error(), "-> absent (") {
		t.Errorf("absent state not rendered: %v", vs)
	}
}

func TestCheckObservedGenerationBackwards(t *testing.T) {
	ts := []Transition{
		tr(0, "a", "u", EventAdded, cond(metav1.ConditionFalse, "Unschedulable", "", 3, t0)),
		// the condition disappearing in between must not reset the generation it is held to
		tr(1*time.Second, "a", "u", EventModified, nil),
		tr(2*time.Second, "a", "u", EventModified, cond(metav1.ConditionFalse, "Unschedulable", "", 2, t0.Add(2*time.Second))),
	}
	vs := Check(ts)
	if len(vs) != 1 || vs[0].Kind != KindObservedGeneration {
		t.Fatalf("want one %s, got %v", KindObservedGeneration, kinds(vs))
	}
	if vs[0].Reason != "observedGeneration went backwards from 3 to 2" {
		t.Errorf("reason %q", vs[0].Reason)
	}
	if !strings.Contains(vs[0].Error(), "team/a") || !strings.Contains(vs[0].Error(), "observedGeneration went backwards") {
		t.Errorf("message %q", vs[0].Error())
	}
}

func TestCheckTransitionTimeChangedWithoutFlip(t *testing.T) {
	ts := []Transition{
		tr(0, "a", "u", EventAdded, cond(metav1.ConditionTrue, "Scheduled", "", 1, t0)),
		tr(5*time.Second, "a", "u", EventModified, cond(metav1.ConditionTrue, "Scheduled", "", 1, t0.Add(5*time.Second))),
	}
	vs := Check(ts)
	if len(vs) != 1 || vs[0].Kind != KindTransitionTime {
		t.Fatalf("want one %s, got %v", KindTransitionTime, vs)
	}
	if !strings.Contains(vs[0].Reason, "while status stayed True") {
		t.Errorf("reason %q", vs[0].Reason)
	}
}

func TestCheckRecreatedUIDStartsFresh(t *testing.T) {
	ts := []Transition{
		tr(0, "a", "uid-1", EventAdded, cond(metav1.ConditionTrue, "Scheduled", "", 5, t0)),
		tr(1*time.Second, "a", "uid-1", EventDeleted, cond(metav1.ConditionTrue, "Scheduled", "", 5, t0)),
		// same name, new object: False and a lower generation are its own history
		tr(2*time.Second, "a", "uid-2", EventAdded, cond(metav1.ConditionFalse, "Unschedulable", "", 1, t0.Add(2*time.Second))),
	}
	if vs := Check(ts); len(vs) != 0 {
		t.Fatalf("want none, got %v", vs)
	}
	// Interleaved UIDs are judged separately too: uid-2's False is not compared with uid-1's True.
	ts = []Transition{
		tr(0, "a", "uid-1", EventAdded, cond(metav1.ConditionTrue, "Scheduled", "", 1, t0)),
		tr(1*time.Second, "a", "uid-2", EventAdded, cond(metav1.ConditionFalse, "Unschedulable", "", 1, t0)),
		tr(2*time.Second, "a", "uid-1", EventModified, cond(metav1.ConditionFalse, "Unschedulable", "", 1, t0.Add(2*time.Second))),
	}
	vs := Check(ts)
	if len(vs) != 1 || vs[0].UID != "uid-1" {
		t.Fatalf("want one violation for uid-1, got %v", vs)
	}
}

// TestReplayRecordedBadTimeline is the proof that the checker can fail: a timeline recorded (here,
// written) to a file, with a True -> False regression in it, is reported.
func TestReplayRecordedBadTimeline(t *testing.T) {
	f, err := os.Open("testdata/regression.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ts, err := ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 7 {
		t.Fatalf("read %d transitions", len(ts))
	}
	vs := Check(ts)
	if len(vs) != 1 {
		t.Fatalf("want exactly 1 violation, got %d: %v", len(vs), vs)
	}
	want := `podgroup team/gang-a: PodGroupInitiallyScheduled went True (Scheduled, 16:02:01.123) -> False (Unschedulable "0/4 nodes are available", 16:02:05.456)`
	if vs[0].Error() != want {
		t.Errorf("got  %s\nwant %s", vs[0].Error(), want)
	}

	// Replaying the same file through a Monitor gives the same verdict.
	m := New(nil, Options{})
	for _, tt := range ts {
		m.Observe(tt)
	}
	if got := m.Violations(); len(got) != 1 || got[0].Error() != want {
		t.Errorf("replayed through Monitor: %v", got)
	}
	if s := m.Stats(); s.PodGroups != 3 || s.EverTrue != 2 || s.Deleted != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	ts := []Transition{
		tr(0, "a", "u", EventAdded, nil),
		tr(time.Second, "a", "u", EventModified, cond(metav1.ConditionTrue, "Scheduled", "", 1, t0)),
		tr(2*time.Second, "a", "u", EventModified, cond(metav1.ConditionFalse, "Unschedulable", `quote " and newline
here`, 1, t0.Add(2*time.Second))),
	}
	ts[2].From = ts[1].To
	var first bytes.Buffer
	if err := WriteJSON(&first, ts); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(first.String(), "\n"); n != len(ts)+2 {
		t.Errorf("want one transition per line, got %d lines:\n%s", n, first.String())
	}
	back, err := ReadJSON(bytes.NewReader(first.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var second bytes.Buffer
	if err := WriteJSON(&second, back); err != nil {
		t.Fatal(err)
	}
	if first.String() != second.String() {
		t.Errorf("round trip changed the timeline:\n%s\n%s", first.String(), second.String())
	}
	if !back[0].Time.Equal(ts[0].Time) || back[2].To.Message != ts[2].To.Message || back[0].To != nil {
		t.Errorf("fields lost: %+v", back)
	}
	if len(Check(back)) != 1 {
		t.Errorf("round-tripped timeline lost its violation")
	}

	var empty bytes.Buffer
	if err := WriteJSON(&empty, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadJSON(&empty); err != nil || len(got) != 0 {
		t.Errorf("empty timeline: %v %v", got, err)
	}
}

func TestReadJSONRunReport(t *testing.T) {
	// The shape of a harness run report: the timeline plus fields ReadJSON does not need.
	in := `{"podGroups": 1, "transitions": [
	  {"time": "2026-07-01T16:02:01.123Z", "namespace": "team", "name": "a", "uid": "u", "event": "added",
	   "to": {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled", "lastTransitionTime": "2026-07-01T16:02:01Z", "message": ""}},
	  {"time": "2026-07-01T16:02:05.456Z", "namespace": "team", "name": "a", "uid": "u", "event": "modified",
	   "to": {"type": "PodGroupInitiallyScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": "2026-07-01T16:02:05Z", "message": ""}}
	], "violations": []}`
	ts, err := ReadJSON(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if vs := Check(ts); len(ts) != 2 || len(vs) != 1 {
		t.Fatalf("got %d transitions, violations %v", len(ts), vs)
	}
}

func TestReadJSONRejects(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"malformed":      {`[{"uid": "u", "event": "added"`, "read timeline: unexpected EOF"},
		"not a timeline": {`{"uid": "u"}`, `read timeline: JSON object has no "transitions"`},
		"not an array":   {`"uid"`, "read timeline: json: cannot unmarshal string into Go value of type []monitor.Transition"},
		"missing uid":    {`[{"name": "a", "event": "added"}]`, "read timeline: transition 0 (/a): no uid"},
		"unknown event":  {`[{"uid": "u", "event": "bound"}]`, `read timeline: transition 0 (/): unknown event "bound" (accepted: added, modified, deleted)`},
		"trailing data":  {`[] []`, "read timeline: data after the JSON value"},
		"bad status": {`[{"uid": "u", "namespace": "n", "name": "a", "event": "added", "to": {"type": "PodGroupInitiallyScheduled", "status": "true"}}]`,
			`read timeline: transition 0 (n/a): to.status "true" is not a condition status (accepted: True, False, Unknown)`},
		"bad from status": {`[{"uid": "u", "event": "added", "from": {"status": ""}}]`,
			`read timeline: transition 0 (/): from.status "" is not a condition status (accepted: True, False, Unknown)`},
	} {
		if _, err := ReadJSON(strings.NewReader(tc.in)); err == nil || err.Error() != tc.want {
			t.Errorf("%s:\n got %v\nwant %s", name, err, tc.want)
		}
	}
}
