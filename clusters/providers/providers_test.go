package providers

import (
	"strings"
	"testing"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/kind"
	"github.com/gangbench/gangbench/clusters/local"
	"github.com/gangbench/gangbench/clusters/request"
)

// TestNewRefuses: a request the provider cannot take is refused naming the field and its value,
// by the constructor (mechanics) or by Provider.Validate (the spec), before anything starts.
func TestNewRefuses(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	with := func(provider string, spec clusters.Spec, f func(*request.Request)) request.Request {
		r := request.New(provider, spec)
		if f != nil {
			f(&r)
		}
		return r
	}
	tests := []struct {
		name string
		req  request.Request
		want string
	}{
		{"provider", with("auto", clusters.Spec{Nodes: 1}, nil), `provider "auto": accepted local, kind, existing`},
		{"engine on local", with("local", clusters.Spec{Nodes: 1}, func(r *request.Request) { r.Engine = "docker" }), `engine "docker" given with provider local`},
		{"bad engine", with("kind", clusters.Spec{}, func(r *request.Request) { r.Engine = "lxc" }), `kind engine "lxc"`},
		{"held kind", with("kind", clusters.Spec{Name: "x"}, func(r *request.Request) { r.Held = true }), "held"},
		{"kubeconfig on local", with("local", clusters.Spec{Nodes: 1}, func(r *request.Request) { r.Kubeconfig = "/kc" }), "kubeconfig /kc given with provider local"},
		{"existing without kubeconfig", with("existing", clusters.Spec{}, nil), "kubeconfig: empty"},
		{"kube bin dir on kind", with("kind", clusters.Spec{KubeBinDir: "/x"}, nil), "kube bin dir"},
		{"local nodes", with("local", clusters.Spec{Nodes: 0}, nil), "nodes: 0"},
		{"images on local", with("local", clusters.Spec{Nodes: 1, Images: clusters.Images{Node: "img:1"}}, nil), "images"},
		{"real kubelets on local", with("local", clusters.Spec{NodeGroups: []clusters.NodeGroup{{Count: 1, Kubelet: clusters.RealKubelets, GPUs: &clusters.GroupGPUs{}}}}, nil), `nodeGroups[0].kubelet: "real"`},
		{"unknown GPU API", with("local", clusters.Spec{NodeGroups: []clusters.NodeGroup{{Count: 1, GPUs: &clusters.GroupGPUs{API: "cuda"}}}}, nil), `nodeGroups[0].gpus.api: "cuda"`},
		{"existing creates nothing", with("existing", clusters.Spec{}, func(r *request.Request) { r.Kubeconfig = "/kc" }), "does not create clusters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.req, request.Env{})
			if err == nil {
				err = p.Validate(tt.req.Spec)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestCapabilities: callers decide on these, so each provider's must say what it can do.
func TestCapabilities(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	caps := map[string]clusters.Capabilities{}
	for _, name := range []string{"local", "kind", "existing"} {
		r := request.New(name, clusters.Spec{})
		r.Kubeconfig = map[bool]string{true: "/kc"}[name == "existing"]
		p, err := New(r, request.Env{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c := p.Capabilities(); c.Provider != name || p.Name() != name {
			t.Errorf("%s: capabilities of %q, name %q", name, c.Provider, p.Name())
		}
		caps[name] = p.Capabilities()
	}
	if l := caps["local"]; l.RealKubelets || !l.SimulatedNodes || !l.NeedsHolder || l.KeepRunning || !l.CanControl(clusters.Etcd) || l.CanControl(clusters.Kubelet) || l.Images {
		t.Errorf("local: %+v", l)
	}
	if k := caps["kind"]; !k.RealKubelets || !k.SimulatedNodes || !k.KeepRunning || k.NeedsHolder || !k.CanControl("kubelet/gangbench-worker") || !k.Images || !k.GPUFaults {
		t.Errorf("kind: %+v", k)
	}
	if e := caps["existing"]; e.Creates || len(e.ComponentControl) > 0 || e.GPUFaults {
		t.Errorf("existing: %+v", e)
	}
}

// TestCreatorsCreate: Creators, Choices and StateDir list by name what Capabilities.Creates says.
func TestCreatorsCreate(t *testing.T) {
	state := t.TempDir()
	t.Setenv(local.StateDirEnv, state+"/local")
	t.Setenv(kind.StateDirEnv, state+"/kind")
	var creators []string
	for _, name := range Names() {
		r := request.New(name, clusters.Spec{})
		r.Kubeconfig = map[bool]string{true: "/kc"}[name == "existing"]
		p, err := New(r, request.Env{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, dirErr := StateDir(name)
		if c := p.Capabilities().Creates; c {
			creators = append(creators, name)
			if dirErr != nil {
				t.Errorf("%s creates clusters but has no state dir: %v", name, dirErr)
			}
		} else if dirErr == nil {
			t.Errorf("%s creates no clusters but has a state dir", name)
		}
	}
	if got, want := strings.Join(Creators(), ","), strings.Join(creators, ","); got != want {
		t.Errorf("Creators() = %s, want %s", got, want)
	}
	if got := strings.Join(Choices(), ","); got != strings.Join(creators, ",")+","+Auto {
		t.Errorf("Choices() = %s", got)
	}
	if got := strings.Join(StateDirs(), ","); got != state+"/local,"+state+"/kind" {
		t.Errorf("StateDirs() = %s", got)
	}
	if !strings.Contains(strings.Join(creators, ","), Default) {
		t.Errorf("Default %s does not create clusters", Default)
	}
}
