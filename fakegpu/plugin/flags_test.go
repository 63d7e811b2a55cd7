package plugin

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gangbench/gangbench/fakegpu"
)

func parse(t *testing.T, env map[string]string, args ...string) (Options, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	finish := BindFlags(fs, func(k string) string { return env[k] })
	if err := fs.Parse(args); err != nil {
		return Options{}, err
	}
	return finish()
}

func TestBindFlagsDefaults(t *testing.T) {
	o, err := parse(t, map[string]string{EnvNodeName: "kind-worker"})
	if err != nil {
		t.Fatal(err)
	}
	want := fakegpu.Inventory{Count: fakegpu.DefaultCount, ResourceName: fakegpu.DefaultResourceName}
	if o.Inventory != want || o.NodeName != "kind-worker" || o.PluginDir != "/var/lib/kubelet/device-plugins/" ||
		o.HealthAddr != "" || o.HealthFile != "" || o.PollInterval != DefaultPollInterval || o.SocketName != DefaultSocketName {
		t.Errorf("defaults = %+v", o)
	}
	// The defaults make a valid plugin whose inventory is fakegpu's default.
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	// Domain size 0 ("one domain") is what the default's 8-of-8 amounts to.
	want = fakegpu.Default()
	want.NVLinkDomainSize = 0
	if p.inv != want {
		t.Errorf("inventory %+v, want %+v", p.inv, want)
	}
}

func TestBindFlagsValues(t *testing.T) {
	o, err := parse(t, map[string]string{EnvNodeName: "from-env"},
		"--count=4", "--resource-name=example.com/gpu", "--product=A100", "--memory-mib=40960", "--nvlink-domain-size=2",
		"--node-name=n1", "--plugin-dir=/x", "--health-addr=0.0.0.0:9400", "--health-file=/h", "--poll-interval=2s")
	if err != nil {
		t.Fatal(err)
	}
	want := fakegpu.Inventory{Count: 4, ResourceName: "example.com/gpu", Product: "A100", MemoryMiB: 40960, NVLinkDomainSize: 2}
	if o.Inventory != want || o.NodeName != "n1" || o.PluginDir != "/x" || o.HealthAddr != "0.0.0.0:9400" || o.HealthFile != "/h" || o.PollInterval != 2*time.Second {
		t.Errorf("parsed %+v", o)
	}
}

func TestBindFlagsErrors(t *testing.T) {
	env := map[string]string{EnvNodeName: "n"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{name: "count zero", env: env, args: []string{"--count=0"}, want: []string{"--count=0", "between 1 and 64"}},
		{name: "count too big", env: env, args: []string{"--count=65"}, want: []string{"--count=65"}},
		{name: "count not a number", env: env, args: []string{"--count=many"}, want: []string{"many", "-count"}},
		{name: "resource name", env: env, args: []string{"--resource-name=gpu"}, want: []string{`--resource-name="gpu"`, "domain"}},
		{name: "empty resource name", env: env, args: []string{"--resource-name="}, want: []string{`--resource-name=""`}},
		{name: "product", env: env, args: []string{"--product=H 100"}, want: []string{`--product="H 100"`}},
		{name: "memory", env: env, args: []string{"--memory-mib=-1"}, want: []string{"--memory-mib=-1"}},
		{name: "domain", env: env, args: []string{"--count=8", "--nvlink-domain-size=3"}, want: []string{"--nvlink-domain-size=3", "divide"}},
		{name: "no node", args: nil, want: []string{"--node-name", "NODE_NAME"}},
		{name: "kubelet socket elsewhere", env: env, args: []string{"--plugin-dir=/a", "--kubelet-socket=/b/k.sock"}, want: []string{"--kubelet-socket=/b/k.sock", "--plugin-dir"}},
		{name: "plugin dir too long", env: env, args: []string{"--plugin-dir=/" + strings.Repeat("x", 100)}, want: []string{"--plugin-dir=/xxx", "107"}},
		{name: "socket name", env: env, args: []string{"--socket-name=a/b"}, want: []string{`--socket-name="a/b"`}},
		{name: "poll", env: env, args: []string{"--poll-interval=0s"}, want: []string{"--poll-interval=0s"}},
		{name: "all at once", args: []string{"--count=0", "--product=a b"}, want: []string{"--count=0", "--product", "--node-name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.env, tc.args...)
			if err == nil {
				t.Fatalf("parse(%v) = nil error", tc.args)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestArgsRoundTrip(t *testing.T) {
	for _, inv := range []fakegpu.Inventory{
		fakegpu.Default(),
		{Count: 4},
		{Count: 8, ResourceName: "example.com/gpu", Product: "A100", MemoryMiB: 40960, NVLinkDomainSize: 4},
	} {
		args := Args(inv, "0.0.0.0:9400")
		o, err := parse(t, map[string]string{EnvNodeName: "n"}, args...)
		if err != nil {
			t.Fatalf("Args(%+v) = %v does not parse: %v", inv, args, err)
		}
		if o.Inventory.WithDefaults() != inv.WithDefaults() || o.HealthAddr != "0.0.0.0:9400" {
			t.Errorf("Args(%+v) = %v parsed back as %+v", inv, args, o)
		}
	}
}
