package metrics

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
)

// before and after are two scrapes of one scheduler+apiserver pair, a run apart. The histogram has
// two series (attempts="1" and "2") so that label matching and aggregation both matter.
const before = `# HELP scheduler_schedule_attempts_total [STABLE] Number of attempts to schedule pods, by the result.
# TYPE scheduler_schedule_attempts_total counter
scheduler_schedule_attempts_total{profile="default-scheduler",result="error"} 0
scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 100
scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 4
scheduler_schedule_attempts_total{profile="gang-scheduler",result="scheduled"} 20
# HELP scheduler_podgroup_schedule_attempts_total Number of attempts to schedule pod groups, by the result.
# TYPE scheduler_podgroup_schedule_attempts_total counter
scheduler_podgroup_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 8
# HELP scheduler_pending_pods [STABLE] Number of pending pods, by the queue type.
# TYPE scheduler_pending_pods gauge
scheduler_pending_pods{queue="active"} 3
scheduler_pending_pods{queue="backoff"} 0
scheduler_pending_pods{queue="gated"} 9
scheduler_pending_pods{queue="unschedulable"} 2
# HELP scheduler_pod_scheduling_sli_duration_seconds [BETA] E2e latency for a pod being scheduled.
# TYPE scheduler_pod_scheduling_sli_duration_seconds histogram
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="1",le="0.01"} 5
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="1",le="0.1"} 20
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="1",le="1"} 50
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="1",le="10"} 60
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="1",le="+Inf"} 60
scheduler_pod_scheduling_sli_duration_seconds_sum{attempts="1"} 10
scheduler_pod_scheduling_sli_duration_seconds_count{attempts="1"} 60
# HELP apiserver_request_total [STABLE] Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 200
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 120
`

const after = `# HELP scheduler_schedule_attempts_total [STABLE] Number of attempts to schedule pods, by the result.
# TYPE scheduler_schedule_attempts_total counter
scheduler_schedule_attempts_total{profile="default-scheduler",result="error"} 0
scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 120
scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 7
scheduler_schedule_attempts_total{profile="gang-scheduler",result="scheduled"} 30
# HELP scheduler_podgroup_schedule_attempts_total Number of attempts to schedule pod groups, by the result.
# TYPE scheduler_podgroup_schedule_attempts_total counter
scheduler_podgroup_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 10
scheduler_podgroup_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 3
# HELP scheduler_pending_pods [STABLE] Number of pending pods, by the queue type.
# TYPE scheduler_pending_pods gauge
scheduler_pending_pods{queue="active"} 2
scheduler_pending_pods{queue="backoff"} 1
scheduler_pending_pods{queue="gated"} 5
scheduler_pending_pods{queue="unschedulable"} 4
# HELP scheduler_pod_scheduling_sli_duration_seconds [BETA] E2e latency for a pod being scheduled.
# TYPE scheduler_pod_scheduling_sli_duration_seconds histogram
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="1",le="0.01"} 10
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="1",le="0.1"} 40
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="1",le="1"} 90
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="1",le="10"} 100
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="1",le="+Inf"} 100
scheduler_pod_scheduling_sli_duration_seconds_sum{attempts="1"} 25.5
scheduler_pod_scheduling_sli_duration_seconds_count{attempts="1"} 100
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="2",le="0.01"} 0
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="2",le="0.1"} 5
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="2",le="1"} 15
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="2",le="10"} 18
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="2",le="+Inf"} 20
scheduler_pod_scheduling_sli_duration_seconds_sum{attempts="2"} 40.25
scheduler_pod_scheduling_sli_duration_seconds_count{attempts="2"} 20
# HELP go_gc_duration_seconds A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 1.5e-05
go_gc_duration_seconds{quantile="0.5"} 5.1e-05
go_gc_duration_seconds{quantile="1"} 0.001
go_gc_duration_seconds_sum 0.0125
go_gc_duration_seconds_count 42
# HELP apiserver_request_total [STABLE] Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 300
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 2
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 150
untyped_without_type_line{x="1"} 3
`

