package local

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gangbench/gangbench/clusters"
)

// layout is everything flag rendering needs to know about one cluster's files and ports. It is plain
// data so that the flags can be unit-tested without starting anything.
type layout struct {
	Dir     string // cluster state dir (0700)
	PKIDir  string
	DataDir string // etcd data
	Ports   ports
}

type ports struct {
	EtcdClient int `json:"etcdClient"`
	EtcdPeer   int `json:"etcdPeer"`
	APIServer  int `json:"apiServer"`
	KCM        int `json:"kcm"`
	Scheduler  int `json:"scheduler"`
	Kwok       int `json:"kwok"`
}

func (l layout) pki(name string) string        { return l.PKIDir + "/" + name }
func (l layout) kubeconfig(user string) string { return l.Dir + "/kubeconfig-" + user }
func (l layout) kwokConfig() string            { return l.Dir + "/kwok.yaml" }
func (l layout) tokenFile() string             { return l.PKIDir + "/tokens.csv" }

// featureGatesFor merges the defaults, the cluster-wide gates and the component's own overrides.
func featureGatesFor(spec clusters.Spec, c clusters.Component) map[string]bool {
	g := clusters.GangFeatureGates(spec.KubernetesVersion)
	maps.Copy(g, spec.FeatureGates)
	maps.Copy(g, spec.ComponentFeatureGates[c])
	return g
}

func renderGates(g map[string]bool) string {
	keys := slices.Sorted(maps.Keys(g))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+strconv.FormatBool(g[k]))
	}
	return strings.Join(parts, ",")
}

func renderMap(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

// componentArgs renders the argv (without the binary) of one component. Defaults come first as a map
// so that Spec.ExtraArgs can override any of them; the result is sorted for stable golden tests and
// readable `ps` output.
func componentArgs(c clusters.Component, l layout, spec clusters.Spec) ([]string, error) {
	flags := map[string]string{}
	loopback := "127.0.0.1"
	switch c {
	case clusters.Etcd:
		client := fmt.Sprintf("http://%s:%d", loopback, l.Ports.EtcdClient)
		peer := fmt.Sprintf("http://%s:%d", loopback, l.Ports.EtcdPeer)
		flags = map[string]string{
			"name":                        "gangbench",
			"data-dir":                    l.DataDir,
			"listen-client-urls":          client,
			"advertise-client-urls":       client,
			"listen-peer-urls":            peer,
			"initial-advertise-peer-urls": peer,
			"initial-cluster":             "gangbench=" + peer,
			// A throwaway test cluster: durability is worth nothing, fsync latency is worth a lot on
			// shared CI disks.
			"unsafe-no-fsync": "true",
			"log-level":       "warn",
		}
	case clusters.APIServer:
		rc := clusters.GangRuntimeConfig(spec.KubernetesVersion)
		maps.Copy(rc, spec.RuntimeConfig)
		flags = map[string]string{
			"etcd-servers":                     fmt.Sprintf("http://%s:%d", loopback, l.Ports.EtcdClient),
			"bind-address":                     loopback,
			"advertise-address":                loopback,
			"secure-port":                      strconv.Itoa(l.Ports.APIServer),
			"tls-cert-file":                    l.pki("serving.crt"),
			"tls-private-key-file":             l.pki("serving.key"),
			"client-ca-file":                   l.pki("ca.crt"),
			"token-auth-file":                  l.tokenFile(),
			"anonymous-auth":                   "false",
			"authorization-mode":               "RBAC",
			"service-account-issuer":           "https://kubernetes.default.svc.cluster.local",
			"service-account-key-file":         l.pki("sa.pub"),
			"service-account-signing-key-file": l.pki("sa.key"),
			"service-cluster-ip-range":         "10.96.0.0/16",
			"allow-privileged":                 "true",
			// The "kubernetes" Service endpoint reconciler refuses a loopback advertise address, and
			// nothing in a local cluster reaches the apiserver through that Service.
			"endpoint-reconciler-type": "none",
			// On SIGTERM, drain in-flight requests (answering 429 Retry-After meanwhile) and then
			// give the HTTP server 2 s. The default waits up to --request-timeout (60 s) for the
			// scheduler's, controller-manager's and kwok's open watches, which never end, so a
			// restart (fault injection) took the 15 s stop grace and ended in SIGKILL anyway.
			"shutdown-send-retry-after": "true",
			"profiling":                 "false",
			"feature-gates":             renderGates(featureGatesFor(spec, c)),
			"runtime-config":            renderMap(rc),
		}
	case clusters.ControllerManager:
		kc := l.kubeconfig("controller-manager")
		flags = map[string]string{
			"kubeconfig":                       kc,
			"authentication-kubeconfig":        kc,
			"authorization-kubeconfig":         kc,
			"bind-address":                     loopback,
			"secure-port":                      strconv.Itoa(l.Ports.KCM),
			"tls-cert-file":                    l.pki("serving.crt"),
			"tls-private-key-file":             l.pki("serving.key"),
			"client-ca-file":                   l.pki("ca.crt"),
			"service-account-private-key-file": l.pki("sa.key"),
			"root-ca-file":                     l.pki("ca.crt"),
			"use-service-account-credentials":  "true",
			// The default 20 QPS makes the controller-manager the bottleneck of a 500-node cluster
			// (node taints, service accounts, pod GC after a run).
			"kube-api-qps":   "200",
			"kube-api-burst": "400",
			"leader-elect":   "false",
			"profiling":      "false",
			"feature-gates":  renderGates(featureGatesFor(spec, c)),
		}
		if g := clusters.NodeMonitorGracePeriod(spec.NodeLeaseSeconds); g != "" {
			flags["node-monitor-grace-period"] = g
		}
	case clusters.Scheduler:
		kc := l.kubeconfig("scheduler")
		flags = map[string]string{
			"kubeconfig":                kc,
			"authentication-kubeconfig": kc,
			"authorization-kubeconfig":  kc,
			"bind-address":              loopback,
			"secure-port":               strconv.Itoa(l.Ports.Scheduler),
			"tls-cert-file":             l.pki("serving.crt"),
			"tls-private-key-file":      l.pki("serving.key"),
			"client-ca-file":            l.pki("ca.crt"),
			"leader-elect":              "false",
			"profiling":                 "false",
			"feature-gates":             renderGates(featureGatesFor(spec, c)),
		}
	case clusters.Kwok:
		flags = map[string]string{
			"kubeconfig": l.kubeconfig("kwok"),
			"config":     l.kwokConfig(),
			// Only nodes we created as simulated; a user's real node is never touched.
			"manage-nodes-with-annotation-selector": "kwok.x-k8s.io/node=fake",
			"server-address":                        fmt.Sprintf("%s:%d", loopback, l.Ports.Kwok),
			"cidr":                                  "10.0.0.0/16",
			"node-ip":                               loopback,
		}
	default:
		return nil, fmt.Errorf("no flags for component %q", c)
	}
	for k, v := range spec.ExtraArgs[c] {
		k = strings.TrimLeft(k, "-")
		if k == "" {
			return nil, fmt.Errorf("extra args for %s: empty flag name", c)
		}
		flags[k] = v
	}
	args := make([]string, 0, len(flags))
	for _, k := range slices.Sorted(maps.Keys(flags)) {
		args = append(args, "--"+k+"="+flags[k])
	}
	return args, nil
}
