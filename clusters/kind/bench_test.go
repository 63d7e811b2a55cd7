package kind

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/fakegpu"
)

// BenchmarkCreate measures kind cluster create → every worker Ready with its GPUs advertised by
// the device plugin, and delete, with a warm node image (built before the timer starts), for 1 and
// 3 GPU workers next to the control plane. Run with `make bench-kind`.
func BenchmarkCreate(b *testing.B) {
	engine, err := DetectEngine(context.Background(), "")
	if err != nil {
		b.Skip(err.Error())
	}
	if testing.Short() {
		b.Skip("creates kind clusters; skipped in -short mode")
	}
	p, err := New(WithStateDir(b.TempDir()), WithEngine(engine), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := p.opts.EnsureNodeImage(ctx, clusters.DefaultKubernetesVersion, engine); err != nil {
		b.Fatal(err)
	}
	for _, workers := range []int{1, 3} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			var ready, del time.Duration
			for i := range b.N {
				ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
				start := time.Now()
				cl, err := p.Create(ctx, clusters.Spec{Name: fmt.Sprintf("bench-%d-%d", workers, i), Nodes: workers, GPU: fakegpu.Inventory{Count: 8}})
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