const sli = "scheduler_pod_scheduling_sli_duration_seconds"

func mustParse(t *testing.T, s string) *Snapshot {
	t.Helper()
	snap, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// near compares with a tolerance because interpolation divides.
func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestSum(t *testing.T) {
	s := mustParse(t, after)
	cases := []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{"scheduler_schedule_attempts_total", map[string]string{"result": "scheduled", "profile": "default-scheduler"}, 120},
		{"scheduler_schedule_attempts_total", map[string]string{"result": "scheduled"}, 150},
		{"scheduler_schedule_attempts_total", nil, 157},
		{"scheduler_podgroup_schedule_attempts_total", map[string]string{"result": "unschedulable"}, 3},
		{"scheduler_pending_pods", map[string]string{"queue": "gated"}, 5},
		{"apiserver_request_total", map[string]string{"resource": "pods", "subresource": "binding", "verb": "POST", "code": "201"}, 300},
		{"apiserver_request_total", map[string]string{"resource": "pods", "verb": "POST"}, 452},
		// "" matches the empty label value, as in PromQL: pod creations, not bindings.
		{"apiserver_request_total", map[string]string{"resource": "pods", "subresource": ""}, 150},
		// A label no series has matches "" only.
		{"apiserver_request_total", map[string]string{"nonexistent": ""}, 452},
		{"apiserver_request_total", map[string]string{"nonexistent": "x"}, 0},
		// present family, no matching series: 0 and true
		{"scheduler_schedule_attempts_total", map[string]string{"result": "error"}, 0},
		{"scheduler_schedule_attempts_total", map[string]string{"profile": "nope"}, 0},
		// histograms and summaries sum their observation counts
		{sli, nil, 120},
		{sli, map[string]string{"attempts": "2"}, 20},
		{"go_gc_duration_seconds", nil, 42},
		// the _count/_sum names from the scrape text resolve to the folded family
		{sli + "_count", map[string]string{"attempts": "1"}, 100},
		{sli + "_sum", nil, 65.75},
		{"go_gc_duration_seconds_sum", nil, 0.0125},
		{"untyped_without_type_line", nil, 3},
	}
	for _, c := range cases {
		got, ok := s.Sum(c.name, c.match)
		if !ok || !near(got, c.want) {
			t.Errorf("Sum(%s, %v) = %g, %v; want %g", c.name, c.match, got, ok, c.want)
		}
	}
	for _, absent := range []string{"scheduler_nope_total", "scheduler_pending_pods_count", sli + "_bucket", ""} {
		if v, ok := s.Sum(absent, nil); ok || v != 0 {
			t.Errorf("Sum(%q) = %g, %v; want absent", absent, v, ok)
		}
	}
	var nilSnap *Snapshot
	if _, ok := nilSnap.Sum("x", nil); ok {
		t.Error("nil snapshot has families")
	}
}

func TestHistogramCountAndSum(t *testing.T) {
	s := mustParse(t, after)
	if n, ok := s.HistogramCount(sli, nil); !ok || n != 120 {
		t.Errorf("count all = %d, %v", n, ok)
	}
	if n, ok := s.HistogramCount(sli, map[string]string{"attempts": "1"}); !ok || n != 100 {
		t.Errorf("count attempts=1 = %d, %v", n, ok)
	}
	if v, ok := s.HistogramSum(sli, nil); !ok || !near(v, 65.75) {
		t.Errorf("sum all = %g, %v", v, ok)
	}
	if v, ok := s.HistogramSum(sli, map[string]string{"attempts": "2"}); !ok || !near(v, 40.25) {
		t.Errorf("sum attempts=2 = %g, %v", v, ok)
	}
	if n, ok := s.HistogramCount(sli, map[string]string{"attempts": "9"}); !ok || n != 0 {
		t.Errorf("no matching series = %d, %v; want 0, true", n, ok)
	}
	for _, name := range []string{"absent_histogram", "scheduler_pending_pods", "go_gc_duration_seconds"} {
		if _, ok := s.HistogramCount(name, nil); ok {
			t.Errorf("HistogramCount(%s) ok for a non-histogram", name)
		}
		if _, ok := s.HistogramSum(name, nil); ok {
			t.Errorf("HistogramSum(%s) ok for a non-histogram", name)
		}
	}
}

