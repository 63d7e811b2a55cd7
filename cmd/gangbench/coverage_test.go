package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestSchedulerCoverageRefusals: a scheduler gangbench does not build cannot be instrumented, so
// --scheduler-coverage with a given binary, image or existing cluster is a usage error naming both
// flags, before anything is built.
func TestSchedulerCoverageRefusals(t *testing.T) {
	for _, tc := range []struct {
		set  func(f *e2eFlags)
		want string
	}{
		{func(f *e2eFlags) { f.cluster.schedulerBin = "/x/kube-scheduler" }, "--scheduler-binary /x/kube-scheduler"},
		{func(f *e2eFlags) { f.cluster.schedulerImage = "fork:1" }, "--scheduler-image fork:1"},
		{func(f *e2eFlags) { f.kubeconfig = "/kc" }, "--kubeconfig"},
	} {
		f := &e2eFlags{coverage: t.TempDir()}
		tc.set(f)
		err := prepareCoverage(context.Background(), f, io.Discard)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--scheduler-coverage") {
			t.Errorf("err %v, want a usage error naming --scheduler-coverage and %s", err, tc.want)
		}
	}
}
