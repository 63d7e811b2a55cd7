package kind

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	kindexec "sigs.k8s.io/kind/pkg/exec"

	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/fakegpu/plugin"
)

// fakeRunner answers engine CLI commands from a table keyed by "name arg0" (e.g. "docker info").
// A missing key for an engine binary means "not installed".
type fakeRunner struct {
	mu    sync.Mutex
	calls []string
	// answer returns stdout and an error for a command line.
	answer func(line string) (string, error)
}

func (f *fakeRunner) run(ctx context.Context, stdout io.Writer, name string, args ...string) error {
	line := strings.Join(append([]string{name}, args...), " ")
	f.mu.Lock()
	f.calls = append(f.calls, line)
	f.mu.Unlock()
	out, err := f.answer(line)
	if stdout != nil && out != "" {
		if _, werr := io.WriteString(stdout, out); werr != nil {
			return werr
		}
	}
	return err
}

func notInstalled(name string) error {
	return &exec.Error{Name: name, Err: exec.ErrNotFound}
}

// noDaemon is what ExecRunner returns for `docker info` on a machine without a docker daemon.
func noDaemon() error {
	return &CommandError{
		Args:   []string{"docker", "info"},
		Stderr: "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n",
		Err:    errors.New("exit status 1"),
	}
}

// runnerWhere returns a fakeRunner in which only the listed engines answer `info`; the others are
// docker without a daemon and podman/nerdctl not installed. extra answers other commands.
func runnerWhere(answering []string, extra map[string]string) *fakeRunner {
	return &fakeRunner{answer: func(line string) (string, error) {
		fields := strings.Fields(line)
		engine := fields[0]
		if fields[1] == "info" {
			if slices.Contains(answering, engine) {
				return `"28.2.2"`, nil
			}
			if engine == "docker" {
				return `""`, noDaemon()
			}
			return "", notInstalled(engine)
		}
		for prefix, out := range extra {
			if strings.HasPrefix(line, prefix) {
				return out, nil
			}
		}
		return "", fmt.Errorf("fake runner: unexpected command %q", line)
	}}
}

// fakeNode is a kind node whose commands are answered by its handler.
type fakeNode struct {
	name, role string
	handle     func(n *fakeNode, c *fakeCmd) error
	mu         sync.Mutex
	calls      []string
	files      map[string]string // written with `cp /dev/stdin <path>`
	imported   [][]byte          // archives given to `ctr images import`
}

var _ nodes.Node = (*fakeNode)(nil)

func (n *fakeNode) String() string               { return n.name }
func (n *fakeNode) Role() (string, error)        { return n.role, nil }
func (n *fakeNode) IP() (string, string, error)  { return "172.18.0.2", "", nil }
func (n *fakeNode) SerialLogs(w io.Writer) error { return nil }
func (n *fakeNode) Command(name string, args ...string) kindexec.Cmd {
	return n.CommandContext(context.Background(), name, args...)
}
func (n *fakeNode) CommandContext(ctx context.Context, name string, args ...string) kindexec.Cmd {
	return &fakeCmd{node: n, ctx: ctx, argv: append([]string{name}, args...)}
}

func (n *fakeNode) record(line string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls = append(n.calls, line)
}

func (n *fakeNode) callsMatching(sub string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, c := range n.calls {
		if strings.Contains(c, sub) {
			out = append(out, c)
		}
	}
	return out
}

type fakeCmd struct {
	node           *fakeNode
	ctx            context.Context
	argv           []string
	stdin          io.Reader
	stdout, stderr io.Writer
}

func (c *fakeCmd) Run() error {
	c.node.record(strings.Join(c.argv, " "))
	if c.stdout == nil {
		c.stdout = io.Discard
	}
	if c.stderr == nil {
		c.stderr = io.Discard
	}
	if err := c.ctx.Err(); err != nil {
		return err
	}
	return c.node.handle(c.node, c)
}
func (c *fakeCmd) SetEnv(...string) kindexec.Cmd      { return c }
func (c *fakeCmd) SetStdin(r io.Reader) kindexec.Cmd  { c.stdin = r; return c }
func (c *fakeCmd) SetStdout(w io.Writer) kindexec.Cmd { c.stdout = w; return c }
func (c *fakeCmd) SetStderr(w io.Writer) kindexec.Cmd { c.stderr = w; return c }
func (c *fakeCmd) line() string                       { return strings.Join(c.argv, " ") }
func (c *fakeCmd) out(s string) error                 { _, err := io.WriteString(c.stdout, s); return err }
func (c *fakeCmd) fail(msg string) error {
	io.WriteString(c.stderr, msg)
	return errors.New("exit status 1")
}