func TestQuantile(t *testing.T) {
	s := mustParse(t, after)
	one := map[string]string{"attempts": "1"}
	// Hand-computed from the attempts="1" buckets 0.01:10 0.1:40 1:90 10:100 +Inf:100.
	cases := []struct {
		match map[string]string
		q     float64
		want  float64
	}{
		{one, 0.5, 0.28},  // rank 50 in (0.1,1]: 0.1 + 0.9*(50-40)/(90-40)
		{one, 0.95, 5.5},  // rank 95 in (1,10]: 1 + 9*(95-90)/10
		{one, 0.05, .005}, // rank 5 in the first bucket, interpolated from 0
		{one, 0.4, 0.1},   // rank exactly on a bound
		{one, 1, 10},      // the top rank sits in the last finite bucket
		{one, 0, 0},
		// All series, summed by le: 0.01:10 0.1:45 1:105 10:118 +Inf:120.
		{nil, 0.5, 0.325}, // rank 60 in (0.1,1]: 0.1 + 0.9*(60-45)/60
		{nil, 0.99, 10},   // rank 118.8 is in +Inf: the highest finite bound
		{nil, 0.9, 1 + 9*(108.0-105)/13},
	}
	for _, c := range cases {
		got, ok := s.Quantile(sli, c.match, c.q)
		if !ok || !near(got, c.want) {
			t.Errorf("Quantile(%v, %g) = %g, %v; want %g", c.match, c.q, got, ok, c.want)
		}
	}
	if v, ok := s.Quantile(sli, nil, 1.5); !ok || !math.IsInf(v, +1) {
		t.Errorf("q>1 = %g, %v; want +Inf", v, ok)
	}
	if v, ok := s.Quantile(sli, nil, -0.5); !ok || !math.IsInf(v, -1) {
		t.Errorf("q<0 = %g, %v; want -Inf", v, ok)
	}
	if v, ok := s.Quantile(sli, nil, math.NaN()); ok || !math.IsNaN(v) {
		t.Errorf("q=NaN = %g, %v", v, ok)
	}
	if v, ok := s.Quantile(sli, map[string]string{"attempts": "9"}, 0.5); ok || !math.IsNaN(v) {
		t.Errorf("no observations = %g, %v; want NaN, false", v, ok)
	}
	if _, ok := s.Quantile("absent", nil, 0.5); ok {
		t.Error("absent family has a quantile")
	}
	if _, ok := s.Quantile("scheduler_pending_pods", nil, 0.5); ok {
		t.Error("gauge has a quantile")
	}
}

func TestQuantileEdgeBuckets(t *testing.T) {
	// A non-positive first bound is returned as is; non-monotonic counts take the running maximum,
	// as Prometheus does.
	s := mustParse(t, `# TYPE h histogram
h_bucket{le="-1"} 4
h_bucket{le="0"} 6
h_bucket{le="2"} 5
h_bucket{le="4"} 10
h_bucket{le="+Inf"} 10
h_sum 3
h_count 10
`)
	for _, c := range []struct{ q, want float64 }{
		{0.2, -1},             // rank 2 in the first bucket, whose bound is <= 0
		{0.5, -1 + 1*(1.0/2)}, // rank 5 in (-1,0]: -1 + 1*(5-4)/(6-4)
		{0.8, 2 + 2*(2.0/4)},  // le=2 forced to 6; rank 8 in (2,4]: 2 + 2*(8-6)/(10-6)
	} {
		if got, ok := s.Quantile("h", nil, c.q); !ok || !near(got, c.want) {
			t.Errorf("q=%g: %g, %v; want %g", c.q, got, ok, c.want)
		}
	}
}

