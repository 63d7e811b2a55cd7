// Package deploy renders and applies the DaemonSet that runs the fake GPU device plugin
// (fakegpu/plugin, image from fakegpu/image) on the nodes of a cluster with real kubelets, and waits
// for the nodes to advertise the GPUs.
package deploy

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/fakegpu/plugin"
	"github.com/gangbench/gangbench/internal/nodewatch"
)

const (
	// Name and Namespace of the DaemonSet. kube-system, because system-node-critical pods may only
	// run there.
	Name      = "gangbench-fakegpu-device-plugin"
	Namespace = "kube-system"
	// DefaultImage is image.DefaultRef (not imported, to keep go-containerregistry out of the
	// packages that only deploy; a test keeps the two equal).
	DefaultImage = "gangbench.dev/fakegpu-device-plugin:dev"
	// HealthPort is the container port of the plugin's HTTP health API (readiness, liveness, and
	// device health changes through the pod IP).
	HealthPort = 9400
	// FieldManager is who gangbench's writes are attributed to.
	FieldManager = "gangbench"

	// maxListedNodes bounds how many nodes a WaitAllocatable timeout names.
	maxListedNodes = 10
)

//go:embed daemonset.yaml.tmpl
var daemonSetTemplate string

// tmpl is parsed once; it is read-only afterwards.
var tmpl = template.Must(template.New("daemonset").Option("missingkey=error").Funcs(template.FuncMap{
	"q": quote,
}).Parse(daemonSetTemplate))

// quote renders s as a JSON string, which YAML reads as a double-quoted scalar: no value can break
// the document's structure.
func quote(s string) (string, error) {
	b, err := json.Marshal(s)
	return string(b), err
}

// Options configure the DaemonSet.
type Options struct {
	// Image is the plugin image; default DefaultImage.
	Image string
	// Inventory is what every node advertises (WithDefaults applied); Count must be at least 1.
	Inventory fakegpu.Inventory
	// TolerateControlPlane runs the plugin on control-plane nodes too; otherwise an affinity keeps
	// it off them. (The plugin tolerates every taint either way, the control plane's included.)
	TolerateControlPlane bool
	// NodeSelector further restricts the nodes, e.g. to a labelled GPU pool.
	NodeSelector map[string]string
	// Instance, when set, makes this one of several DaemonSets of the plugin in a cluster, one per
	// inventory: it is named Name-Instance and its pods carry app.kubernetes.io/instance
	// Name-Instance, which its selector requires, so the DaemonSets never claim each other's pods.
	// Every pod keeps app.kubernetes.io/name Name, so ReadAllocations and anyone looking for "the
	// plugin pod on a node" find it whichever DaemonSet runs it. "" is the one DaemonSet named
	// Name; do not mix it with instances in one cluster (its selector matches their pods too).
	Instance string
}

type templateData struct {
	Name, DaemonSetName, InstanceLabel, Namespace, Image, ResourceName, PluginDir string
	Count, HealthPort                                                             int
	Args                                                                          []string
	TolerateControlPlane                                                          bool
	NodeSelector                                                                  map[string]string
}

// DaemonSetName is the name of the DaemonSet o renders: Name, or Name-Instance.
func (o Options) DaemonSetName() string {
	if o.Instance == "" {
		return Name
	}
	return Name + "-" + o.Instance
}

func (o Options) data() (templateData, error) {
	if o.Image == "" {
		o.Image = DefaultImage
	}
	inv := o.Inventory.WithDefaults()
	var errs []error
	if err := inv.Validate(); err != nil {
		errs = append(errs, err)
	}
	if inv.Count < 1 {
		errs = append(errs, fmt.Errorf("deploy: inventory count must be at least 1, got %d", inv.Count))
	}
	if strings.TrimSpace(o.Image) != o.Image || strings.ContainsAny(o.Image, " \t\n") {
		errs = append(errs, fmt.Errorf("deploy: image %q contains whitespace", o.Image))
	}
	for _, k := range slices.Sorted(maps.Keys(o.NodeSelector)) {
		if msgs := content.IsLabelKey(k); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("deploy: node selector key %q: %s", k, strings.Join(msgs, "; ")))
		}
		if msgs := content.IsLabelValue(o.NodeSelector[k]); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("deploy: node selector value %q of %s: %s", o.NodeSelector[k], k, strings.Join(msgs, "; ")))
		}
	}
	if o.Instance != "" {
		// The name is also a label value (the instance label), so it must be a DNS label.
		if msgs := content.IsDNS1123Label(o.DaemonSetName()); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("deploy: instance %q: DaemonSet name %q: %s", o.Instance, o.DaemonSetName(), strings.Join(msgs, "; ")))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return templateData{}, err
	}
	instance := ""
	if o.Instance != "" {
		instance = o.DaemonSetName()
	}
	return templateData{
		Name:                 Name,
		DaemonSetName:        o.DaemonSetName(),
		InstanceLabel:        instance,
		Namespace:            Namespace,
		Image:                o.Image,
		ResourceName:         inv.ResourceName,
		PluginDir:            strings.TrimSuffix(pluginapi.DevicePluginPath, "/"),
		Count:                inv.Count,
		HealthPort:           HealthPort,
		Args:                 plugin.Args(inv, fmt.Sprintf("0.0.0.0:%d", HealthPort)),
		TolerateControlPlane: o.TolerateControlPlane,
		NodeSelector:         o.NodeSelector,
	}, nil
}

