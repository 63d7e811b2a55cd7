package compare

import (
	"encoding/json"
	"math"
)

// JSON cannot hold NaN or ±Inf, which the statistics use honestly (no samples, unbounded intervals,
// a ratio against a zero median). They are written as null; reading null gives back NaN, or -Inf and
// +Inf for Summary.Lo and Summary.Hi, and 0 (no interval) for RatioLo and RatioHi.

type summaryJSON struct {
	Center  *float64  `json:"center"`
	Lo      *float64  `json:"lo"`
	Hi      *float64  `json:"hi"`
	N       int       `json:"n"`
	Samples []float64 `json:"samples,omitempty"`
}

// MarshalJSON writes non-finite numbers as null.
func (s Summary) MarshalJSON() ([]byte, error) {
	return json.Marshal(summaryJSON{finite(s.Center), finite(s.Lo), finite(s.Hi), s.N, s.Samples})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Summary) UnmarshalJSON(data []byte) error {
	var j summaryJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*s = Summary{orElse(j.Center, math.NaN()), orElse(j.Lo, math.Inf(-1)), orElse(j.Hi, math.Inf(1)), j.N, j.Samples}
	return nil
}

type metricJSON struct {
	Metric         string            `json:"metric"`
	Unit           string            `json:"unit,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	HigherIsBetter bool              `json:"higherIsBetter"`
	Old            Summary           `json:"old"`
	New            Summary           `json:"new"`
	Ratio          *float64          `json:"ratio"`
	RatioLo        float64           `json:"ratioLo,omitempty"`
	RatioHi        float64           `json:"ratioHi,omitempty"`
	PValue         *float64          `json:"pValue"`
	PAdjusted      *float64          `json:"pAdjusted,omitempty"`
	Verdict        MetricVerdict     `json:"verdict"`
	Regression     bool              `json:"regression"`
	Gated          bool              `json:"gated"`
	Reason         string            `json:"reason,omitempty"`
	Warnings       []string          `json:"warnings,omitempty"`
}

// MarshalJSON writes non-finite numbers as null.
func (m MetricResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(metricJSON{
		m.Metric, m.Unit, m.Labels, m.HigherIsBetter, m.Old, m.New, finite(m.Ratio), m.RatioLo, m.RatioHi,
		finite(m.PValue), finite(m.PAdjusted), m.Verdict, m.Regression, m.Gated, m.Reason, m.Warnings,
	})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (m *MetricResult) UnmarshalJSON(data []byte) error {
	var j metricJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*m = MetricResult{
		j.Metric, j.Unit, j.Labels, j.HigherIsBetter, j.Old, j.New, orElse(j.Ratio, math.NaN()), j.RatioLo, j.RatioHi,
		orElse(j.PValue, math.NaN()), orElse(j.PAdjusted, math.NaN()), j.Verdict, j.Regression, j.Gated, j.Reason, j.Warnings,
	}
	return nil
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func orElse(p *float64, def float64) float64 {
	if p == nil {
		return def
	}
	return *p
}