func TestDelta(t *testing.T) {
	b, a := mustParse(t, before), mustParse(t, after)
	cases := []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{"scheduler_schedule_attempts_total", map[string]string{"result": "scheduled", "profile": "default-scheduler"}, 20},
		{"scheduler_schedule_attempts_total", map[string]string{"result": "scheduled"}, 30},
		// the unschedulable series did not exist before: it counts from 0
		{"scheduler_podgroup_schedule_attempts_total", map[string]string{"result": "unschedulable"}, 3},
		{"scheduler_podgroup_schedule_attempts_total", nil, 5},
		// a gauge may go down
		{"scheduler_pending_pods", map[string]string{"queue": "gated"}, -4},
		{"apiserver_request_total", map[string]string{"resource": "pods", "subresource": "binding", "verb": "POST", "code": "201"}, 100},
		{sli, map[string]string{"attempts": "1"}, 40},
		// the whole family is new in the later scrape
		{"go_gc_duration_seconds", nil, 42},
	}
	for _, c := range cases {
		got, err := Delta(b, a, c.name, c.match)
		if err != nil || !near(got, c.want) {
			t.Errorf("Delta(%s, %v) = %g, %v; want %g", c.name, c.match, got, err, c.want)
		}
	}
	if got, err := Delta(nil, a, "scheduler_pending_pods", map[string]string{"queue": "gated"}); err != nil || got != 5 {
		t.Errorf("nil before = %g, %v", got, err)
	}

	_, err := Delta(b, a, "scheduler_nope_total", map[string]string{"result": "scheduled", "profile": "p"})
	if err == nil || !strings.Contains(err.Error(), `scheduler_nope_total{profile="p",result="scheduled"}`) {
		t.Errorf("absent after: error %v should name the metric and labels", err)
	}
	if _, err := Delta(a, b, "go_gc_duration_seconds", nil); err == nil {
		t.Error("family absent after: no error")
	}
	// after and before swapped: the counter went down, which only a restart explains
	_, err = Delta(a, b, "scheduler_schedule_attempts_total", map[string]string{"result": "scheduled"})
	if err == nil || !strings.Contains(err.Error(), "restart") || !strings.Contains(err.Error(), `{result="scheduled"}`) {
		t.Errorf("counter reset: %v", err)
	}
}

func TestDeltaHistogram(t *testing.T) {
	b, a := mustParse(t, before), mustParse(t, after)
	one := map[string]string{"attempts": "1"}
	d, err := DeltaHistogram(b, a, sli, one)
	if err != nil {
		t.Fatal(err)
	}
	if d.GetSampleCount() != 40 || !near(d.GetSampleSum(), 15.5) {
		t.Errorf("count/sum = %d/%g", d.GetSampleCount(), d.GetSampleSum())
	}
	want := []struct {
		le float64
		n  uint64
	}{{0.01, 5}, {0.1, 20}, {1, 40}, {10, 40}, {math.Inf(+1), 40}}
	if len(d.GetBucket()) != len(want) {
		t.Fatalf("buckets %v", d.GetBucket())
	}
	for i, w := range want {
		got := d.GetBucket()[i]
		if got.GetUpperBound() != w.le || got.GetCumulativeCount() != w.n {
			t.Errorf("bucket %d = le %g: %d; want le %g: %d", i, got.GetUpperBound(), got.GetCumulativeCount(), w.le, w.n)
		}
	}
	// Over the interval: rank 30 of 40 lies in (0.1,1]: 0.1 + 0.9*(30-20)/(40-20).
	if q := HistogramQuantile(d, 0.75); !near(q, 0.55) {
		t.Errorf("interval p75 = %g, want 0.55", q)
	}
	// rank 20 is exactly the le=0.1 bound
	if q := HistogramQuantile(d, 0.5); !near(q, 0.1) {
		t.Errorf("interval p50 = %g, want 0.1", q)
	}

	// attempts="2" did not exist before: the delta is the later histogram itself.
	d2, err := DeltaHistogram(b, a, sli, map[string]string{"attempts": "2"})
	if err != nil || d2.GetSampleCount() != 20 {
		t.Fatalf("new series: %v %v", d2, err)
	}
	if d0, err := DeltaHistogram(nil, a, sli, nil); err != nil || d0.GetSampleCount() != 120 {
		t.Fatalf("nil before: %v %v", d0, err)
	}

	if _, err := DeltaHistogram(b, a, "absent_seconds", one); err == nil || !strings.Contains(err.Error(), `absent_seconds{attempts="1"}`) {
		t.Errorf("absent: %v", err)
	}
	if _, err := DeltaHistogram(b, a, "scheduler_pending_pods", nil); err == nil || !strings.Contains(err.Error(), "not a histogram") {
		t.Errorf("gauge: %v", err)
	}
	if _, err := DeltaHistogram(a, b, sli, one); err == nil || !strings.Contains(err.Error(), "restart") {
		t.Errorf("reset: %v", err)
	}
	changed := mustParse(t, strings.ReplaceAll(after, `le="10"}`, `le="5"}`))
	if _, err := DeltaHistogram(b, changed, sli, one); err == nil || !strings.Contains(err.Error(), "layout") {
		t.Errorf("layout change: %v", err)
	}
}

