package kind

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
)

func cniNode(name, cidr, ip string, ready bool) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{PodCIDR: cidr},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}},
		},
	}
}

// Every node gets its own pod CIDR in its CNI config and a route to each other node's pods.
func TestSetupCNI(t *testing.T) {
	kproxy := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, NumberReady: 2, UpdatedNumberScheduled: 2}}
	cs := fake.NewClientset(cniNode("c-control-plane", "10.244.0.0/24", "172.18.0.3", true), cniNode("c-worker", "10.244.1.0/24", "172.18.0.4", true), kproxy)
	var confs = map[string]string{}
	handle := func(n *fakeNode, c *fakeCmd) error {
		if strings.HasPrefix(c.line(), "sh -c mkdir -p /etc/cni/net.d && cat > "+cniConfPath) {
			b, err := io.ReadAll(c.stdin)
			confs[n.name] = string(b)
			return err
		}
		return nil
	}
	cp := &fakeNode{name: "c-control-plane", handle: handle}
	w := &fakeNode{name: "c-worker", handle: handle}
	if err := setupCNI(context.Background(), cs, []nodes.Node{cp, w}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[*fakeNode][2]string{cp: {"10.244.0.0/24", "ip route replace 10.244.1.0/24 via 172.18.0.4"}, w: {"10.244.1.0/24", "ip route replace 10.244.0.0/24 via 172.18.0.3"}} {
		var conf struct {
			Plugins []struct {
				Type string
				IPAM struct {
					Ranges [][]struct{ Subnet string }
				}
			}
		}
		if err := json.Unmarshal([]byte(confs[n.name]), &conf); err != nil {
			t.Fatalf("%s: CNI config %q: %v", n.name, confs[n.name], err)
		}
		if len(conf.Plugins) != 2 || conf.Plugins[0].Type != "ptp" || conf.Plugins[0].IPAM.Ranges[0][0].Subnet != want[0] || conf.Plugins[1].Type != "portmap" {
			t.Errorf("%s: CNI config %s, want ptp on %s + portmap", n.name, confs[n.name], want[0])
		}
		if got := n.callsMatching("ip route"); !slices.Equal(got, []string{want[1]}) {
			t.Errorf("%s: routes %v, want [%s]", n.name, got, want[1])
		}
	}
}

// A node the controller-manager never gives a pod CIDR fails the set-up, naming the node.
func TestSetupCNIWithoutPodCIDR(t *testing.T) {
	cs := fake.NewClientset(cniNode("c-worker", "", "172.18.0.4", false))
	err := setupCNI(context.Background(), cs, []nodes.Node{&fakeNode{name: "c-worker", handle: func(*fakeNode, *fakeCmd) error { return nil }}}, 1500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "c-worker") || !strings.Contains(err.Error(), "pod CIDR") {
		t.Errorf("err = %v, want one naming c-worker and its missing pod CIDR", err)
	}
}

func TestMissingCaps(t *testing.T) {
	for _, tt := range []struct {
		bnd  string
		want []string
	}{
		{"000001fffeffffff", []string{"SYS_RESOURCE"}},
		{"000001ffffffffff", nil},
		{"000001fffefffffe", []string{"CHOWN", "SYS_RESOURCE"}},
	} {
		got, err := missingCaps(tt.bnd)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("missingCaps(%s) = %v, %v; want %v", tt.bnd, got, err, tt.want)
		}
	}
	if _, err := missingCaps("zz"); err == nil {
		t.Error("a bad mask was accepted")
	}
}

// The shim replaces --privileged in `run` by the given arguments, drops it from `exec`, and passes
// everything else through unchanged (checked by running it with a fake engine that prints argv).
func TestShimScript(t *testing.T) {
	dir := t.TempDir()
	echo := filepath.Join(dir, "engine")
	if err := os.WriteFile(echo, []byte("#!/bin/sh\nfor a do printf '%s\\n' \"$a\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	shim := filepath.Join(dir, "docker")
	if err := os.WriteFile(shim, []byte(shimScript(echo, []string{"--cap-add=ALL", "--device-cgroup-rule=a *:* rwm"})), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ in, want []string }{
		{[]string{"run", "--name", "n", "--privileged", "img"}, []string{"run", "--name", "n", "--cap-add=ALL", "--device-cgroup-rule=a *:* rwm", "img"}},
		{[]string{"exec", "--privileged", "n", "cat", "/kind/version"}, []string{"exec", "n", "cat", "/kind/version"}},
		{[]string{"info", "--privileged", "x y"}, []string{"info", "--privileged", "x y"}},
	} {
		out, err := exec.Command(shim, tt.in...).Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); !slices.Equal(got, tt.want) {
			t.Errorf("shim %q ran %q, want %q", tt.in, got, tt.want)
		}
	}
}

// ProbePrivilege: --privileged working needs nothing; refused, the capability form is tried and
// returned; both refused is a *PrivilegeError naming both causes.
func TestProbePrivilege(t *testing.T) {
	refuse := func(line string) (string, error) {
		return "", &CommandError{Args: strings.Fields(line), Stderr: "unable to apply caps: operation not permitted", Err: errors.New("exit status 126")}
	}
	for _, tt := range []struct {
		name           string
		answer         func(line string) (string, error)
		wantArgs, fail bool
	}{
		{"privileged works", func(string) (string, error) { return "", nil }, false, false},
		{"capabilities only", func(line string) (string, error) {
			if strings.Contains(line, "--privileged") {
				return refuse(line)
			}
			return "", nil
		}, true, false},
		{"neither", refuse, false, true},
	} {
		r := &fakeRunner{answer: tt.answer}
		args, err := ProbePrivilege(context.Background(), r.run, "docker", "img:1")
		var pe *PrivilegeError
		switch {
		case tt.fail && (!errors.As(err, &pe) || !strings.Contains(err.Error(), "apply caps")):
			t.Errorf("%s: err = %v, want a *PrivilegeError with the engine's words", tt.name, err)
		case !tt.fail && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wantArgs != (args != nil):
			t.Errorf("%s: args %v, want some: %v", tt.name, args, tt.wantArgs)
		}
		for _, c := range r.calls {
			if !strings.HasPrefix(c, "docker run --rm --entrypoint /bin/true") || !strings.HasSuffix(c, " img:1") {
				t.Errorf("%s: probe ran %q, want a throwaway container of the image", tt.name, c)
			}
		}
		if tt.wantArgs && !slices.Contains(args, "--cap-add=ALL") {
			t.Errorf("%s: args %v lack --cap-add=ALL", tt.name, args)
		}
	}
}
