// Package gangapi talks to the gang scheduling API in whichever version a cluster serves, so that the
// suites and perf, written against scheduling.k8s.io/v1beta1 (Kubernetes v1.37), also run against a
// v1.36 control plane that serves the same objects as scheduling.k8s.io/v1alpha2.
//
// Callers always see v1beta1 types. Against a v1beta1 cluster the client is client-go's typed one,
// untouched. Against a v1alpha2 cluster it is the dynamic client plus a field-by-field conversion,
// the way an apiserver converts between versions of one group (section 10 of
// gang-semantics-v1.37.md):
//
//	v1beta1 (v1.37)                               v1alpha2 (v1.36)
//	spec.workloadRef.{workloadName,templateName}  spec.podGroupTemplateRef.workload.{workloadName,podGroupTemplateName}
//	disruptionMode {single: {}} / {all: {}}       disruptionMode "Pod" / "PodGroup"
//	condition PodGroupInitiallyScheduled          condition PodGroupScheduled
//
// Fields v1alpha2 does not have (preemptionPolicy, CompositePodGroups) cannot be sent: the client
// fails with ErrNotExpressible naming the field, and a suite reports its assertion as not applicable
// to that version instead of failing it.
package gangapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Group is the API group of Workload and PodGroup in every version.
const Group = "scheduling.k8s.io"

// Condition types the scheduler writes on a PodGroup, per version.
const (
	// ConditionInitiallyScheduled is v1beta1's (v1.37): True once, when the group was first placed.
	ConditionInitiallyScheduled = schedv1beta1.PodGroupInitiallyScheduled
	// ConditionScheduledV1alpha2 is v1alpha2's (v1.36).
	ConditionScheduledV1alpha2 = "PodGroupScheduled"
)

// API is one served version of the gang scheduling API.
type API struct {
	// Version is the group's version, "v1beta1" or "v1alpha2".
	Version string
	// ScheduledCondition is the condition type the scheduler writes on PodGroups in this version.
	ScheduledCondition string
}

// V1beta1 is what Kubernetes v1.37 serves (with --runtime-config=scheduling.k8s.io/v1beta1=true).
func V1beta1() API { return API{Version: "v1beta1", ScheduledCondition: ConditionInitiallyScheduled} }

// V1alpha2 is what Kubernetes v1.36 serves (with --runtime-config=scheduling.k8s.io/v1alpha2=true).
func V1alpha2() API { return API{Version: "v1alpha2", ScheduledCondition: ConditionScheduledV1alpha2} }

// GroupVersion is e.g. "scheduling.k8s.io/v1beta1".
func (a API) GroupVersion() string { return Group + "/" + a.Version }

func (a API) String() string { return a.GroupVersion() }

// Native reports whether objects go out as they are (v1beta1) rather than converted.
func (a API) Native() bool { return a.Version == "v1beta1" }

// Known are the versions this package speaks, preferred first.
func Known() []API { return []API{V1beta1(), V1alpha2()} }

// ErrUnavailable is wrapped when a cluster serves no version of the gang API this package speaks.
var ErrUnavailable = errors.New("gang scheduling API unavailable")

// ErrNotExpressible is wrapped when an object uses a v1beta1 field the served version lacks.
var ErrNotExpressible = errors.New("not expressible in the served gang API version")

// notExpressible names the field, its value and the version that lacks it.
func notExpressible(api API, kind, field string, value any) error {
	return fmt.Errorf("%w: %s %s=%v has no %s equivalent (Kubernetes v1.36 serves %s; the field is new in scheduling.k8s.io/v1beta1, v1.37)",
		ErrNotExpressible, kind, field, value, api, api)
}

// Discover asks the apiserver which version it serves, preferring v1beta1. The error wraps
// ErrUnavailable when it serves none, and names what to enable.
// discovery.DiscoveryInterface takes no context: the client's rest.Config timeout bounds it.
func Discover(d discovery.DiscoveryInterface) (API, error) {
	var seen []string
	for _, api := range Known() {
		res, err := d.ServerResourcesForGroupVersion(api.GroupVersion())
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return API{}, fmt.Errorf("discover %s: %w", api, err)
		}
		var names []string
		for _, r := range res.APIResources {
			names = append(names, r.Name)
		}
		if slices.Contains(names, "podgroups") {
			return api, nil
		}
		seen = append(seen, fmt.Sprintf("%s (resources %v)", api, names))
	}
	if len(seen) > 0 {
		return API{}, fmt.Errorf("%w: %s served without podgroups; kube-apiserver needs --feature-gates=GenericWorkload=true", ErrUnavailable, strings.Join(seen, ", "))
	}
	return API{}, fmt.Errorf("%w: the apiserver serves neither scheduling.k8s.io/v1beta1 nor v1alpha2; start kube-apiserver with --runtime-config=scheduling.k8s.io/v1beta1=true (v1.37) or scheduling.k8s.io/v1alpha2=true (v1.36) and --feature-gates=GenericWorkload=true (the gate alone does not enable the API)", ErrUnavailable)
}

// PodGroups is the subset of client-go's typed PodGroupInterface the harness uses; the typed
// client satisfies it, so a v1beta1 cluster gets exactly client-go's behaviour.
type PodGroups interface {
	Create(ctx context.Context, pg *schedv1beta1.PodGroup, opts metav1.CreateOptions) (*schedv1beta1.PodGroup, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*schedv1beta1.PodGroup, error)
	List(ctx context.Context, opts metav1.ListOptions) (*schedv1beta1.PodGroupList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*schedv1beta1.PodGroup, error)
}

// Workloads is the subset of client-go's typed WorkloadInterface the harness uses.
type Workloads interface {
	Create(ctx context.Context, w *schedv1beta1.Workload, opts metav1.CreateOptions) (*schedv1beta1.Workload, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*schedv1beta1.Workload, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*schedv1beta1.Workload, error)
}

// Client reaches PodGroups and Workloads in the version the cluster serves.
type Client struct {
	api   API
	typed kubernetes.Interface
	dyn   dynamic.Interface
}

// NewClient builds a client for api. dyn may be nil when api is native (v1beta1).
func NewClient(api API, typed kubernetes.Interface, dyn dynamic.Interface) (*Client, error) {
	if !api.Native() && dyn == nil {
		return nil, fmt.Errorf("gang API %s needs a dynamic client", api)
	}
	return &Client{api: api, typed: typed, dyn: dyn}, nil
}

// ForConfig discovers the served version and builds a client for it.
func ForConfig(ctx context.Context, cfg *rest.Config, typed kubernetes.Interface) (*Client, error) {
	api, err := Discover(typed.Discovery())
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	return NewClient(api, typed, dyn)
}

// API is the version this client speaks.
func (c *Client) API() API { return c.api }

// PodGroups in namespace ns ("" for all namespaces, for List and Watch).
func (c *Client) PodGroups(ns string) PodGroups {
	if c.api.Native() {
		return c.typed.SchedulingV1beta1().PodGroups(ns)
	}
	gvr := schema.GroupVersionResource{Group: Group, Version: c.api.Version, Resource: "podgroups"}
	return &convertedPodGroups{api: c.api, ri: c.dyn.Resource(gvr).Namespace(ns)}
}

// Workloads in namespace ns.
func (c *Client) Workloads(ns string) Workloads {
	if c.api.Native() {
		return c.typed.SchedulingV1beta1().Workloads(ns)
	}
	gvr := schema.GroupVersionResource{Group: Group, Version: c.api.Version, Resource: "workloads"}
	return &convertedWorkloads{api: c.api, ri: c.dyn.Resource(gvr).Namespace(ns)}
}
