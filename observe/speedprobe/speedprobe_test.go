package speedprobe

import (
	"context"
	"testing"
	"time"
)

// TestProbe: the probe samples until its context ends, every unit takes some CPU time, and Between
// takes the median of the samples in its window only.
func TestProbe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	p := Start(ctx, 5*time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, n := p.Between(start, time.Now()); n >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("fewer than 5 samples in 10 s")
		}
		time.Sleep(5 * time.Millisecond) // polling a count, with a deadline
	}
	cancel()
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	med, n := p.Between(start, time.Now())
	if n < 5 || med <= 0 {
		t.Errorf("Between = %v over %d samples", med, n)
	}
	if _, n := p.Between(start.Add(-time.Hour), start.Add(-time.Minute)); n != 0 {
		t.Errorf("%d samples before the probe started", n)
	}
	var none *Probe
	if d, n := none.Between(start, time.Now()); d != 0 || n != 0 {
		t.Error("a nil probe has no samples")
	}
}

// TestBetweenMedian: the median of the samples inside the window, whatever their order.
func TestBetweenMedian(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := &Probe{samples: []Sample{
		{At: t0, Took: 9 * time.Millisecond}, // before the window
		{At: t0.Add(1 * time.Second), Took: 3 * time.Millisecond},
		{At: t0.Add(2 * time.Second), Took: 1 * time.Millisecond},
		{At: t0.Add(3 * time.Second), Took: 2 * time.Millisecond},
		{At: t0.Add(4 * time.Second), Took: 9 * time.Millisecond}, // after it
	}}
	if d, n := p.Between(t0.Add(time.Second), t0.Add(3*time.Second)); d != 2*time.Millisecond || n != 3 {
		t.Errorf("Between = %v over %d, want the median 2ms over 3", d, n)
	}
}

// TestUnitMeasuresCPU: a unit's CPU time grows with its work, so the probe measures the work.
func TestUnitMeasuresCPU(t *testing.T) {
	took, _, err := measureUnit()
	if err != nil {
		t.Fatal(err)
	}
	if took <= 0 {
		t.Errorf("unit took %v of CPU", took)
	}
	if work(10) == work(11) {
		t.Error("the unit's result must depend on its length")
	}
}
