package existing

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gangbench/gangbench/fakegpu"
)

// ManagedLabel marks every object gangbench creates (with the value "true"); DeleteManaged deletes
// only objects that carry it. The one definition is fakegpu.LabelManaged, the lowest package that
// both the cluster providers and the scenario builders (scenarios.ManagedLabel) reach; it is
// restated here so that callers of this package see the contract where DeleteManaged is.
const ManagedLabel = fakegpu.LabelManaged

// Flag names the refusals point the user at. The command line registers them under these names.
const (
	AllowExistingFlag = "allow-existing-cluster"
	ForceFlag         = "force"
)

// SafetyOptions are the user's answers to CheckSafe's questions.
type SafetyOptions struct {
	// AllowExisting allows a kubeconfig gangbench did not write (--allow-existing-cluster).
	AllowExisting bool
	// Force allows a cluster that looks like production (--force).
	Force bool
	// OwnStateDirs are the directories gangbench's providers keep their clusters in (the local
	// provider's and the kind provider's state dirs). A kubeconfig inside one was written by
	// gangbench for a cluster it created.
	OwnStateDirs []string
}

// RefusedError is CheckSafe's refusal: what was refused, why, and the flag that overrides it.
type RefusedError struct {
	Kubeconfig string
	Context    string
	// Flag is the command-line flag (without dashes) that allows the run anyway.
	Flag   string
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refusing kubeconfig %s, context %q: %s; pass --%s if you are sure", e.Kubeconfig, e.Context, e.Reason, e.Flag)
}

// productionWords mark a context, cluster or server name as production when they appear as a whole
// token, i.e. delimited by anything but a letter or digit: "prod-gpu" and "gke_p_us_prd" match,
// "product" and "alive" do not.
var productionWords = []string{"prod", "production", "prd", "live"}