// containerdConfigV3 is enough of `containerd config dump` for kind's snapshotter detection.
const containerdConfigV3 = "version = 3\n[plugins]\n  [plugins.\"io.containerd.cri.v1.images\"]\n    snapshotter = \"overlayfs\"\n"

// kindNodeBehaviour answers the commands this package and kind's nodeutils run in a node, keeping
// just enough state (static pod manifests, kubelet) to follow Stop/Start. Every `sh -c` script is
// syntax-checked with the local sh, since the real node's sh never sees them in these tests.
type kindNodeBehaviour struct {
	t                *testing.T
	mu               sync.Mutex
	schedulerRunning bool
	kubeletRunning   bool
	manifest         string
	// plugins are the fake GPU device plugins by node name, answering their health API at
	// http://<ip>:9400; a node without one has no plugin.
	plugins map[string]*fakePlugin
}

// fakePlugin is the state a fakegpu device plugin's health API reports.
type fakePlugin struct {
	ip            string
	ids           []string
	unhealthy     map[string]bool
	file          map[string]bool // unhealthy through the plugin's health file: the API cannot heal them
	registrations int
}

func newFakePlugin(node, ip string, count int) *fakePlugin {
	return &fakePlugin{ip: ip, ids: fakegpu.Inventory{Count: count}.DeviceIDs(node), unhealthy: map[string]bool{}, registrations: 1}
}

func (p *fakePlugin) status(node string) plugin.Status {
	st := plugin.Status{Node: node, ResourceName: fakegpu.DefaultResourceName, Registered: true, Registrations: p.registrations}
	for i, id := range p.ids {
		d := plugin.DeviceStatus{ID: id, Index: i, Health: pluginapi.Healthy}
		if p.unhealthy[id] {
			d.Health, d.UnhealthyBy = pluginapi.Unhealthy, []string{"api"}
		}
		if p.file[id] {
			d.Health, d.UnhealthyBy = pluginapi.Unhealthy, append(d.UnhealthyBy, "file")
		}
		st.Devices = append(st.Devices, d)
	}
	return st
}

// postRE matches the health API calls a script makes.
var postRE = regexp.MustCompile(`-X POST 'http://([0-9.]+):9400/devices/([^/']+)/(healthy|unhealthy)'`)