// Manifests renders the DaemonSet as YAML (with comments saying why each setting is there).
func Manifests(o Options) ([]byte, error) {
	d, err := o.data()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, d); err != nil {
		return nil, fmt.Errorf("deploy: rendering the DaemonSet: %w", err)
	}
	return buf.Bytes(), nil
}

// DaemonSet is Manifests decoded, strictly: a field the template misspelt is an error, not a
// silently dropped setting.
func DaemonSet(o Options) (*appsv1.DaemonSet, error) {
	y, err := Manifests(o)
	if err != nil {
		return nil, err
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(y, &ds); err != nil {
		return nil, fmt.Errorf("deploy: decoding the rendered DaemonSet: %w", err)
	}
	return &ds, nil
}

// Objects is every object Apply creates, in order. Only the DaemonSet: the plugin needs no RBAC.
func Objects(o Options) ([]runtime.Object, error) {
	ds, err := DaemonSet(o)
	if err != nil {
		return nil, err
	}
	return []runtime.Object{ds}, nil
}

// Apply creates the DaemonSet or, if it exists, updates its labels and spec (which rolls the pods
// when the image or the inventory changed). Conflicting concurrent writes are retried.
func Apply(ctx context.Context, cs kubernetes.Interface, o Options) error {
	want, err := DaemonSet(o)
	if err != nil {
		return err
	}
	client := cs.AppsV1().DaemonSets(want.Namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := client.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = client.Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
			if apierrors.IsAlreadyExists(err) {
				// Created concurrently: make it a conflict so the loop updates it instead.
				return apierrors.NewConflict(appsv1.Resource("daemonsets"), want.Name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		next := cur.DeepCopy()
		if next.Labels == nil {
			next.Labels = map[string]string{}
		}
		maps.Copy(next.Labels, want.Labels) // keep labels others added
		next.Spec = want.Spec
		_, err = client.Update(ctx, next, metav1.UpdateOptions{FieldManager: FieldManager})
		return err
	})
	if err != nil {
		return fmt.Errorf("deploy: applying DaemonSet %s/%s: %w", want.Namespace, want.Name, err)
	}
	return nil
}

// WaitAllocatable waits until every node matching the label selector ("" for all) reports
// inv.Count allocatable of inv.ResourceName, and at least one node matches. It lists and then
// watches nodes, so it returns as soon as the last node gets there. On timeout (or ctx end) the error
// names the nodes that do not match and what they report.
func WaitAllocatable(ctx context.Context, cs kubernetes.Interface, selector string, inv fakegpu.Inventory, timeout time.Duration) error {
	inv = inv.WithDefaults()
	resource := corev1.ResourceName(inv.ResourceName)
	want := int64(inv.Count)
	sel, err := labels.Parse(selector)
	if err != nil {
		return fmt.Errorf("deploy: wait for allocatable %s: selector %q: %w", resource, selector, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// Each node's verdict is what it reports ("" when it matches).
	reports, err := nodewatch.Until(ctx, cs, sel, func(n *corev1.Node) string {
		q, ok := n.Status.Allocatable[resource]
		switch {
		case !ok:
			return "no " + string(resource)
		case q.Value() != want:
			return q.String()
		}
		return ""
	}, func(reports map[string]string) bool {
		for _, r := range reports {
			if r != "" {
				return false
			}
		}
		return len(reports) > 0
	})
	if err == nil {
		return nil
	}
	if ctx.Err() == nil {
		return fmt.Errorf("deploy: wait for allocatable %s: %w", resource, err)
	}
	return notAllocatableError(reports, selector, resource, want, timeout, ctx.Err())
}

func notAllocatableError(reports map[string]string, selector string, resource corev1.ResourceName, want int64, timeout time.Duration, cause error) error {
	var b strings.Builder
	what := "all nodes"
	if selector != "" {
		what = "nodes matching " + selector
	}
	fmt.Fprintf(&b, "deploy: %s did not all report allocatable %s=%d within %s", what, resource, want, timeout)
	if len(reports) == 0 {
		b.WriteString(": no node matched")
		return fmt.Errorf("%s: %w", b.String(), cause)
	}
	var bad []string
	for _, name := range slices.Sorted(maps.Keys(reports)) {
		if reports[name] != "" {
			bad = append(bad, fmt.Sprintf("%s reports %s", name, reports[name]))
		}
	}
	fmt.Fprintf(&b, " (%d of %d nodes short): %s", len(bad), len(reports), strings.Join(bad[:min(len(bad), maxListedNodes)], ", "))
	if extra := len(bad) - maxListedNodes; extra > 0 {
		fmt.Fprintf(&b, " and %d more", extra)
	}
	return fmt.Errorf("%s: %w", b.String(), cause)
}
