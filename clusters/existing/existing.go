// Package existing gives the same Cluster handle for a cluster gangbench did not create: a user's
// kubeconfig pointing at a cloud cluster with real GPUs, or at kwok nodes. It only reads: it
// discovers the server version, whether the gang API is served, and where metrics can be scraped.
package existing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gangbench/gangbench/clusters"
)

// ProviderName is how users select this provider.
const ProviderName = "existing"

// GangAPI is the group/version of PodGroups in Kubernetes v1.37.
const GangAPI = "scheduling.k8s.io/v1beta1"

// GangAPIv1alpha2 is where Kubernetes v1.36 serves them; the harness converts (scenarios/gangapi).
const GangAPIv1alpha2 = "scheduling.k8s.io/v1alpha2"

// Info is what discovery found.
type Info struct {
	ServerVersion string
	// GangAPIServed reports whether podgroups are served at GangAPI (or, on v1.36, GangAPIv1alpha2);
	// Missing says why not.
	GangAPIServed bool
	Missing       string
	// SchedulerMetrics says how the scheduler's metrics were found, or why they were not.
	SchedulerMetrics string
}

// Open loads a kubeconfig (context "" means its current context) and discovers the cluster.
func Open(ctx context.Context, kubeconfig, contextName string) (*clusters.Cluster, Info, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: contextName})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, Info{}, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, Info{}, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	name := contextName
	if name == "" {
		name = raw.CurrentContext
	}
	// The v1beta1 gang API warns on every response ("deprecated in v1.40+"); the harness drops them.
	cfg.WarningHandler = rest.NoWarnings{}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, Info{}, err
	}
	var info Info
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return nil, Info{}, fmt.Errorf("cluster %s (%s) does not answer: %w", name, cfg.Host, err)
	}
	info.ServerVersion = v.GitVersion
	info.GangAPIServed, info.Missing = gangAPI(cs)

	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, Info{}, err
	}
	api := clusters.Endpoint{URL: strings.TrimRight(cfg.Host, "/") + "/metrics", Transport: transport}
	sched, how := schedulerMetrics(ctx, cs, cfg.Host, transport)
	info.SchedulerMetrics = how
	cl := &clusters.Cluster{
		Name: name, Provider: ProviderName, KubeconfigPath: kubeconfig, RESTConfig: cfg,
		APIServerMetrics: api, SchedulerMetrics: sched,
		Versions:      map[clusters.Component]string{clusters.APIServer: v.GitVersion},
		SchedulerName: "default-scheduler",
		Close:         func(context.Context) error { return nil },
	}
	return cl, info, nil
}

func gangAPI(cs kubernetes.Interface) (bool, string) {
	res, err := cs.Discovery().ServerResourcesForGroupVersion(GangAPI)
	if err != nil {
		// A v1.36 cluster serves the older shape, which the harness speaks too.
		if old, oerr := cs.Discovery().ServerResourcesForGroupVersion(GangAPIv1alpha2); oerr == nil && hasPodGroups(old.APIResources) {
			return true, ""
		}
		return false, fmt.Sprintf("%s is not served (%v): the apiserver needs --runtime-config=scheduling.k8s.io/v1beta1=true and --feature-gates=GenericWorkload=true (on v1.36: scheduling.k8s.io/v1alpha2=true and GenericWorkload, GangScheduling, WorkloadAwarePreemption)", GangAPI, err)
	}
	if hasPodGroups(res.APIResources) {
		return true, ""
	}
	return false, GangAPI + " is served without podgroups: the apiserver needs --feature-gates=GenericWorkload=true"
}

func hasPodGroups(rs []metav1.APIResource) bool {
	for _, r := range rs {
		if r.Name == "podgroups" {
			return true
		}
	}
	return false
}

// schedulerMetrics looks for a kube-scheduler static pod (kubeadm, kind) and tries its metrics
// through the apiserver's pod proxy, which needs no network path from here to the node.
func schedulerMetrics(ctx context.Context, cs kubernetes.Interface, host string, rt http.RoundTripper) (clusters.Endpoint, string) {
	pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "component=kube-scheduler"})
	if err != nil {
		return clusters.Endpoint{}, fmt.Sprintf("cannot list kube-system pods: %v", err)
	}
	if len(pods.Items) == 0 {
		return clusters.Endpoint{}, "no kube-scheduler pod in kube-system (managed control plane?): scheduler metrics unavailable"
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	p := pods.Items[0]
	e := clusters.Endpoint{
		URL:       fmt.Sprintf("%s/api/v1/namespaces/kube-system/pods/https:%s:10259/proxy/metrics", strings.TrimRight(host, "/"), p.Name),
		Transport: rt,
	}
	if _, err := e.Get(ctx); err != nil {
		return clusters.Endpoint{}, fmt.Sprintf("kube-scheduler pod %s found but its metrics are not readable through the apiserver proxy: %v", p.Name, err)
	}
	return e, "through the apiserver proxy to pod " + p.Name
}

// ErrNotCreatable is returned by Provider.Create.
var ErrNotCreatable = errors.New("the existing provider does not create clusters; pass --kubeconfig")