// CheckSafe decides whether gangbench may run against the cluster of kubeconfig (context "" means
// its current context). It refuses, with a *RefusedError naming the flag that overrides it:
//
//   - a kubeconfig that is not inside one of o.OwnStateDirs, unless o.AllowExisting: gangbench
//     creates namespaces, PriorityClasses and nodes in the cluster it runs against, and a user
//     must opt in to that for a cluster gangbench did not make;
//   - a cluster that looks like production, unless o.Force: its context name, cluster name or
//     server host contains one of productionWords as a token, or its server is not on this
//     machine or a private network (see localServer). A kubeconfig gangbench wrote for a
//     cluster on this machine is not judged by its name: the user chose that name for a
//     throw-away cluster.
//
// It reads only the kubeconfig file; it does not contact the cluster.
func CheckSafe(kubeconfig, contextName string, o SafetyOptions) error {
	if kubeconfig == "" {
		return errors.New("no kubeconfig given: pass --kubeconfig PATH")
	}
	abs, err := filepath.Abs(kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg, err := clientcmd.LoadFromFile(abs)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	name := contextName
	if name == "" {
		name = cfg.CurrentContext
	}
	kctx, ok := cfg.Contexts[name]
	if name == "" || !ok {
		known := slices.Sorted(maps.Keys(cfg.Contexts))
		if name == "" {
			return fmt.Errorf("kubeconfig %s has no current context; pick one of: %s", kubeconfig, strings.Join(known, ", "))
		}
		return fmt.Errorf("kubeconfig %s has no context %q (it has: %s)", kubeconfig, name, strings.Join(known, ", "))
	}
	server := ""
	if c, ok := cfg.Clusters[kctx.Cluster]; ok {
		server = c.Server
	}
	refuse := func(flag, format string, args ...any) error {
		return &RefusedError{Kubeconfig: kubeconfig, Context: name, Flag: flag, Reason: fmt.Sprintf(format, args...)}
	}

	own := ownedBy(abs, o.OwnStateDirs)
	if !own && !o.AllowExisting {
		where := "no state dir was given"
		if len(o.OwnStateDirs) > 0 {
			where = "its clusters' kubeconfigs live under " + strings.Join(o.OwnStateDirs, " and ")
		}
		return refuse(AllowExistingFlag, "gangbench did not create this cluster (%s); a run creates namespaces, PriorityClasses and nodes labelled %s in it", where, ManagedLabel)
	}
	if o.Force {
		return nil
	}
	local, why := localServer(server)
	if own && local {
		return nil
	}
	for _, c := range []struct{ what, value string }{
		{"context", name},
		{"cluster", kctx.Cluster},
		{"server", hostOf(server)},
	} {
		if w := productionWord(c.value); w != "" {
			return refuse(ForceFlag, "it looks like production: %s %q contains %q", c.what, c.value, w)
		}
	}
	if !local {
		return refuse(ForceFlag, "it may be production: %s", why)
	}
	return nil
}

// ownedBy reports whether the file at path really lives inside one of dirs. The file's symlinks are
// resolved (a link placed in a state dir that points at ~/.kube/config is not gangbench's), the
// dirs are taken both as given and resolved (a state dir reached through a symlinked home counts).
func ownedBy(path string, dirs []string) bool {
	real := resolve(path)
	for _, d := range dirs {
		if d == "" {
			continue
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			continue
		}
		for _, base := range []string{abs, resolve(abs)} {
			if rel, err := filepath.Rel(base, real); err == nil && filepath.IsLocal(rel) {
				return true
			}
		}
	}
	return false
}

// resolve is filepath.EvalSymlinks, or p itself when it cannot be resolved (e.g. it does not exist).
func resolve(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// productionWord returns the first of productionWords that s contains as a token, or "".
func productionWord(s string) string {
	tokens := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
	for _, t := range tokens {
		if slices.Contains(productionWords, t) {
			return t
		}
	}
	return ""
}

// hostOf is the host of a server URL, or the string itself when it does not parse as one.
func hostOf(server string) string {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		return server
	}
	return u.Hostname()
}

// localServerNames are host names of clusters that run on the developer's machine: kind's
// in-network "<cluster>-control-plane" endpoint, kwokctl's "kwok-<cluster>-kube-apiserver"
// containers, minikube, and Docker Desktop. Names are matched without DNS, so the check needs no
// network and cannot be fooled by a resolver.
func localServerName(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	switch {
	case h == "localhost", strings.HasSuffix(h, ".localhost"),
		h == "minikube", h == "host.docker.internal", h == "kubernetes.docker.internal",
		strings.HasSuffix(h, "-control-plane"),
		strings.HasPrefix(h, "kwok-") && strings.HasSuffix(h, "-kube-apiserver"):
		return true
	}
	return false
}

// localServer reports whether a server URL points at this machine or a private network: a
// loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7) or link-local address, or one of the
// names in localServerName. Anything else (a public address or any other DNS name, such as a
// cloud provider's endpoint) is treated as possibly production; why says which case applied.
func localServer(server string) (ok bool, why string) {
	if server == "" {
		return false, "its cluster has no server URL"
	}
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		return false, fmt.Sprintf("server %q is not a URL", server)
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() {
			return true, ""
		}
		return false, fmt.Sprintf("server %s is a public address, not loopback or a private network", server)
	}
	if net.ParseIP(host) == nil && localServerName(host) {
		return true, ""
	}
	return false, fmt.Sprintf("server %s is not loopback, a private address, or a kind, kwok or minikube endpoint", server)
}

