package monitor

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// maxFuzzInput bounds what FuzzReadTimeline decodes ("no hang" is a promise about bounded input).
const maxFuzzInput = 1 << 20

// fuzzDeadline is how long one ReadJSON plus Check may take; the margin is for a loaded 2-core CI
// machine running the fuzzer's workers.
const fuzzDeadline = 5 * time.Second

// within runs fn and fails the test if it does not return in d, so a reader that loops forever
// fails with a message instead of stalling the fuzzer until -fuzztime ends.
// fn runs on another goroutine, where t.Fatal must not be called, so it returns its failure.
func within(t *testing.T, d time.Duration, what string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-timer.C:
		t.Fatalf("%s did not return within %s", what, d)
	}
}

// FuzzReadTimeline feeds arbitrary bytes to ReadJSON. It must not panic or hang; whatever it
// accepts, Check and the violations' messages must handle, replaying it through a Monitor must
// not panic, and WriteJSON → ReadJSON must be a fixed point after one round (the first write may
// drop what JSON cannot carry back, such as sub-second lastTransitionTimes, which the API stores
// in whole seconds anyway).
func FuzzReadTimeline(f *testing.F) {
	if data, err := os.ReadFile("testdata/regression.json"); err == nil {
		f.Add(data)
	} else {
		f.Fatal(err)
	}
	f.Add([]byte(`{"podGroups": 1, "transitions": [{"time": "2026-07-01T16:02:01.123Z", "namespace": "team", "name": "a", "uid": "u", "event": "added",` +
		` "to": {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled", "lastTransitionTime": "2026-07-01T16:02:01Z", "message": ""}},` +
		` {"uid": "u", "event": "deleted", "to": {"status": "Unknown", "observedGeneration": -1}}]}`))
	f.Add([]byte(`[]`))

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			t.Skip("larger than the fuzzer's inputs need to be")
		}
		var ts []Transition
		var err error
		within(t, fuzzDeadline, "ReadJSON", func() error { ts, err = ReadJSON(bytes.NewReader(data)); return nil })
		if err != nil {
			if !strings.HasPrefix(err.Error(), "read timeline: ") {
				t.Fatalf("error does not say what was being read: %v", err)
			}
			return
		}
		within(t, fuzzDeadline, "Check and the round trip", func() error {
			for _, v := range Check(ts) {
				_ = v.Error()
			}
			m := New(nil, Options{})
			for _, tt := range ts {
				m.Observe(tt)
			}
			m.Violations()
			m.Stats()

			var first bytes.Buffer
			if err := WriteJSON(&first, ts); err != nil {
				// Only an instant outside years 0-9999 cannot be written; ReadJSON parsed
				// RFC 3339, so every instant it returns is inside.
				return fmt.Errorf("a timeline ReadJSON accepted cannot be written: %w", err)
			}
			back, err := ReadJSON(bytes.NewReader(first.Bytes()))
			if err != nil {
				return fmt.Errorf("a written timeline does not read back: %w\n%s", err, first.Bytes())
			}
			var second bytes.Buffer
			if err := WriteJSON(&second, back); err != nil {
				return err
			}
			again, err := ReadJSON(bytes.NewReader(second.Bytes()))
			if err != nil {
				return err
			}
			if first.String() != second.String() || len(back) != len(ts) || !reflect.DeepEqual(Check(back), Check(again)) {
				return fmt.Errorf("WriteJSON/ReadJSON is not a fixed point:\n%s\n%s", first.Bytes(), second.Bytes())
			}
			return nil
		})
	})
}