func newKindNodeBehaviour(t *testing.T) *kindNodeBehaviour {
	b, err := os.ReadFile(filepath.Join("testdata", "kube-scheduler.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return &kindNodeBehaviour{t: t, schedulerRunning: true, kubeletRunning: true, manifest: string(b)}
}

func (b *kindNodeBehaviour) handle(n *fakeNode, c *fakeCmd) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	line := c.line()
	switch {
	case line == "containerd config dump":
		return c.out(containerdConfigV3)
	case strings.HasPrefix(line, "ctr --namespace=k8s.io images import"):
		data, err := io.ReadAll(c.stdin)
		if err != nil {
			return err
		}
		n.mu.Lock()
		n.imported = append(n.imported, data)
		n.mu.Unlock()
		return nil
	case line == "cat /kind/version":
		return c.out("v1.37.0\n")
	case line == "cat "+manifestDir+"/kube-scheduler.yaml":
		return c.out(b.manifest)
	case strings.HasPrefix(line, "cp /dev/stdin "):
		data, err := io.ReadAll(c.stdin)
		if err != nil {
			return err
		}
		n.mu.Lock()
		if n.files == nil {
			n.files = map[string]string{}
		}
		n.files[strings.TrimPrefix(line, "cp /dev/stdin ")] = string(data)
		n.mu.Unlock()
		return nil
	case strings.HasPrefix(line, "crictl inspecti "):
		return c.out(`{"status":{"id":"sha256:5ched"}}`)
	case strings.HasPrefix(line, "crictl ps"):
		if b.schedulerRunning {
			return c.out("c0ffee\n")
		}
		return nil
	case line == "crictl exec c0ffee kube-scheduler --version":
		return c.out("Kubernetes v1.37.0-gangbench.1\n")
	case strings.HasPrefix(line, "curl ") && strings.Contains(line, ":9400/devices"):
		p := b.plugins[n.name]
		if p == nil || !strings.Contains(line, "http://"+p.ip+":9400/") {
			return c.fail("curl: (7) Failed to connect")
		}
		out, err := json.Marshal(p.status(n.name))
		if err != nil {
			return err
		}
		return c.out(string(out))
	case strings.HasPrefix(line, "curl "):
		if strings.Contains(line, ":10248/") && b.kubeletRunning || strings.Contains(line, ":10259/") && b.schedulerRunning {
			return c.out("ok")
		}
		return c.fail("curl: (7) Failed to connect")
	case line == "systemctl is-active kubelet":
		if b.kubeletRunning {
			return c.out("active\n")
		}
		return c.out("inactive\n")
	case line == "systemctl start kubelet":
		b.kubeletRunning = true
		// The kubelet's new socket makes the plugin register again (fakegpu/plugin's watch).
		if p := b.plugins[n.name]; p != nil {
			p.registrations++
		}
		return nil
	case strings.HasPrefix(line, "sh -c "):
		script := c.argv[2]
		if out, err := exec.Command("sh", "-n", "-c", script).CombinedOutput(); err != nil {
			b.t.Errorf("node %s: script is not valid sh: %v: %s\n%s", n.name, err, out, script)
		}
		if posts := postRE.FindAllStringSubmatch(script, -1); len(posts) > 0 {
			p := b.plugins[n.name]
			for _, m := range posts {
				if p == nil || m[1] != p.ip || !slices.Contains(p.ids, m[2]) {
					return c.fail("curl: (22) The requested URL returned error: 404")
				}
				p.unhealthy[m[2]] = m[3] == "unhealthy"
			}
			return nil
		}
		switch {
		case strings.Contains(script, "systemctl stop kubelet"):
			b.kubeletRunning = false
		case strings.Contains(script, "mv "+manifestDir+"/kube-scheduler.yaml "+stoppedDir):
			if !b.schedulerRunning {
				return c.fail("kube-scheduler is not running")
			}
			b.schedulerRunning = false
		case strings.Contains(script, "mv "+stoppedDir+"/kube-scheduler.yaml "+manifestDir):
			if b.schedulerRunning {
				return c.fail("kube-scheduler is already running")
			}
			b.schedulerRunning = true
		}
		return nil
	}
	return c.fail("fake node: unexpected command: " + line)
}

// fakeKind is a kind provider whose clusters are maps of fake nodes.
type fakeKind struct {
	mu       sync.Mutex
	clusters map[string][]nodes.Node
	// onCreate makes the nodes of a new cluster and writes its kubeconfig.
	onCreate func(name string) ([]nodes.Node, error)
	created  []string
	deleted  []string
}

func (f *fakeKind) Create(name string, _ ...cluster.CreateOption) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = append(f.created, name)
	if f.onCreate == nil {
		return errors.New("fake kind: create not expected")
	}
	ns, err := f.onCreate(name)
	if err != nil {
		return err
	}
	if f.clusters == nil {
		f.clusters = map[string][]nodes.Node{}
	}
	f.clusters[name] = ns
	return nil
}

func (f *fakeKind) Delete(name, kubeconfig string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, name)
	delete(f.clusters, name)
	return nil
}

func (f *fakeKind) List() ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.clusters {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

func (f *fakeKind) ListNodes(name string) ([]nodes.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clusters[name], nil
}

// writeTestKubeconfig writes a kubeconfig like kind's: a server URL, a CA and an embedded client
// certificate (a real key pair, since client-go parses it when building a transport).
func writeTestKubeconfig(t *testing.T, path string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes-admin", Organization: []string{"kubeadm:cluster-admins"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(typ string, der []byte) string {
		var buf bytes.Buffer
		_ = pem.Encode(&buf, &pem.Block{Type: typ, Bytes: der})
		return base64.StdEncoding.EncodeToString(buf.Bytes())
	}
	cert := b64("CERTIFICATE", der)
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: %s
    server: https://127.0.0.1:41234
  name: kind-test
contexts:
- context: {cluster: kind-test, user: kind-test}
  name: kind-test
current-context: kind-test
users:
- name: kind-test
  user:
    client-certificate-data: %s
    client-key-data: %s
`, cert, cert, b64("EC PRIVATE KEY", kder))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
}
