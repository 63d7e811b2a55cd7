package kind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/internal/proc"
)

func restConfigFrom(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

// Client certificate files for the scheduler's metrics endpoint, in the cluster dir.
func adminCertPath(dir string) string { return filepath.Join(dir, "admin.crt") }
func adminKeyPath(dir string) string  { return filepath.Join(dir, "admin.key") }

// writeAdminCert writes the kubeconfig's client certificate and key as files, because an Endpoint
// that is serialised (results, another process) can only carry file paths, not a Transport.
func writeAdminCert(cfg *rest.Config, dir string) error {
	cert, key := cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData
	if len(cert) == 0 || len(key) == 0 {
		if cfg.TLSClientConfig.CertFile == "" {
			return errors.New("kind kubeconfig has no client certificate")
		}
		var err error
		if cert, err = os.ReadFile(cfg.TLSClientConfig.CertFile); err != nil {
			return err
		}
		if key, err = os.ReadFile(cfg.TLSClientConfig.KeyFile); err != nil {
			return err
		}
	}
	if err := os.WriteFile(adminCertPath(dir), cert, 0o600); err != nil {
		return err
	}
	return os.WriteFile(adminKeyPath(dir), key, 0o600)
}

// schedulerMetricsEndpoint is kube-scheduler's /metrics through the control-plane node's port
// mapping. The scheduler serves a certificate it generated itself (kubeadm gives it none), so the
// server cannot be verified; the admin client certificate is presented anyway so that the endpoint
// keeps working if /metrics is ever taken off the always-allowed paths.
func schedulerMetricsEndpoint(dir string, port int) clusters.Endpoint {
	if port <= 0 {
		return clusters.Endpoint{}
	}
	return clusters.Endpoint{
		URL:                fmt.Sprintf("https://127.0.0.1:%d/metrics", port),
		CertFile:           adminCertPath(dir),
		KeyFile:            adminKeyPath(dir),
		InsecureSkipVerify: true,
	}
}

// SchedulerProxyEndpoint is the scheduler's /metrics through the apiserver's pod proxy, for callers
// that cannot reach the host port mapping (a remote engine). It works because the scheduler binds
// 0.0.0.0 and always allows /metrics: the apiserver's proxy presents no client certificate.
func SchedulerProxyEndpoint(cfg *rest.Config, controlPlaneNode string) (clusters.Endpoint, error) {
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return clusters.Endpoint{}, err
	}
	return clusters.Endpoint{
		URL:       fmt.Sprintf("%s/api/v1/namespaces/kube-system/pods/https:kube-scheduler-%s:%d/proxy/metrics", cfg.Host, controlPlaneNode, schedulerMetricsContainerPort),
		Transport: rt,
	}, nil
}

// handle builds the Cluster handle from a state, for Create and Get alike.
func (p *Provider) handle(st *state, api kindAPI) (*clusters.Cluster, error) {
	cfg, err := restConfigFrom(st.Kubeconfig)
	if err != nil {
		return nil, err
	}
	// The apiserver's /metrics is read with the kubeconfig's own credentials and CA.
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kind cluster %q: transport: %w", st.Name, err)
	}
	dir := clusterDir(p.opts.StateDir, st.Name)
	versions := map[clusters.Component]string{}
	for k, v := range st.Versions {
		versions[clusters.Component(k)] = v
	}
	// GPU faults find the device plugin pod of a node through the API.
	cs, err := p.newClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("kind cluster %q: client: %w", st.Name, err)
	}
	ctl := &control{api: api, name: st.Name, timeout: defaultControlTimeout, stateDir: p.opts.StateDir}
	return &clusters.Cluster{
		Name: st.Name, Provider: ProviderName, KubeconfigPath: st.Kubeconfig, RESTConfig: cfg,
		APIServerMetrics: clusters.Endpoint{URL: cfg.Host + "/metrics", Transport: rt},
		SchedulerMetrics: schedulerMetricsEndpoint(dir, st.SchedulerMetricsPort),
		Versions:         versions,
		LogDir:           filepath.Join(dir, "logs"),
		Nodes:            st.Workers + st.KwokNodes,
		GPU:              st.GPU,
		ComponentLog:     ctl.componentLog,
		Control:          ctl,
		GPUs:             newPluginGPUs(api, st.Name, cs),
		SchedulerName:    corev1.DefaultSchedulerName,
		Processes: func(ctx context.Context) (map[clusters.Component][]int, error) {
			return p.processes(ctx, st, proc.Proc)
		},
	}, nil
}
