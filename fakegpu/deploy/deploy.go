// Package deploy renders and applies the DaemonSet that runs the fake GPU device plugin
// (fakegpu/plugin, image from fakegpu/image) on the nodes of a cluster with real kubelets, and waits
// for the nodes to advertise the GPUs. With a GPU API that includes DRA the same DaemonSet runs the
// DRA plugin (fakegpu/draplugin) too or instead, with its service account, RBAC and the fake GPUs'
// DeviceClass.
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
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

//go:embed rbac.yaml.tmpl
var rbacTemplate string

// The templates are parsed once; they are read-only afterwards.
var (
	tmpl     = template.Must(template.New("daemonset").Option("missingkey=error").Funcs(template.FuncMap{"q": quote}).Parse(daemonSetTemplate))
	rbacTmpl = template.Must(template.New("rbac").Option("missingkey=error").Funcs(template.FuncMap{"q": quote}).Parse(rbacTemplate))
)

const (
	// ServiceAccount is the DRA plugin's service account in Namespace, shared by every DaemonSet
	// instance.
	ServiceAccount = Name
	// ClusterRole names the DRA plugin's ClusterRole and its binding.
	ClusterRole = "gangbench-fakegpu-dra-plugin"
	// RegistryDir is the kubelet's plugin registration directory (kubeletplugin.KubeletRegistryDir).
	RegistryDir = "/var/lib/kubelet/plugins_registry"
	// DRAPluginDir is the DRA plugin's socket directory on the node (the binary's default).
	DRAPluginDir = "/var/lib/kubelet/plugins/" + fakegpu.DRADriver
	// CDIDir is where the DRA plugin writes its CDI specs: draplugin.DefaultCDIDir (not imported, to
	// keep the kubelet plugin helper out of the packages that only deploy; a test keeps the two
	// equal), which containerd reads.
	CDIDir = "/var/run/cdi"
)

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
	// API is how the GPUs are published (fakegpu.API); "" is the device plugin's. With DRA the pods
	// run the DRA plugin and get its mounts, service account and RBAC, and Objects include the
	// DeviceClass.
	API fakegpu.API
	// CliqueLabel is the node label whose value is the GPUs' NVLink clique in the ResourceSlice (the
	// rack label of a cluster with a topology); "" makes each node its own clique. DRA only.
	CliqueLabel string
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
	// DevicePlugin and DRA say which plugins the pods run (at least one).
	DevicePlugin, DRA                                 bool
	ManagedLabel, Driver, ServiceAccount, ClusterRole string
	RegistryDir, DRAPluginDir, CDIDir                 string
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
	api := o.API
	if api == "" {
		api = fakegpu.APIDevicePlugin
	}
	if _, err := fakegpu.ParseAPI(string(api)); err != nil {
		errs = append(errs, fmt.Errorf("deploy: %w", err))
	}
	if o.CliqueLabel != "" {
		if msgs := content.IsLabelKey(o.CliqueLabel); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("deploy: clique label %q: %s", o.CliqueLabel, strings.Join(msgs, "; ")))
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
		Args:                 append(plugin.Args(inv, fmt.Sprintf("0.0.0.0:%d", HealthPort)), plugin.DRAArgs(api, o.CliqueLabel)...),
		TolerateControlPlane: o.TolerateControlPlane,
		NodeSelector:         o.NodeSelector,
		DevicePlugin:         api.ExtendedResource(),
		DRA:                  api.DRA(),
		ManagedLabel:         fakegpu.LabelManaged,
		Driver:               fakegpu.DRADriver,
		ServiceAccount:       ServiceAccount,
		ClusterRole:          ClusterRole,
		RegistryDir:          RegistryDir,
		DRAPluginDir:         DRAPluginDir,
		CDIDir:               CDIDir,
	}, nil
}

// Manifests renders every object Apply creates as YAML, in order (with comments saying why each
// setting is there): the DaemonSet and, with DRA, the service account, its ClusterRole and binding,
// and the DeviceClass.
func Manifests(o Options) ([]byte, error) {
	d, err := o.data()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, d); err != nil {
		return nil, fmt.Errorf("deploy: rendering the DaemonSet: %w", err)
	}
	if !d.DRA {
		return buf.Bytes(), nil
	}
	buf.WriteString("---\n")
	if err := rbacTmpl.Execute(&buf, d); err != nil {
		return nil, fmt.Errorf("deploy: rendering the DRA plugin's RBAC: %w", err)
	}
	class, err := yaml.Marshal(fakegpu.DeviceClass())
	if err != nil {
		return nil, fmt.Errorf("deploy: rendering the DeviceClass: %w", err)
	}
	buf.WriteString("---\n# The class a ResourceClaim names to get fake GPUs: every device of driver " + fakegpu.DRADriver + ".\n")
	buf.Write(class)
	return buf.Bytes(), nil
}

