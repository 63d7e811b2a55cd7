package metrics

import (
	"fmt"
	"math"
	"slices"
	"sort"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// bucket is a cumulative bucket; counts are float64 because the text format allows float counts and
// sums over many series can exceed what callers would want to juggle as mixed int/float.
type bucket struct {
	upper float64
	count float64
}

// hist is a classic histogram normalised for arithmetic: buckets sorted by upper bound, one per
// bound, always ending in +Inf.
type hist struct {
	count, sum float64
	buckets    []bucket
}

func histCount(h *dto.Histogram) float64 {
	if h.SampleCountFloat != nil {
		return h.GetSampleCountFloat()
	}
	return float64(h.GetSampleCount())
}

func bucketCount(b *dto.Bucket) float64 {
	if b.CumulativeCountFloat != nil {
		return b.GetCumulativeCountFloat()
	}
	return float64(b.GetCumulativeCount())
}

func fromDTO(h *dto.Histogram) *hist {
	out := &hist{count: histCount(h), sum: h.GetSampleSum()}
	for _, b := range h.GetBucket() {
		out.add(b.GetUpperBound(), bucketCount(b))
	}
	if n := len(out.buckets); n == 0 || !math.IsInf(out.buckets[n-1].upper, +1) {
		out.add(math.Inf(+1), out.count)
	}
	return out
}

// add merges count into the bucket for upper, keeping buckets sorted; equal bounds add up, which is
// what sum by (le) does across series.
func (h *hist) add(upper, count float64) {
	i, found := slices.BinarySearchFunc(h.buckets, upper, func(b bucket, u float64) int {
		switch {
		case b.upper < u:
			return -1
		case b.upper > u:
			return +1
		}
		return 0
	})
	if found {
		h.buckets[i].count += count
		return
	}
	h.buckets = slices.Insert(h.buckets, i, bucket{upper, count})
}

// histogram sums the matching series of histogram family name bucket by bucket. It is false if the
// family is absent or not a histogram; a present family with no matching series is an empty
// histogram.
func (s *Snapshot) histogram(name string, match map[string]string) (*hist, bool) {
	if s == nil {
		return nil, false
	}
	mf := s.Families[name]
	if mf == nil || (mf.GetType() != dto.MetricType_HISTOGRAM && mf.GetType() != dto.MetricType_GAUGE_HISTOGRAM) {
		return nil, false
	}
	agg := &hist{}
	for _, m := range mf.GetMetric() {
		if m.Histogram == nil || !matches(m, match) {
			continue
		}
		one := fromDTO(m.Histogram)
		agg.count += one.count
		agg.sum += one.sum
		for _, b := range one.buckets {
			agg.add(b.upper, b.count)
		}
	}
	return agg, true
}

// quantile follows Prometheus' bucketQuantile for classic histograms.
func (h *hist) quantile(q float64) float64 {
	switch {
	case math.IsNaN(q):
		return math.NaN()
	case q < 0:
		return math.Inf(-1)
	case q > 1:
		return math.Inf(+1)
	}
	bs := slices.Clone(h.buckets)
	if len(bs) < 2 || !math.IsInf(bs[len(bs)-1].upper, +1) {
		return math.NaN()
	}
	// Buckets are cumulative, so a lower count above a higher one is inconsistent data (e.g. series
	// scraped mid-update); Prometheus takes the running maximum so the search below stays valid.
	for i := 1; i < len(bs); i++ {
		bs[i].count = max(bs[i].count, bs[i-1].count)
	}
	total := bs[len(bs)-1].count
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	b := sort.Search(len(bs)-1, func(i int) bool { return bs[i].count >= rank })
	if b == len(bs)-1 {
		// The rank is among observations above every finite bound; the highest finite bound is the
		// only honest answer.
		return bs[len(bs)-2].upper
	}
	if b == 0 && bs[0].upper <= 0 {
		return bs[0].upper
	}
	start, end, count := 0.0, bs[b].upper, bs[b].count
	if b > 0 {
		start = bs[b-1].upper
		count -= bs[b-1].count
		rank -= bs[b-1].count
	}
	return start + (end-start)*(rank/count)
}

// minus is h-o bucket by bucket. A bucket o has and h lacks means the layout changed between the
// scrapes, and a negative count means a restart; either way the difference would be fiction.
func (h *hist) minus(o *hist) (*hist, error) {
	prev := map[float64]float64{}
	for _, b := range o.buckets {
		prev[b.upper] = b.count
	}
	out := &hist{count: h.count - o.count, sum: h.sum - o.sum}
	if out.count < 0 {
		return nil, fmt.Errorf("observation count decreased from %g to %g: did the component restart between scrapes?", o.count, h.count)
	}
	for _, b := range h.buckets {
		d := b.count - prev[b.upper]
		if d < 0 {
			return nil, fmt.Errorf("bucket le=%g decreased from %g to %g: did the component restart between scrapes?", b.upper, prev[b.upper], b.count)
		}
		delete(prev, b.upper)
		out.buckets = append(out.buckets, bucket{b.upper, d})
	}
	// An empty earlier histogram has only the +Inf bucket fromDTO adds, which later ones always share.
	for upper, c := range prev {
		if c != 0 {
			return nil, fmt.Errorf("bucket le=%g present in the earlier scrape only: bucket layout changed", upper)
		}
	}
	return out, nil
}

// dto converts back, with integer fields when every count is whole (the usual case), so callers
// reading GetSampleCount/GetCumulativeCount see the numbers.
func (h *hist) dto() *dto.Histogram {
	whole := isWhole(h.count)
	for _, b := range h.buckets {
		whole = whole && isWhole(b.count)
	}
	out := &dto.Histogram{SampleSum: proto.Float64(h.sum)}
	if whole {
		out.SampleCount = proto.Uint64(uint64(h.count))
	} else {
		out.SampleCountFloat = proto.Float64(h.count)
	}
	for _, b := range h.buckets {
		db := &dto.Bucket{UpperBound: proto.Float64(b.upper)}
		if whole {
			db.CumulativeCount = proto.Uint64(uint64(b.count))
		} else {
			db.CumulativeCountFloat = proto.Float64(b.count)
		}
		out.Bucket = append(out.Bucket, db)
	}
	return out
}

func isWhole(x float64) bool {
	return x >= 0 && x < 1<<63 && x == math.Trunc(x)
}
