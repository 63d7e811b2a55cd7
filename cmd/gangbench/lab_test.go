package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gangbench/gangbench/clusters/kind"
	"github.com/gangbench/gangbench/internal/testenv"
)

// labWant are lines every reproduced lab prints: the four verdicts and the pending team's resource
// message in the lab's words (the cluster has the lab's three nodes on both providers).
var labWant = []string{
	"experiment 1, basic versus gang: the deadlock gang scheduling removes: REPRODUCED",
	"experiment 2, basic PodGroup status does not mean running: REPRODUCED",
	"experiment 3, the two kinds of FailedScheduling message: REPRODUCED",
	"experiment 4, minCount is a threshold, not a quota: REPRODUCED",
	"0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient nvidia.com/gpu.",
	"team-a-0   team-a   Running   gpu-lab-worker",
}

// runLabTest runs `gangbench lab` with args and checks it reproduced the lab and left nothing.
func runLabTest(t *testing.T, args ...string) *sigRun {
	t.Helper()
	bin := buildGangbench(t)
	r := startRun(t, bin, append([]string{"lab"}, args...)...)
	code := r.waitExit(15 * time.Minute)
	out := r.output()
	if code != 0 {
		t.Errorf("gangbench lab %v: exit %d", args, code)
	}
	for _, w := range labWant {
		if !strings.Contains(out, w) {
			t.Errorf("the output lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
	r.assertNothingLeft(time.Minute)
	return r
}

// TestLabLocal runs the seed lab on the local provider, kwok playing the lab's three nodes. Where a
// container engine answers, TestLabKind runs the same lab in full on real kubelets, so make test
// runs this one only without an engine (make test-long always).
func TestLabLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local cluster; skipped with -short")
	}
	if _, err := kind.DetectEngine(context.Background(), ""); err == nil {
		testenv.SkipUnlessLong(t, "a container engine answers, so TestLabKind runs the lab in full on real kubelets")
	}
	runLabTest(t, "--provider", "local")
}

// TestLabKind runs the seed lab on kind: real kubelets, gpu-lab-worker's 8 GPUs from the device
// plugin, gpu-lab-worker2 without any. Nothing of the cluster may be left in the engine.
func TestLabKind(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kind cluster; skipped with -short")
	}
	engine, err := kind.DetectEngine(context.Background(), "")
	if err != nil {
		t.Skip(err.Error())
	}
	runLabTest(t, "--provider", "kind")
	var ps bytes.Buffer
	if err := kind.ExecRunner(context.Background(), &ps, engine, "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster="+labCluster); err != nil {
		t.Fatal(err)
	}
	if left := strings.Fields(ps.String()); len(left) > 0 {
		t.Errorf("containers of the lab's cluster left: %v", left)
	}
}
