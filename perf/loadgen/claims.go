package loadgen

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/scenarios"
)

// On a cluster whose nodes publish their GPUs through DRA (Generator.GPUAPI) there is no
// nvidia.com/gpu to count: each pod claims its GPUs with a pod-level ResourceClaim made from a
// ResourceClaimTemplate, one template per distinct GPU count per namespace. The controller-manager's
// resourceclaim-controller makes the pod's claim (named after the pod) and the scheduler allocates
// it with the pod's gang; the pod's single container uses it.

// ClaimName is the name of every pod's GPU claim in its spec (spec.resourceClaims[].name).
const ClaimName = "gpus"

// ClaimTemplateName names the template whose claims ask for gpus GPUs.
func ClaimTemplateName(gpus int) string { return "gpus-" + strconv.Itoa(gpus) }

// ClaimTemplate is the namespace's template of claims for gpus fake GPUs of the fake GPUs'
// DeviceClass. The claims made from it carry the managed label, as every object of a run does.
func ClaimTemplate(namespace string, gpus int) *resourcev1.ResourceClaimTemplate {
	t := scenarios.ClaimTemplate(namespace, ClaimTemplateName(gpus), scenarios.GPURequest(int64(gpus)))
	t.Spec.ObjectMeta.Labels = maps.Clone(t.Labels)
	return t
}

// claimsDRA reports whether a phase's pods claim GPUs through DRA on a cluster of api: they do when
// they ask for any GPU at all (a CPU-only phase has nothing to claim).
func claimsDRA(api clusters.GPUAPI, ph scenario.Phase) bool { return api.DRA() && ph.GPUsPerPod > 0 }

// PodFor builds member j of group in the phase, as a cluster of api wants it: with the
// nvidia.com/gpu count on the device plugin's nodes, with a claim from the phase's template on DRA
// nodes; plus the phase's cpu and memory requests either way.
func PodFor(namespace, schedulerName string, api clusters.GPUAPI, ph scenario.Phase, group string, j int) *corev1.Pod {
	m := scenarios.Member{
		Name: PodName(group, j), Group: group, PriorityClassName: ph.PriorityClass,
		SchedulerName: schedulerName, Labels: map[string]string{timeline.PhaseLabel: ph.Name},
	}
	gpus(&m, api, ph)
	p := scenarios.Pod(namespace, m)
	addRequests(p, ph)
	return p
}

// gpus sets a member's GPU demand the way api publishes GPUs.
func gpus(m *scenarios.Member, api clusters.GPUAPI, ph scenario.Phase) {
	if claimsDRA(api, ph) {
		m.Claims = []scenarios.Claim{{Name: ClaimName, Template: ClaimTemplateName(ph.GPUsPerPod)}}
		return
	}
	m.GPUs = int64(ph.GPUsPerPod)
}

// ensureClaimTemplate creates the phase's claim template in the namespace unless an earlier phase
// of the same GPU count did. A template that exists (an earlier repetition's retry) is kept: its
// content is a function of the count alone.
func (g *Generator) ensureClaimTemplate(ctx context.Context, ph scenario.Phase) error {
	if !claimsDRA(g.GPUAPI, ph) {
		return nil
	}
	g.templatesMu.Lock()
	defer g.templatesMu.Unlock()
	if g.templates[ph.GPUsPerPod] {
		return nil
	}
	t := ClaimTemplate(g.Namespace, ph.GPUsPerPod)
	err := retry(ctx, func() error {
		_, err := g.Client.ResourceV1().ResourceClaimTemplates(g.Namespace).Create(ctx, t, metav1.CreateOptions{})
		return err
	})
	if err != nil && !isAlreadyExists(err) {
		return fmt.Errorf("create ResourceClaimTemplate %s/%s: %w", g.Namespace, t.Name, err)
	}
	if g.templates == nil {
		g.templates = map[int]bool{}
	}
	g.templates[ph.GPUsPerPod] = true
	return nil
}
