package draplugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/internal/testenv"
)

// waitTimeout bounds every wait in these tests. Generous, because the machine running them may be
// busy; a passing test never waits it out.
const waitTimeout = 20 * time.Second

// testNode is the node every test plugin runs on.
const testNode = "node-a"

// newClientset is a fake apiserver holding the node (the helper looks up its UID for the slice's
// owner) and the given objects. It names objects created with generateName, as the apiserver does
// and the fake does not: the helper creates slices that way.
func newClientset(objs ...runtime.Object) *fake.Clientset {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-a-uid"}}
	cs := fake.NewClientset(append([]runtime.Object{node}, objs...)...)
	var n atomic.Int64
	cs.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject()
		m, err := meta.Accessor(obj)
		if err == nil && m.GetName() == "" && m.GetGenerateName() != "" {
			m.SetName(fmt.Sprintf("%s%05d", m.GetGenerateName(), n.Add(1)))
		}
		return false, nil, nil
	})
	return cs
}

// env is a running plugin with its directories and its fake apiserver.
type env struct {
	p              *Plugin
	cs             *fake.Clientset
	regDir, cdiDir string
	pluginDir      string
}

// startPlugin runs a plugin of count GPUs (defaults for the rest) against a fresh fake apiserver,
// with tweak applied to its options, and stops it when the test ends.
func startPlugin(t *testing.T, count int, tweak func(*Options), objs ...runtime.Object) *env {
	t.Helper()
	dir := testenv.ShortTempDir(t)
	e := &env{
		cs:        newClientset(objs...),
		regDir:    filepath.Join(dir, "reg"),
		cdiDir:    filepath.Join(dir, "cdi"),
		pluginDir: filepath.Join(dir, "plugin"),
	}
	opts := Options{
		Inventory: fakegpu.Inventory{Count: count}, NodeName: testNode, Client: e.cs,
		RegistrarDir: e.regDir, PluginDataDir: e.pluginDir, CDIDir: e.cdiDir,
		PollInterval: 50 * time.Millisecond,
	}
	if tweak != nil {
		tweak(&opts)
	}
	p, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.p = p
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	select {
	case <-p.Ready():
	case err := <-errc:
		cancel()
		t.Fatalf("Run returned before ready: %v", err)
	case <-time.After(waitTimeout):
		cancel()
		t.Fatalf("plugin not ready within %s", waitTimeout)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(waitTimeout):
			t.Errorf("Run did not return within %s of cancel", waitTimeout)
		}
	})
	return e
}

// fakeKubelet is the kubelet's side of plugin registration, as its plugin watcher does it over
// real gRPC: find the registration socket in the registry directory, GetInfo, dial the DRA endpoint
// it names, and NotifyRegistrationStatus. It then calls the DRA service as the kubelet's DRA
// manager does.
type fakeKubelet struct {
	info *registerapi.PluginInfo
	reg  registerapi.RegistrationClient
	dra  drapbv1.DRAPluginClient
}

func dial(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// registerKubelet registers e's plugin with a fake kubelet, which accepts it (or refuses it with
// refusal), and returns the kubelet's clients.
func registerKubelet(t *testing.T, ctx context.Context, e *env, refusal string) *fakeKubelet {
	t.Helper()
	sock := filepath.Join(e.regDir, fakegpu.DRADriver+"-reg.sock")
	testenv.Eventually(t, waitTimeout, "the registration socket "+sock+" exists", func() bool {
		_, err := os.Lstat(sock)
		return err == nil
	})
	k := &fakeKubelet{reg: registerapi.NewRegistrationClient(dial(t, sock))}
	info, err := k.reg.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	k.info = info
	k.dra = drapbv1.NewDRAPluginClient(dial(t, info.Endpoint))
	st := &registerapi.RegistrationStatus{PluginRegistered: refusal == "", Error: refusal}
	_, err = k.reg.NotifyRegistrationStatus(ctx, st)
	if refusal == "" && err != nil {
		t.Fatalf("NotifyRegistrationStatus: %v", err)
	}
	return k
}

// TestRegistration: the plugin offers a registration socket whose GetInfo names our driver and a
// DRA endpoint serving the v1 API, and it counts itself registered only once the kubelet says so.
func TestRegistration(t *testing.T) {
	ctx := context.Background()
	e := startPlugin(t, 2, nil)
	if ok, err := e.p.Registered(); ok || err == nil {
		t.Errorf("Registered before the kubelet answered = %v, %v", ok, err)
	}
	k := registerKubelet(t, ctx, e, "")
	if k.info.Type != registerapi.DRAPlugin || k.info.Name != fakegpu.DRADriver {
		t.Errorf("GetInfo = %+v, want a DRAPlugin named %s", k.info, fakegpu.DRADriver)
	}
	if !slices.Contains(k.info.SupportedVersions, drapbv1.DRAPluginService) {
		t.Errorf("supported services %v lack %s", k.info.SupportedVersions, drapbv1.DRAPluginService)
	}
	if want := filepath.Join(e.pluginDir, "dra.sock"); k.info.Endpoint != want {
		t.Errorf("endpoint %s, want %s", k.info.Endpoint, want)
	}
	if ok, err := e.p.Registered(); !ok || err != nil {
		t.Errorf("Registered after the kubelet accepted = %v, %v", ok, err)
	}
	if st := e.p.Status(); !st.Registered || st.Registrations != 1 || st.Driver != fakegpu.DRADriver || len(st.Devices) != 2 {
		t.Errorf("status %+v", st)
	}
	// A kubelet that refuses the plugin: not registered, and the reason is kept.
	_, _ = k.reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: "version skew"})
	if ok, err := e.p.Registered(); ok || err == nil || !strings.Contains(err.Error(), "version skew") {
		t.Errorf("Registered after a refusal = %v, %v", ok, err)
	}
}

// claim is an allocated claim with results (request, device) of our driver on testNode.
func claim(ns, name, uid string, results ...[2]string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
	c.Status.Allocation = &resourcev1.AllocationResult{}
	for _, r := range results {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourcev1.DeviceRequestAllocationResult{
			Request: r[0], Driver: fakegpu.DRADriver, Pool: testNode, Device: r[1],
		})
	}
	return c
}

func pbClaim(c *resourcev1.ResourceClaim) *drapbv1.Claim {
	return &drapbv1.Claim{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}
}
