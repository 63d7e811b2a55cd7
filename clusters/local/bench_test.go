package local_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/fakegpu"
)

// BenchmarkCreate measures cluster create → all nodes Ready, and delete, with warm binaries. Targets
// on 2 cores: 4 nodes Ready in ≤ 15 s, 500 nodes in ≤ 60 s. Run with `make bench-cluster`.
func BenchmarkCreate(b *testing.B) {
	skipShort(b)
	for _, nodes := range []int{4, 500} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			p, _ := newProvider(b)
			var ready, del time.Duration
			for i := range b.N {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				start := time.Now()
				cl, err := p.Create(ctx, clusters.Spec{Name: fmt.Sprintf("bench-%d", i), Nodes: nodes, GPU: fakegpu.Inventory{Count: 8}})
				if err != nil {
					cancel()
					b.Fatal(err)
				}
				ready += time.Since(start)
				start = time.Now()
				if err := cl.Close(ctx); err != nil {
					b.Error(err)
				}
				del += time.Since(start)
				cancel()
			}
			b.ReportMetric(ready.Seconds()/float64(b.N), "s-to-ready")
			b.ReportMetric(del.Seconds()/float64(b.N), "s-to-delete")
		})
	}
}