func TestHistogramQuantileWithoutInfBucket(t *testing.T) {
	// client_golang's own dto omits the +Inf bucket; the sample count stands in for it.
	s := mustParse(t, after)
	d, err := DeltaHistogram(nil, s, sli, map[string]string{"attempts": "2"})
	if err != nil {
		t.Fatal(err)
	}
	d.Bucket = d.Bucket[:len(d.Bucket)-1]
	// rank 19 of 20 is above le=10 (18): in +Inf, so the highest finite bound
	if q := HistogramQuantile(d, 0.95); q != 10 {
		t.Errorf("p95 = %g, want 10", q)
	}
	if q := HistogramQuantile(nil, 0.5); !math.IsNaN(q) {
		t.Errorf("nil histogram = %g", q)
	}
}

func TestParseErrors(t *testing.T) {
	for name, in := range map[string]string{
		"unclosed labels":  "scheduler_pending_pods{queue=\"gated\" 5\n",
		"value not float":  "scheduler_pending_pods{queue=\"gated\"} five\n",
		"type after value": "x 1\n# TYPE x counter\n",
		"bad type":         "# TYPE x countr\nx 1\n",
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), "parse metrics") {
			t.Errorf("%s: error %v", name, err)
		}
	}
	s, err := Parse(nil)
	if err != nil || len(s.Families) != 0 || !s.Time.IsZero() {
		t.Errorf("empty body: %+v %v", s, err)
	}
}

type fetchFunc func(context.Context) ([]byte, error)

func (f fetchFunc) Get(ctx context.Context) ([]byte, error) { return f(ctx) }

func TestScrape(t *testing.T) {
	s, err := Scrape(context.Background(), fetchFunc(func(context.Context) ([]byte, error) { return []byte(after), nil }))
	if err != nil {
		t.Fatal(err)
	}
	if s.Time.IsZero() {
		t.Error("scrape time not set")
	}
	if v, ok := s.Sum("scheduler_pending_pods", map[string]string{"queue": "gated"}); !ok || v != 5 {
		t.Errorf("gated = %g, %v", v, ok)
	}

	boom := errors.New("GET https://127.0.0.1:10259/metrics: 403 Forbidden")
	if _, err := Scrape(context.Background(), fetchFunc(func(context.Context) ([]byte, error) { return nil, boom })); !errors.Is(err, boom) {
		t.Errorf("fetch error not wrapped: %v", err)
	}
	if _, err := Scrape(context.Background(), fetchFunc(func(context.Context) ([]byte, error) { return []byte("x{"), nil })); err == nil {
		t.Error("malformed body: no error")
	}
	if _, err := Scrape(context.Background(), nil); err == nil {
		t.Error("nil fetcher: no error")
	}
}
