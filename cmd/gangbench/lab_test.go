package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/kind"
	"github.com/gangbench/gangbench/clusters/providers"
	"github.com/gangbench/gangbench/clusters/request"
	"github.com/gangbench/gangbench/fakegpu"
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

// labDRAWant are the lines a lab with DRA GPUs prints instead: the same four verdicts, the
// resource message's DRA counterpart (v1.37.2, seen on both providers), the lab's template and the
// claims as the GPU count's source.
var labDRAWant = append(slices.Clone(labWant[:4]),
	"0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 cannot allocate all claims.",
	"team-a-0   team-a   Running   gpu-lab-worker",
	"resourceclaimtemplate.resource.k8s.io/gpu-2 created",
	"$ kubectl get resourceclaims -A",
)

// runLabTest runs `gangbench lab` with args and checks it reproduced the lab and left nothing.
func runLabTest(t *testing.T, args ...string) *sigRun {
	t.Helper()
	return runLabTestWant(t, labWant, args...)
}

// runLabTestWant is runLabTest with the lines the output must hold. A lab with DRA GPUs must not
// show describe node's nvidia.com/gpu line: its worker has none, the claims hold the GPUs.
func runLabTestWant(t *testing.T, want []string, args ...string) *sigRun {
	t.Helper()
	bin := buildGangbench(t)
	r := startRun(t, bin, append([]string{"lab"}, args...)...)
	code := r.waitExit(15 * time.Minute)
	out := r.output()
	if code != 0 {
		t.Errorf("gangbench lab %v: exit %d", args, code)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("the output lacks %q", w)
		}
	}
	if slices.Contains(args, string(fakegpu.APIDRA)) && strings.Contains(out, "kubectl describe node") {
		t.Errorf("the lab with DRA GPUs showed describe node's nvidia.com/gpu, which its worker does not have")
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

// TestLabLocalDRA runs the seed lab on the local provider with DRA GPUs: gpu-lab-worker publishes its
// 8 GPUs in a ResourceSlice and the pods claim them. The verdicts are the lab's; the pending team's
// resource message is v1.37's DRA counterpart of the lab's. It takes about a minute; as TestLabLocal,
// make test runs it only where no engine answers (the dra suite holds the DRA proofs there), make
// test-long always (TestLabKindDRA too).
func TestLabLocalDRA(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local cluster; skipped with -short")
	}
	if _, err := kind.DetectEngine(context.Background(), ""); err == nil {
		testenv.SkipUnlessLong(t, "a container engine answers; the lab with DRA GPUs is make test-long's")
	}
	runLabTestWant(t, labDRAWant, "--provider", "local", "--gpu-api", "dra")
}

// TestLabGPUAPIFlag: --gpu-api reaches the lab's cluster request where the provider publishes GPUs
// that way (local and, once its workers run the DRA plugin, kind), and is refused naming itself
// where the provider does not (a kind without DRA, played here by a provider that lacks it) or the
// API is unknown. (TestLabFlagsReachTheRun's table needs its own row for the flag.)
func TestLabGPUAPIFlag(t *testing.T) {
	for _, provider := range []string{"local", "kind"} {
		for _, api := range fakegpu.APIs() {
			args := []string{"--provider", provider, "--gpu-api", string(api)}
			r, err := planLab(t, args, provider)
			if err != nil {
				t.Fatalf("%v: %v", args, err)
			}
			groups := r.Spec.Groups()
			if len(groups) == 0 || groups[0].GPUs == nil || groups[0].GPUs.API != api || groups[0].GPUs.Inventory.Count != 8 {
				t.Errorf("%v: groups %+v", args, groups)
			}
		}
		def, err := planLab(t, []string{"--provider", provider}, provider)
		if err != nil {
			t.Fatal(err)
		}
		if g := def.Spec.Groups(); len(g) == 0 || g[0].GPUs.API != fakegpu.APIDevicePlugin {
			t.Errorf("%s, the default: %+v", provider, g)
		}
	}

	// A provider whose workers publish GPUs only through the device plugin (kind before its DRA
	// plugin): --gpu-api dra is refused naming the flag and where it runs, also when auto chose it.
	pluginOnly := func(r request.Request, env request.Env) (clusters.Provider, error) {
		p, err := providers.New(r, env)
		return devicePluginOnly{p}, err
	}
	for _, tt := range []struct {
		args    []string
		refused string
	}{
		{[]string{"--provider", "kind", "--gpu-api", "dra"}, "--gpu-api dra: the kind provider's workers publish GPUs only as device-plugin"},
		{[]string{"--gpu-api", "both"}, "--provider local --gpu-api both"},
		{[]string{"--provider", "local", "--gpu-api", "cuda"}, `--gpu-api: GPU API "cuda"`},
	} {
		cmd, f := labCommand(&globalOpts{newProvider: pluginOnly, providerNames: providers.Names()}, io.Discard, io.Discard)
		parse(t, cmd, tt.args)
		_, err := labRequest(f, resolved(f.provider, "kind"))
		var ue usageError
		if err == nil || !strings.Contains(err.Error(), tt.refused) || !errors.As(err, &ue) {
			t.Errorf("%v: err %v, want a usage error containing %q", tt.args, err, tt.refused)
		}
	}
}

// devicePluginOnly is a provider whose capabilities list the device plugin as its only GPU API.
type devicePluginOnly struct{ clusters.Provider }

func (p devicePluginOnly) Capabilities() clusters.Capabilities {
	c := p.Provider.Capabilities()
	c.GPUAPIs = []clusters.GPUAPI{clusters.GPUAPIDevicePlugin}
	return c
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
	assertNoLabContainers(t, engine)
}

// TestLabKindDRA runs the seed lab on kind with DRA GPUs: gpu-lab-worker's DRA kubelet plugin
// publishes its 8 GPUs and prepares the claims of the pods that run there. Three more minutes of
// kind beside TestLabKind and TestLabLocalDRA, so make test-long only.
func TestLabKindDRA(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kind cluster; skipped with -short")
	}
	testenv.SkipUnlessLong(t, "TestLabKind runs the lab on kind and TestLabLocalDRA with DRA GPUs")
	engine, err := kind.DetectEngine(context.Background(), "")
	if err != nil {
		t.Skip(err.Error())
	}
	runLabTestWant(t, labDRAWant, "--provider", "kind", "--gpu-api", "dra")
	assertNoLabContainers(t, engine)
}

// assertNoLabContainers checks that nothing of the lab's kind cluster is left in the engine.
func assertNoLabContainers(t *testing.T, engine string) {
	t.Helper()
	var ps bytes.Buffer
	if err := kind.ExecRunner(context.Background(), &ps, engine, "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster="+labCluster); err != nil {
		t.Fatal(err)
	}
	if left := strings.Fields(ps.String()); len(left) > 0 {
		t.Errorf("containers of the lab's cluster left: %v", left)
	}
}