// DeleteManaged deletes, in the cluster behind cs, the namespaces, PriorityClasses,
// ClusterRoleBindings, ClusterRoles, ValidatingAdmissionPolicies (and their bindings) and nodes labelled ManagedLabel=true, and nothing else: it is
// `gangbench cluster delete` for a cluster gangbench did not create, where everything else belongs
// to someone. Each object is checked for the label again before it is deleted (a server that ignored
// the selector must not turn this into "delete everything"), and deleted with a UID precondition,
// so an object replaced under the same name in the meantime is left alone. Deletion is requested,
// not waited for: namespaces finish terminating on their own. Every failure is returned.
func DeleteManaged(ctx context.Context, cs kubernetes.Interface) error {
	sel := metav1.ListOptions{LabelSelector: ManagedLabel + "=true"}
	var errs []error
	del := func(kind, name string, labels map[string]string, uid types.UID, deleteFn func(context.Context, string, metav1.DeleteOptions) error) {
		if labels[ManagedLabel] != "true" {
			return
		}
		policy := metav1.DeletePropagationBackground
		err := deleteFn(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &policy})
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsConflict(err):
			// The UID precondition failed: the name now belongs to another object, not ours.
		default:
			errs = append(errs, fmt.Errorf("delete %s %s: %w", kind, name, err))
		}
	}

	if l, err := cs.CoreV1().Namespaces().List(ctx, sel); err != nil {
		errs = append(errs, fmt.Errorf("list namespaces: %w", err))
	} else {
		for _, o := range l.Items {
			del("namespace", o.Name, o.Labels, o.UID, cs.CoreV1().Namespaces().Delete)
		}
	}
	if l, err := cs.SchedulingV1().PriorityClasses().List(ctx, sel); err != nil {
		errs = append(errs, fmt.Errorf("list priorityclasses: %w", err))
	} else {
		for _, o := range l.Items {
			del("priorityclass", o.Name, o.Labels, o.UID, cs.SchedulingV1().PriorityClasses().Delete)
		}
	}
	if l, err := cs.RbacV1().ClusterRoleBindings().List(ctx, sel); err != nil {
		errs = append(errs, fmt.Errorf("list clusterrolebindings: %w", err))
	} else {
		for _, o := range l.Items {
			del("clusterrolebinding", o.Name, o.Labels, o.UID, cs.RbacV1().ClusterRoleBindings().Delete)
		}
	}
	if l, err := cs.RbacV1().ClusterRoles().List(ctx, sel); err != nil {
		errs = append(errs, fmt.Errorf("list clusterroles: %w", err))
	} else {
		for _, o := range l.Items {
			del("clusterrole", o.Name, o.Labels, o.UID, cs.RbacV1().ClusterRoles().Delete)
		}
	}
	// Admission policies refusing bindings (suites/framework.RefuseBindings): the binding first, so
	// the policy is never left bound to nothing.
	if l, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, sel); err != nil {
		errs = append(errs, fmt.Errorf("list validatingadmissionpolicybindings: %w", err))
	} else {
		for _, o := range l.Items {
			del("validatingadmissionpolicybinding", o.Name, o.Labels, o.UID, cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete)
		}
	}
	if l, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, sel); err != nil {
		errs = append(errs, fmt.Errorf("list validatingadmissionpolicies: %w", err))
	} else {
		for _, o := range l.Items {
			del("validatingadmissionpolicy", o.Name, o.Labels, o.UID, cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete)
		}
	}
	// Slices go with their nodes by owner; these are slices whose node is not ours or is gone.
	// A cluster that does not serve resource.k8s.io/v1 (before v1.34) has none to delete.
	if l, err := cs.ResourceV1().ResourceSlices().List(ctx, sel); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("list resourceslices: %w", err))
	} else if err == nil {
		for _, o := range l.Items {
			del("resourceslice", o.Name, o.Labels, o.UID, cs.ResourceV1().ResourceSlices().Delete)
		}
	}
	if l, err := cs.ResourceV1().DeviceClasses().List(ctx, sel); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("list deviceclasses: %w", err))
	} else if err == nil {
		for _, o := range l.Items {
			del("deviceclass", o.Name, o.Labels, o.UID, cs.ResourceV1().DeviceClasses().Delete)
		}
	}
	if l, err := cs.CoreV1().Nodes().List(ctx, sel); err != nil {
		errs = append(errs, fmt.Errorf("list nodes: %w", err))
	} else {
		for _, o := range l.Items {
			del("node", o.Name, o.Labels, o.UID, cs.CoreV1().Nodes().Delete)
		}
	}
	return errors.Join(errs...)
}
