package measure

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gangbench/gangbench/observe/metrics"
)

// scrape fetches an endpoint and parses only the named families. A kube-apiserver's /metrics is
// several MB of text at a few hundred nodes, and parsing all of it twice per repetition would be
// most of this process's memory peak; the measurements read one or a few families.
func scrape(ctx context.Context, f metrics.Fetcher, families ...string) (*metrics.Snapshot, error) {
	b, err := f.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	at := time.Now()
	s, err := metrics.Parse(FilterFamilies(b, families...))
	if err != nil {
		return nil, err
	}
	s.Time = at
	return s, nil
}

// FilterFamilies keeps the lines of Prometheus text exposition that belong to the named families
// (their # HELP and # TYPE lines and samples, including a histogram's _bucket, _sum and _count).
func FilterFamilies(text []byte, families ...string) []byte {
	want := map[string]bool{}
	for _, f := range families {
		want[f] = true
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		name := ""
		switch {
		case strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE "):
			name, _, _ = strings.Cut(line[len("# HELP "):], " ")
		case strings.HasPrefix(line, "#") || line == "":
			continue
		default:
			name = line[:strings.IndexAny(line+" ", "{ ")]
		}
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && want[b] {
				base = b
			}
		}
		if want[base] {
			out.WriteString(line)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

// ScrapeFamilies is scrape for other packages: one fetch, only the named families parsed.
func ScrapeFamilies(ctx context.Context, f metrics.Fetcher, families ...string) (*metrics.Snapshot, error) {
	return scrape(ctx, f, families...)
}