// DaemonSet is the rendered DaemonSet decoded, strictly: a field the template misspelt is an error,
// not a silently dropped setting.
func DaemonSet(o Options) (*appsv1.DaemonSet, error) {
	d, err := o.data()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, d); err != nil {
		return nil, fmt.Errorf("deploy: rendering the DaemonSet: %w", err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(buf.Bytes(), &ds); err != nil {
		return nil, fmt.Errorf("deploy: decoding the rendered DaemonSet: %w", err)
	}
	return &ds, nil
}

// Objects is every object Apply creates, in order: with DRA the service account, ClusterRole,
// ClusterRoleBinding and DeviceClass (each decoded strictly), then the DaemonSet. The device plugin
// alone needs no RBAC: it talks to the kubelet only.
func Objects(o Options) ([]runtime.Object, error) {
	ds, err := DaemonSet(o)
	if err != nil {
		return nil, err
	}
	d, err := o.data()
	if err != nil {
		return nil, err
	}
	if !d.DRA {
		return []runtime.Object{ds}, nil
	}
	var buf bytes.Buffer
	if err := rbacTmpl.Execute(&buf, d); err != nil {
		return nil, fmt.Errorf("deploy: rendering the DRA plugin's RBAC: %w", err)
	}
	docs := strings.Split(buf.String(), "\n---\n")
	targets := []runtime.Object{&corev1.ServiceAccount{}, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}}
	if len(docs) != len(targets) {
		return nil, fmt.Errorf("deploy: the RBAC template has %d documents, want %d", len(docs), len(targets))
	}
	out := make([]runtime.Object, 0, len(targets)+2)
	for i, doc := range docs {
		if err := yaml.UnmarshalStrict([]byte(doc), targets[i]); err != nil {
			return nil, fmt.Errorf("deploy: decoding the rendered RBAC document %d: %w", i, err)
		}
		out = append(out, targets[i])
	}
	return append(out, fakegpu.DeviceClass(), ds), nil
}

// Apply creates every object of Objects or, if it exists, updates its labels and spec (which rolls
// the DaemonSet's pods when the image, the inventory or the API changed). Conflicting concurrent
// writes are retried.
func Apply(ctx context.Context, cs kubernetes.Interface, o Options) error {
	objs, err := Objects(o)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := applyObject(ctx, cs, obj); err != nil {
			return err
		}
	}
	return nil
}

// applyObject creates obj or updates the existing one's labels (keeping labels others added) and
// content.
func applyObject(ctx context.Context, cs kubernetes.Interface, obj runtime.Object) error {
	switch want := obj.(type) {
	case *appsv1.DaemonSet:
		return apply(ctx, "DaemonSet", want, cs.AppsV1().DaemonSets(want.Namespace), func(cur, want *appsv1.DaemonSet) { cur.Spec = want.Spec })
	case *corev1.ServiceAccount:
		return apply(ctx, "ServiceAccount", want, cs.CoreV1().ServiceAccounts(want.Namespace), func(*corev1.ServiceAccount, *corev1.ServiceAccount) {})
	case *rbacv1.ClusterRole:
		return apply(ctx, "ClusterRole", want, cs.RbacV1().ClusterRoles(), func(cur, want *rbacv1.ClusterRole) { cur.Rules = want.Rules })
	case *rbacv1.ClusterRoleBinding:
		return apply(ctx, "ClusterRoleBinding", want, cs.RbacV1().ClusterRoleBindings(), func(cur, want *rbacv1.ClusterRoleBinding) {
			// roleRef is immutable; ours never changes.
			cur.Subjects = want.Subjects
		})
	case *resourcev1.DeviceClass:
		return apply(ctx, "DeviceClass", want, cs.ResourceV1().DeviceClasses(), func(cur, want *resourcev1.DeviceClass) { cur.Spec = want.Spec })
	default:
		return fmt.Errorf("deploy: cannot apply %T", obj)
	}
}

// object is what apply needs of a typed object.
type object[T any] interface {
	*T
	metav1.Object
	DeepCopy() *T
}

// client is the part of a typed client apply uses.
type client[P any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (P, error)
	Create(ctx context.Context, obj P, opts metav1.CreateOptions) (P, error)
	Update(ctx context.Context, obj P, opts metav1.UpdateOptions) (P, error)
}

// apply creates want through c or, if it exists, copies want's labels onto it (keeping labels
// others added) and its content with setContent, and updates it; conflicts are retried.
func apply[T any, P object[T]](ctx context.Context, kind string, want P, c client[P], setContent func(cur, want P)) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.Get(ctx, want.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = c.Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
			if apierrors.IsAlreadyExists(err) {
				// Created concurrently: make it a conflict so the loop updates it instead.
				return apierrors.NewConflict(schema.GroupResource{Resource: kind}, want.GetName(), err)
			}
			return err
		}
		if err != nil {
			return err
		}
		next := P(cur.DeepCopy())
		labels := next.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, want.GetLabels()) // keep labels others added
		next.SetLabels(labels)
		setContent(next, want)
		_, err = c.Update(ctx, next, metav1.UpdateOptions{FieldManager: FieldManager})
		return err
	})
	if err != nil {
		where := want.GetName()
		if ns := want.GetNamespace(); ns != "" {
			where = ns + "/" + where
		}
		return fmt.Errorf("deploy: applying %s %s: %w", kind, where, err)
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
