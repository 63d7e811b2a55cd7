package perf

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// scriptedAPIServer serves apiserver_request_total from a script of cumulative counts, one step
// per scrape; the last step repeats.
type scriptedAPIServer struct {
	steps []map[string]float64 // series → cumulative count
	n     int
}

func (s *scriptedAPIServer) Get(context.Context) ([]byte, error) {
	step := s.steps[min(s.n, len(s.steps)-1)]
	s.n++
	var b strings.Builder
	b.WriteString("# TYPE apiserver_request_total counter\n")
	for series, v := range step {
		fmt.Fprintf(&b, "apiserver_request_total{%s} %g\n", series, v)
	}
	// Another family the gate must not read.
	b.WriteString("# TYPE apiserver_other counter\napiserver_other 1e9\n")
	return []byte(b.String()), nil
}

// fakeClock advances by the asked duration at once.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

const (
	podLists   = `verb="LIST",resource="pods",code="200"`
	events     = `verb="POST",resource="events",code="201"`
	leases     = `verb="PUT",resource="leases",code="200"`
	nodeStatus = `verb="PATCH",resource="nodes",subresource="status",code="200"`
	metricsGet = `verb="GET",resource="",code="200"`
)

func TestWaitQuietWaitsOutABurst(t *testing.T) {
	// 1 s intervals: pod LISTs at 200/s for three intervals, then only heartbeats and scrapes,
	// which are not counted however many there are.
	api := &scriptedAPIServer{}
	var lists, lease float64
	for i := 0; i < 12; i++ {
		if i >= 1 && i <= 3 {
			lists += 200
		}
		lease += 5000
		api.steps = append(api.steps, map[string]float64{podLists: lists, leases: lease, nodeStatus: lease, metricsGet: float64(i), events: 3})
	}
	clock := &fakeClock{now: time.Unix(0, 0)}
	waited, last, quiet, err := waitQuiet(context.Background(), api, clock, time.Minute)
	if err != nil || !quiet {
		t.Fatalf("waitQuiet = %v, %v, quiet %v; want quiet", waited, err, quiet)
	}
	// Busy in intervals 1-3, quiet from interval 4 on: two quiet intervals end at 5 s.
	if waited != 5*time.Second {
		t.Errorf("waited %v, want 5s (three busy intervals, then two quiet ones)", waited)
	}
	if last.rate != 0 {
		t.Errorf("last rate %v, want 0 (heartbeats and scrapes excluded)", last.rate)
	}
}

func TestWaitQuietTimesOutWithTheCause(t *testing.T) {
	api := &scriptedAPIServer{}
	for i := 0; i < 100; i++ {
		api.steps = append(api.steps, map[string]float64{events: float64(i) * 60, podLists: float64(i) * 2})
	}
	clock := &fakeClock{now: time.Unix(0, 0)}
	waited, last, quiet, err := waitQuiet(context.Background(), api, clock, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if quiet || waited != 20*time.Second {
		t.Fatalf("quiet %v after %v, want a timeout after 20s", quiet, waited)
	}
	if got, want := last.String(), "62.0 requests/s (POST events 60.0/s, LIST pods 2.0/s)"; got != want {
		t.Errorf("last state %q, want %q", got, want)
	}
}

func TestWaitQuietLullIsNotQuiet(t *testing.T) {
	// A client bursting every other interval leaves lulls of one interval, never two in a row.
	api := &scriptedAPIServer{}
	var n float64
	for i := 0; i < 40; i++ {
		if i%2 == 0 {
			n += 100
		}
		api.steps = append(api.steps, map[string]float64{events: n})
	}
	clock := &fakeClock{now: time.Unix(0, 0)}
	if _, _, quiet, err := waitQuiet(context.Background(), api, clock, 30*time.Second); err != nil || quiet {
		t.Fatalf("quiet %v, err %v: a one-interval lull between bursts counted as quiet", quiet, err)
	}
}

func TestWaitQuietCounterReset(t *testing.T) {
	// An apiserver restarted by a fault starts its counters at 0: no negative rate reads as quiet.
	api := &scriptedAPIServer{steps: []map[string]float64{{events: 1e6}, {events: 400}, {events: 400}}}
	clock := &fakeClock{now: time.Unix(0, 0)}
	_, last, _, err := waitQuiet(context.Background(), api, clock, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if last.rate != 400 {
		t.Errorf("rate after a reset %v, want 400 (400 requests in 1 s)", last.rate)
	}
}
